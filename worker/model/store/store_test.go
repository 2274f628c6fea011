package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	t.Parallel()
	a, b := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(b, "Tiny-Model.gguf"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(a, "other.gguf"), []byte("x"), 0o644)
	got, err := Resolve("tiny-model", []string{a, b})
	if err != nil || got != filepath.Join(b, "Tiny-Model.gguf") {
		t.Fatalf("Resolve = %q, %v", got, err)
	}
	if got, err := Resolve(filepath.Join(a, "other.gguf"), nil); err != nil || got != filepath.Join(a, "other.gguf") {
		t.Fatalf("path: %q %v", got, err)
	}
	_, err = Resolve("stories260k", []string{a})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "models pull stories260k") {
		t.Fatalf("missing catalog model: %v", err)
	}
	if fs := Files([]string{a, b}); len(fs) != 2 {
		t.Fatalf("Files = %v", fs)
	}
}

// TestResolveFolderPerModel: a models folder holding one folder per model
// (models/stories260K/stories260K.gguf, as ../shared/models does) is
// searched by naming the models folder; a file at the top wins over one
// below, and nothing deeper than one folder is searched.
func TestResolveFolderPerModel(t *testing.T) {
	t.Parallel()
	models := t.TempDir()
	write := func(rel string) string {
		p := filepath.Join(models, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stories := write("stories260K/stories260K.gguf")
	write("stories260K/README.md")
	top := write("tiny.gguf")
	write("tiny/tiny.gguf")
	write("deep/er/hidden.gguf")

	tests := []struct {
		name    string
		want    string
		wantErr error
	}{
		{"stories260k", stories, nil},
		{"stories260K.gguf", stories, nil},
		{"tiny", top, nil},
		{"hidden", "", ErrNotFound},
	}
	for _, tt := range tests {
		got, err := Resolve(tt.name, []string{models})
		if got != tt.want || !errors.Is(err, tt.wantErr) {
			t.Errorf("Resolve(%q) = %q, %v; want %q, %v", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
	want := []string{top, stories, filepath.Join(models, "tiny", "tiny.gguf")}
	if got := Files([]string{models}); !slices.Equal(got, want) {
		t.Errorf("Files = %v, want %v", got, want)
	}
}

func TestPull(t *testing.T) {
	t.Parallel()
	body := []byte("GGUF fake model bytes")
	sum := sha256.Sum256(body)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bad" {
			w.Write([]byte("tampered"))
			return
		}
		w.Write(body)
	}))
	defer srv.Close()
	dir := t.TempDir()
	e := Entry{Name: "m", File: "m.gguf", URL: srv.URL + "/ok", SHA256: hex.EncodeToString(sum[:]), Size: int64(len(body))}
	p, err := Pull(context.Background(), srv.Client(), e, dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); string(got) != string(body) {
		t.Fatalf("pulled %q", got)
	}
	bad := e
	bad.File, bad.URL = "bad.gguf", srv.URL+"/bad"
	if _, err := Pull(context.Background(), srv.Client(), bad, dir); !errors.Is(err, ErrChecksum) {
		t.Fatalf("tampered download: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "bad.gguf")); !os.IsNotExist(err) {
		t.Fatal("a file that failed its checksum was left in place")
	}
	if _, err := Lookup("nope"); !errors.Is(err, ErrUnknownModel) {
		t.Fatalf("Lookup: %v", err)
	}
}

// TestSplitModel: a split model is found by its base name (in a folder or
// as a path) and listed once, by its first file.
func TestSplitModel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, n := range []string{"big-00001-of-00003.gguf", "big-00002-of-00003.gguf", "big-00003-of-00003.gguf", "small.gguf"} {
		os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644)
	}
	first := filepath.Join(dir, "big-00001-of-00003.gguf")
	for _, name := range []string{"big", "BIG", "big-00001-of-00003", filepath.Join(dir, "big"), filepath.Join(dir, "big.gguf")} {
		if got, err := Resolve(name, []string{dir}); err != nil || got != first {
			t.Errorf("Resolve(%q) = %q, %v; want %s", name, got, err, first)
		}
	}
	if got, err := Resolve("big-00002-of-00003", []string{dir}); err != nil || !strings.HasSuffix(got, "big-00002-of-00003.gguf") {
		t.Errorf("a later shard named in full: %q %v", got, err)
	}
	if fs := Files([]string{dir}); !slices.Equal(fs, []string{first, filepath.Join(dir, "small.gguf")}) {
		t.Errorf("Files = %v", fs)
	}
	if ModelName(first) != "big" || ModelName("/x/small.gguf") != "small" {
		t.Errorf("ModelName: %q %q", ModelName(first), ModelName("/x/small.gguf"))
	}
}
