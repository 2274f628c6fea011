package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestKeysCommand: add prints a key once and stores only its hash; list
// shows the id and tenant, never the secret; revoke removes the key.
func TestKeysCommand(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys")
	code, key, errOut := runCLI("keys", "add", "--file", file, "--tenant", "acme")
	key = strings.TrimSpace(key)
	id, secret, _ := strings.Cut(strings.TrimPrefix(key, "zl_"), "_")
	id = "zl_" + id
	if code != 0 || len(secret) < 43 || !strings.Contains(errOut, id) || strings.Contains(errOut, secret) {
		t.Fatalf("keys add: status %d, stdout %q, stderr %q", code, key, errOut)
	}
	code, out, _ := runCLI("keys", "list", "--file", file)
	if code != 0 || !strings.HasPrefix(out, "ID") || !strings.Contains(out, id+"  acme    20") || strings.Contains(out, secret) {
		t.Fatalf("keys list: status %d, %q", code, out)
	}
	if code, _, errOut := runCLI("keys", "revoke", "--file", file, id); code != 0 || !strings.Contains(errOut, id+" of tenant acme removed") {
		t.Fatalf("keys revoke: status %d, %q", code, errOut)
	}
	if code, out, _ := runCLI("keys", "list", "--file", file); code != 0 || strings.Contains(out, id) {
		t.Fatalf("keys list after the revoke: status %d, %q", code, out)
	}
	if code, _, errOut := runCLI("keys", "revoke", "--file", file, id); code != 1 || !strings.Contains(errOut, "no such key id") {
		t.Fatalf("revoking twice: status %d, %q", code, errOut)
	}
}
