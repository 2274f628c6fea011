package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/zerolayer/zerolayer/worker/model/gguf"
)

// ErrNotFound is returned when no file matches a model name.
var ErrNotFound = errors.New("store: model not found")

// ErrChecksum is returned when a download does not match its pinned hash.
var ErrChecksum = errors.New("store: checksum mismatch")

// ErrUnknownModel is returned by Pull for a name not in the catalog.
var ErrUnknownModel = errors.New("store: not in the catalog")

// Entry is a downloadable model.
type Entry struct {
	Name   string // lookup name, e.g. "stories260k"
	File   string // file name to store it under
	URL    string
	SHA256 string
	Size   int64
	About  string
}

// Catalog lists the models Pull knows. The sha256 is the one pinned for the
// file in the project's model fixtures.
var Catalog = []Entry{{
	Name:   "stories260k",
	File:   "stories260K.gguf",
	URL:    "https://huggingface.co/ggml-org/tiny-llamas/resolve/main/stories260K.gguf",
	SHA256: "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d",
	Size:   1185376,
	About:  "260K-parameter TinyStories Llama (F32), for smoke tests",
}}

// Resolve returns the path of the model named by nameOrPath: an existing
// file path is returned as it is; otherwise the name is looked up in dirs.
func Resolve(nameOrPath string, dirs []string) (string, error) {
	if nameOrPath == "" {
		return "", fmt.Errorf("%w: no model given", ErrNotFound)
	}
	if st, err := os.Stat(nameOrPath); err == nil && !st.IsDir() {
		return nameOrPath, nil
	}
	if strings.ContainsRune(nameOrPath, os.PathSeparator) {
		// A split model's base path (dir/m or dir/m.gguf) names its first
		// file, dir/m-00001-of-0000N.gguf.
		prefix := strings.TrimSuffix(nameOrPath, ".gguf")
		if m, _ := filepath.Glob(escapeGlob(prefix) + "-00001-of-[0-9][0-9][0-9][0-9][0-9].gguf"); len(m) > 0 {
			return m[0], nil
		}
		return "", fmt.Errorf("%w: no file at %s", ErrNotFound, nameOrPath)
	}
	named := func(base string) bool {
		return strings.EqualFold(base, nameOrPath) || strings.EqualFold(strings.TrimSuffix(base, ".gguf"), nameOrPath) ||
			strings.EqualFold(ModelName(base), nameOrPath) && !gguf.IsLaterShard(base)
	}
	for _, d := range dirs {
		if found := filesIn(d, named); len(found) > 0 {
			return found[0], nil
		}
	}
	hint := ""
	for _, c := range Catalog {
		if strings.EqualFold(c.Name, nameOrPath) {
			hint = fmt.Sprintf("; run `zerolayer models pull %s` to download it", c.Name)
		}
	}
	return "", fmt.Errorf("%w: %q is not a file and is not in %s (or a folder right below one)%s", ErrNotFound, nameOrPath, strings.Join(dirs, ":"), hint)
}

// Files lists the .gguf files in dirs and in the folders right below them,
// first folder first, each folder's files before its subfolders', names
// sorted. A split model (NAME-0000k-of-0000N.gguf) is listed once, by its
// first file.
func Files(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		out = append(out, filesIn(d, func(base string) bool {
			return strings.HasSuffix(strings.ToLower(base), ".gguf") && !gguf.IsLaterShard(base)
		})...)
	}
	return out
}

func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// ModelName is the name a model file is known by: its base name without
// ".gguf", and for a split model without "-00001-of-0000N" ("qwen-7b" for
// qwen-7b-00001-of-00003.gguf).
func ModelName(path string) string {
	base := filepath.Base(path)
	if prefix, _, _, ok := gguf.SplitName(base); ok {
		return prefix
	}
	return strings.TrimSuffix(base, ".gguf")
}

// filesIn returns the files of dir whose base name match accepts, then
// those of the folders right below dir, sorted within each folder. A folder
// that cannot be read is skipped.
func filesIn(dir string, match func(base string) bool) []string {
	ents, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil
	}
	var out, subdirs []string
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		switch {
		case e.IsDir():
			subdirs = append(subdirs, p)
		case match(e.Name()):
			out = append(out, p)
		}
	}
	for _, sd := range subdirs {
		ents, err := os.ReadDir(sd)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if !e.IsDir() && match(e.Name()) {
				out = append(out, filepath.Join(sd, e.Name()))
			}
		}
	}
	return out
}

// Lookup returns the catalog entry with the given name.
func Lookup(name string) (Entry, error) {
	for _, c := range Catalog {
		if strings.EqualFold(c.Name, name) {
			return c, nil
		}
	}
	var names []string
	for _, c := range Catalog {
		names = append(names, c.Name)
	}
	return Entry{}, fmt.Errorf("%w: %q (known: %s)", ErrUnknownModel, name, strings.Join(names, ", "))
}

// Pull downloads e into dir, verifying the sha256 before the file appears
// under its final name. An existing file with the right hash is kept.
func Pull(ctx context.Context, client *http.Client, e Entry, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	dst := filepath.Join(dir, e.File)
	if sum, err := fileSHA256(dst); err == nil && sum == e.SHA256 {
		return dst, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.URL, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("store: download %s: %w (offline? copy the file into %s by hand: %s, sha256 %s)", e.Name, err, dir, e.File, e.SHA256)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("store: download %s: HTTP %s from %s", e.Name, resp.Status, e.URL)
	}
	tmp, err := os.CreateTemp(dir, e.File+".part-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	limit := e.Size + 1
	if e.Size <= 0 {
		limit = 64 << 30
	}
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(resp.Body, limit))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("store: download %s: %w", e.Name, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != e.SHA256 {
		return "", fmt.Errorf("%w: %s: got sha256 %s (%d bytes), pinned %s", ErrChecksum, e.Name, got, n, e.SHA256)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", err
	}
	return dst, nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
