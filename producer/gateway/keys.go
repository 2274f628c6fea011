package gateway

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
)

// API keys and the key file.
//
// A key is "zl_<id>_<secret>", 68 characters: "zl_3f9a0c1b2d4e_" then
// 52 characters of [a-z2-7]. The id, "zl_" and 12 lowercase hex digits
// (6 random bytes), is public: it names the key in the key file, in
// `zerolayer keys list`, in logs and when revoking, so none of these needs
// the secret. The secret is 32 random bytes (256 bits) from crypto/rand,
// in lowercase unpadded base32 (RFC 4648), which a double click selects
// whole and no URL or shell mangles.
//
// The key file stores, per key, a line
//
//	ID TENANT sha256:HEX CREATED
//
// e.g. "zl_3f9a0c1b2d4e acme sha256:9f86…0a08 2026-11-02T09:14:03Z": the
// SHA-256 of the whole key, never the key. A secret of 256 random bits
// needs no slow password KDF (bcrypt, scrypt, argon2): those stretch
// guessable human passwords, and nobody brute-forces 2^256; a single
// SHA-256, as GitHub's and Stripe's tokens are stored, is the standard
// choice and costs the gateway nothing per request. The gateway finds the
// line by the key's id and compares the hashes with
// crypto/subtle.ConstantTimeCompare. Blank lines and lines starting with
// '#' are comments.

const (
	keyPrefix    = "zl_"
	keyIDHexLen  = 12 // 6 random bytes
	keyIDLen     = len(keyPrefix) + keyIDHexLen
	secretBytes  = 32
	hashPrefix   = "sha256:"
	keyFileMode  = 0o600
	keyFileIntro = "# zerolayer API keys: ID TENANT sha256:HASH CREATED, one key a line; no secrets.\n" +
		"# Manage with 'zerolayer keys add|list|revoke --file FILE'.\n"
)

var secretEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// KeyEntry is one key as the key file stores it: everything but the
// secret.
type KeyEntry struct {
	// ID is the key's public prefix, "zl_" and 12 hex digits.
	ID string
	// Tenant is the tenant the key acts as.
	Tenant string
	// Hash is the SHA-256 of the whole key.
	Hash [sha256.Size]byte
	// Created is when the key was made, to the second.
	Created time.Time
}

// NewKey makes a key for tenant, created at now. It returns the key, to
// hand to the client once, and its entry, to store.
func NewKey(tenant string, now time.Time) (key string, e KeyEntry, err error) {
	if err := contracts.ValidateTenant(tenant); err != nil {
		return "", KeyEntry{}, err
	}
	b := make([]byte, keyIDHexLen/2+secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", KeyEntry{}, err
	}
	id := keyPrefix + hex.EncodeToString(b[:keyIDHexLen/2])
	key = id + "_" + secretEncoding.EncodeToString(b[keyIDHexLen/2:])
	return key, KeyEntry{ID: id, Tenant: tenant, Hash: sha256.Sum256([]byte(key)), Created: now.UTC().Truncate(time.Second)}, nil
}

// KeyID returns the public id of a key of the form "zl_<id>_<secret>",
// which is safe to log; ok is false for anything else.
func KeyID(key string) (id string, ok bool) {
	if len(key) <= keyIDLen+1 || key[keyIDLen] != '_' || !validKeyID(key[:keyIDLen]) {
		return "", false
	}
	return key[:keyIDLen], true
}

func validKeyID(id string) bool {
	if len(id) != keyIDLen || !strings.HasPrefix(id, keyPrefix) {
		return false
	}
	for _, c := range id[len(keyPrefix):] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// line is e as a key file line.
func (e KeyEntry) line() string {
	return fmt.Sprintf("%s %s %s%x %s\n", e.ID, e.Tenant, hashPrefix, e.Hash, e.Created.UTC().Format(time.RFC3339))
}

// ParseKeyFile reads a key file. An error is a *KeyFileError naming the
// line (wrapping ErrPlaintextKeys for a file in the old 'KEY TENANT'
// format); it never quotes the line.
func ParseKeyFile(r io.Reader) ([]KeyEntry, error) { return parseKeyFile("", r) }

// ReadKeyFile reads the key file at path.
func ReadKeyFile(path string) ([]KeyEntry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseKeyFile(path, bytes.NewReader(b))
}

func parseKeyFile(path string, r io.Reader) ([]KeyEntry, error) {
	var out []KeyEntry
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		e, err := parseKeyLine(line)
		if err == nil && seen[e.ID] {
			err = errors.New("the key id repeats an earlier line")
		}
		if err != nil {
			return nil, &KeyFileError{Path: path, Line: n, Err: err}
		}
		seen[e.ID] = true
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, &KeyFileError{Path: path, Line: n + 1, Err: err}
	}
	return out, nil
}

