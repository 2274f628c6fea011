package gateway_test

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/producer/gateway"
)

var created = time.Date(2026, 11, 2, 9, 14, 3, 0, time.UTC)

// newKey makes a key for tenant and appends it to the key file at path.
func newKey(t *testing.T, path, tenant string) (string, gateway.KeyEntry) {
	t.Helper()
	key, e, err := gateway.NewKey(tenant, created)
	if err != nil {
		t.Fatal(err)
	}
	if err := gateway.AppendKeyFile(path, e); err != nil {
		t.Fatal(err)
	}
	return key, e
}

func TestNewKey(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keys")
	key, e := newKey(t, path, "acme")
	if !regexp.MustCompile(`^zl_[0-9a-f]{12}_[a-z2-7]{52}$`).MatchString(key) {
		t.Fatalf("key %q", key)
	}
	if id, ok := gateway.KeyID(key); !ok || id != e.ID || !strings.HasPrefix(key, e.ID+"_") {
		t.Fatalf("KeyID(%q) = %q, %v; entry id %q", key, id, ok, e.ID)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	secret := key[len(e.ID)+1:]
	if bytes.Contains(b, []byte(secret)) || !bytes.Contains(b, []byte(e.ID+" acme sha256:")) || !bytes.Contains(b, []byte("2026-11-02T09:14:03Z")) {
		t.Fatalf("key file:\n%s", b)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", fi.Mode(), err)
	}
	got, err := gateway.ReadKeyFile(path)
	if err != nil || len(got) != 1 || got[0] != e {
		t.Fatalf("read back %+v, %v; want %+v", got, err, e)
	}
	if err := gateway.AppendKeyFile(path, e); err == nil {
		t.Fatal("the same id appended twice")
	}
	if _, _, err := gateway.NewKey("no spaces", created); err == nil {
		t.Fatal("a key for a bad tenant")
	}
	for _, k := range []string{"", "zl_", "zl_3f9a0c1b2d4e_", "zl_3F9A0C1B2D4E_x", "zl_3f9a0c1b2d4ex", "sk-abc"} {
		if id, ok := gateway.KeyID(k); ok {
			t.Errorf("KeyID(%q) = %q", k, id)
		}
	}
}

func TestParseKeyFile(t *testing.T) {
	t.Parallel()
	const hash = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	tests := []struct {
		name, file string
		want       int
		wantErr    error
	}{
		{"valid", "# comment\n\nzl_3f9a0c1b2d4e acme " + hash + " 2026-11-02T09:14:03Z\n  zl_000000000000 globex " + hash + " 2026-11-02T10:00:00+01:00", 2, nil},
		{"empty", "", 0, nil},
		{"old plain text", "sk-plain-secret acme\n", 0, gateway.ErrPlaintextKeys},
		{"three fields", "zl_3f9a0c1b2d4e acme " + hash, 0, errAny},
		{"bad id", "zlk_3f9a0c1b2d4e acme " + hash + " 2026-11-02T09:14:03Z", 0, errAny},
		{"bad tenant", "zl_3f9a0c1b2d4e acme.corp " + hash + " 2026-11-02T09:14:03Z", 0, errAny},
		{"bad hash", "zl_3f9a0c1b2d4e acme sha256:9f86 2026-11-02T09:14:03Z", 0, errAny},
		{"md5", "zl_3f9a0c1b2d4e acme md5:" + hash[7:] + " 2026-11-02T09:14:03Z", 0, errAny},
		{"bad time", "zl_3f9a0c1b2d4e acme " + hash + " yesterday", 0, errAny},
		{"repeated id", "zl_3f9a0c1b2d4e acme " + hash + " 2026-11-02T09:14:03Z\nzl_3f9a0c1b2d4e globex " + hash + " 2026-11-02T09:14:03Z", 0, errAny},
	}
	for _, tt := range tests {
		got, err := gateway.ParseKeyFile(strings.NewReader(tt.file))
		var kfe *gateway.KeyFileError
		switch {
		case tt.wantErr == nil && (err != nil || len(got) != tt.want):
			t.Errorf("%s: %d entries, %v; want %d", tt.name, len(got), err, tt.want)
		case tt.wantErr == errAny && !errors.As(err, &kfe):
			t.Errorf("%s: %v, want a *KeyFileError", tt.name, err)
		case tt.wantErr != nil && tt.wantErr != errAny && !errors.Is(err, tt.wantErr):
			t.Errorf("%s: %v, want %v", tt.name, err, tt.wantErr)
		case err != nil && strings.Contains(err.Error(), "sk-plain-secret"):
			t.Errorf("%s: the error quotes the line: %v", tt.name, err)
		}
	}
}

// errAny stands for "any *KeyFileError" in TestParseKeyFile.
var errAny = errors.New("any key file error")

// TestKeyring: keys from a file and plain keys authenticate; a wrong
// secret, an unknown key or a revoked one do not; the file is reread when
// it changes, and a broken file keeps the keys read before.
func TestKeyring(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keys")
	acme, acmeEntry := newKey(t, path, "acme")
	var logs bytes.Buffer
	k, err := gateway.NewKeyring(gateway.KeyringConfig{File: path, Keys: map[string]string{"dev-key": "devco"},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	check := func(key, want string) {
		t.Helper()
		if got, ok := k.Authenticate(key); got != want || ok != (want != "") {
			t.Errorf("Authenticate(%q) = %q, %v; want %q", key, got, ok, want)
		}
	}
	check(acme, "acme")
	check("dev-key", "devco")
	check(acmeEntry.ID+"_"+strings.Repeat("a", 52), "") // the right id, a wrong secret
	check(acme+"x", "")
	check("dev-key ", "")
	check("", "")
	if k.Len() != 2 {
		t.Errorf("Len = %d", k.Len())
	}

	globex, _ := newKey(t, path, "globex")
	check(globex, "globex") // added without a restart
	if _, err := gateway.RevokeKeyFile(path, acmeEntry.ID); err != nil {
		t.Fatal(err)
	}
	check(acme, "") // revoked without a restart
	check(globex, "globex")
	if _, err := gateway.RevokeKeyFile(path, acmeEntry.ID); !errors.Is(err, gateway.ErrKeyNotFound) {
		t.Errorf("revoking twice: %v", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode after a revoke: %v %v", fi.Mode(), err)
	}

	if err := os.WriteFile(path, []byte("sk-plain-secret acme\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	check(globex, "globex") // a broken file keeps the keys read before
	if !strings.Contains(logs.String(), path+":1:") || strings.Contains(logs.String(), "sk-plain-secret") {
		t.Errorf("logs of a broken key file:\n%s", logs.String())
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	check(globex, "") // an empty file refuses every file key
	check("dev-key", "devco")

	if _, err := gateway.NewKeyring(gateway.KeyringConfig{File: filepath.Join(t.TempDir(), "none")}); err == nil {
		t.Error("a keyring on a missing file")
	}
	old := filepath.Join(t.TempDir(), "old")
	os.WriteFile(old, []byte("sk-plain-secret acme\n"), 0o600)
	if _, err := gateway.NewKeyring(gateway.KeyringConfig{File: old}); !errors.Is(err, gateway.ErrPlaintextKeys) ||
		!strings.Contains(err.Error(), "zerolayer keys add") {
		t.Errorf("a keyring on an old key file: %v", err)
	}
	if err := gateway.AppendKeyFile(old, acmeEntry); !errors.Is(err, gateway.ErrPlaintextKeys) {
		t.Errorf("appending to an old key file: %v", err)
	}
}

// FuzzParseKeyFile: the parser never panics, and what it accepts it
// writes back into a file that parses to the same entries.
func FuzzParseKeyFile(f *testing.F) {
	f.Add("# c\nzl_3f9a0c1b2d4e acme sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 2026-11-02T09:14:03Z\n")
	f.Add("zl_3f9a0c1b2d4e acme sha256:9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08 2026-11-02T09:14:03.5+02:00")
	f.Add("key acme\n")
	f.Add("\n\n#\n \t\n")
	f.Fuzz(func(t *testing.T, file string) {
		entries, err := gateway.ParseKeyFile(strings.NewReader(file))
		if err != nil {
			return
		}
		path := filepath.Join(t.TempDir(), "keys")
		for _, e := range entries {
			if err := gateway.AppendKeyFile(path, e); err != nil {
				t.Fatalf("append %+v: %v", e, err)
			}
		}
		back, err := gateway.ReadKeyFile(path)
		if len(entries) == 0 {
			return
		}
		if err != nil || len(back) != len(entries) {
			t.Fatalf("read back: %d entries, %v; want %d", len(back), err, len(entries))
		}
		for i := range back {
			e := entries[i]
			e.Created = e.Created.Truncate(time.Second)
			if back[i] != e {
				t.Fatalf("entry %d: %+v, want %+v", i, back[i], e)
			}
		}
	})
}