func parseKeyLine(line string) (KeyEntry, error) {
	f := strings.Fields(line)
	switch {
	case len(f) == 2:
		return KeyEntry{}, ErrPlaintextKeys
	case len(f) != 4:
		return KeyEntry{}, fmt.Errorf("want 'ID TENANT sha256:HASH CREATED', got %d fields", len(f))
	case !validKeyID(f[0]):
		return KeyEntry{}, errors.New("the id is not 'zl_' and 12 lowercase hex digits")
	}
	e := KeyEntry{ID: f[0], Tenant: f[1]}
	if err := contracts.ValidateTenant(e.Tenant); err != nil {
		return KeyEntry{}, err
	}
	h, ok := strings.CutPrefix(f[2], hashPrefix)
	if !ok || len(h) != hex.EncodedLen(sha256.Size) {
		return KeyEntry{}, errors.New("the hash is not 'sha256:' and 64 hex digits")
	}
	if _, err := hex.Decode(e.Hash[:], []byte(h)); err != nil {
		return KeyEntry{}, errors.New("the hash is not 'sha256:' and 64 hex digits")
	}
	t, err := time.Parse(time.RFC3339, f[3])
	if err != nil {
		return KeyEntry{}, errors.New("the creation time is not RFC 3339 (2026-11-02T09:14:03Z)")
	}
	e.Created = t.UTC()
	return e, nil
}

// AppendKeyFile adds e to the key file at path, creating it (mode 0600)
// if need be. It refuses a file that does not parse, an old plain-text
// file included, and an id already there. Two writers at once may lose
// one's change: run one `zerolayer keys` at a time per file.
func AppendKeyFile(path string, e KeyEntry) error {
	old, err := ReadKeyFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, o := range old {
		if o.ID == e.ID {
			return fmt.Errorf("%s: the key id %s is already there", path, e.ID)
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, keyFileMode)
	if err != nil {
		return err
	}
	text := e.line()
	if fi, err := f.Stat(); err == nil && fi.Size() == 0 {
		text = keyFileIntro + text
	}
	if _, err := io.WriteString(f, text); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// RevokeKeyFile removes the key id from the key file at path and returns
// its entry; the other lines, comments included, stay as they are. The
// file is replaced by a rename, so a reader sees the old file or the new,
// never half of one. An id not in the file is ErrKeyNotFound.
func RevokeKeyFile(path, id string) (KeyEntry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return KeyEntry{}, err
	}
	entries, err := parseKeyFile(path, bytes.NewReader(b))
	if err != nil {
		return KeyEntry{}, err
	}
	var gone *KeyEntry
	for i := range entries {
		if entries[i].ID == id {
			gone = &entries[i]
		}
	}
	if gone == nil {
		return KeyEntry{}, fmt.Errorf("%s: %w %q", path, ErrKeyNotFound, id)
	}
	var out bytes.Buffer
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == id {
			continue
		}
		out.WriteString(line)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".keys-*") // mode 0600
	if err != nil {
		return KeyEntry{}, err
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	if _, err := tmp.Write(out.Bytes()); err != nil {
		tmp.Close()
		return KeyEntry{}, err
	}
	if err := errors.Join(tmp.Sync(), tmp.Close()); err != nil {
		return KeyEntry{}, err
	}
	return *gone, os.Rename(tmp.Name(), path)
}

// KeyringConfig configures a Keyring.
type KeyringConfig struct {
	// File is a key file written by `zerolayer keys add`. The keyring
	// rereads it when it changes (another inode, size or modification
	// time), which it checks at every Authenticate, so a revoked key is
	// refused from the next request on, without a restart. A file that no
	// longer parses (or is gone) is logged and the keys read before stay
	// in force: empty the file, do not delete it, to refuse every key.
	// Empty: no file.
	File string
	// Keys maps plain-text keys (any string, not only zl_ keys) to
	// tenants, for development (ZEROLAYER_API_KEYS). They are hashed at
	// once; the keyring keeps no plaintext.
	Keys map[string]string
	// Logger receives the file's reloads and reload failures. Defaults to
	// slog.Default().
	Logger *slog.Logger
}

// Keyring authenticates API keys against their hashes. It is safe for
// concurrent use.
type Keyring struct {
	file   string
	log    *slog.Logger
	static map[string]KeyEntry // from KeyringConfig.Keys, by id

	mu       sync.Mutex
	seen     os.FileInfo         // the file's last version looked at
	fromFile map[string]KeyEntry // the last version that parsed, by id
}

// NewKeyring returns the keyring of cfg; a key file that does not parse
// is an error.
func NewKeyring(cfg KeyringConfig) (*Keyring, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	k := &Keyring{file: cfg.File, log: cfg.Logger, static: map[string]KeyEntry{}}
	for key, tenant := range cfg.Keys {
		if key == "" {
			return nil, errors.New("an empty API key")
		}
		if err := contracts.ValidateTenant(tenant); err != nil {
			return nil, fmt.Errorf("the tenant of a key: %w", err)
		}
		h := sha256.Sum256([]byte(key))
		k.static[lookupID(key, h)] = KeyEntry{ID: lookupID(key, h), Tenant: tenant, Hash: h}
	}
	if k.file != "" {
		fi, err := os.Stat(k.file)
		if err != nil {
			return nil, err
		}
		entries, err := ReadKeyFile(k.file)
		if err != nil {
			return nil, err
		}
		k.seen, k.fromFile = fi, byID(entries)
	}
	return k, nil
}

// lookupID is the id a key is found by: a zl_ key's own, else one
// derived from its hash (for the plain keys of KeyringConfig.Keys).
func lookupID(key string, h [sha256.Size]byte) string {
	if id, ok := KeyID(key); ok {
		return id
	}
	return "hash_" + hex.EncodeToString(h[:6])
}

func byID(entries []KeyEntry) map[string]KeyEntry {
	m := make(map[string]KeyEntry, len(entries))
	for _, e := range entries {
		m[e.ID] = e
	}
	return m
}

// Authenticate returns the tenant of key, if the keyring holds it.
func (k *Keyring) Authenticate(key string) (tenant string, ok bool) {
	h := sha256.Sum256([]byte(key))
	id := lookupID(key, h)
	for _, m := range []map[string]KeyEntry{k.static, k.fileKeys()} {
		if e, found := m[id]; found && subtle.ConstantTimeCompare(h[:], e.Hash[:]) == 1 {
			return e.Tenant, true
		}
	}
	return "", false
}

// Len returns the number of keys held.
func (k *Keyring) Len() int { return len(k.static) + len(k.fileKeys()) }

// fileKeys returns the key file's entries, reread if the file changed.
func (k *Keyring) fileKeys() map[string]KeyEntry {
	if k.file == "" {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	fi, err := os.Stat(k.file)
	if err == nil && os.SameFile(fi, k.seen) && fi.Size() == k.seen.Size() && fi.ModTime().Equal(k.seen.ModTime()) {
		return k.fromFile
	}
	var entries []KeyEntry
	if err == nil {
		// Stat before reading: a change after the stat is seen next time.
		entries, err = ReadKeyFile(k.file)
	}
	if err != nil {
		if k.seen != nil { // log once per change, not per request
			k.log.Error("gateway: rereading the key file; the keys read before stay in force", "file", k.file, "keys", len(k.fromFile), "error", err)
		}
		k.seen = fi // nil when gone: a file that comes back is read
		return k.fromFile
	}
	k.seen, k.fromFile = fi, byID(entries)
	k.log.Info("gateway: key file reread", "file", k.file, "keys", len(entries))
	return k.fromFile
}
