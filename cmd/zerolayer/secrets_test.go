package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"golang.org/x/crypto/bcrypt"

	"github.com/zerolayer/zerolayer/producer/gateway"
)

// TestSecretsInit: `zerolayer secrets init` on the shipped nats.conf
// writes every password the compose file requires, private to its owner,
// each with a bcrypt hash that matches it; the NATS server runs the
// shipped file with those hashes and admits the plain passwords; the
// printed API keys are the key file's; a second run keeps everything.
func TestSecretsInit(t *testing.T) {
	dir := t.TempDir()
	conf, err := filepath.Abs(filepath.Join("..", "..", "ops", "nats", "nats.conf"))
	if err != nil {
		t.Fatal(err)
	}
	envFile, keysFile := filepath.Join(dir, ".env"), filepath.Join(dir, "secrets", "api-keys")
	args := []string{"secrets", "init", "--env-file", envFile, "--nats-conf", conf, "--keys-file", keysFile}
	code, out, errOut := runCLI(args...)
	if code != 0 {
		t.Fatalf("secrets init: %d %s", code, errOut)
	}
	for _, p := range []string{envFile, keysFile} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v; want mode 0600", p, fi.Mode(), err)
		}
	}
	env, _, err := readEnvFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	compose := readFile(t, filepath.Join("..", "..", "docker-compose.yml"))
	for _, f := range strings.Split(compose, "${")[1:] {
		name, _, _ := strings.Cut(f, "}")
		if v, ok := strings.CutSuffix(name, ":?run zerolayer secrets init"); ok && env[v] == "" {
			t.Errorf("compose requires %s, which secrets init did not write", v)
		}
	}
	for name, v := range env {
		if plain, ok := strings.CutSuffix(name, "_BCRYPT"); ok {
			if bcrypt.CompareHashAndPassword([]byte(v), []byte(env[plain])) != nil {
				t.Errorf("%s is not the hash of %s", name, plain)
			}
			t.Setenv(name, v)
		}
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	opts.Host, opts.Port, opts.HTTPPort, opts.StoreDir, opts.NoLog, opts.NoSigs = "127.0.0.1", server.RANDOM_PORT, 0, t.TempDir(), true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	defer srv.Shutdown()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("worker", env["ZL_WORKER_PASSWORD"]))
	if err != nil {
		t.Fatalf("the worker connects with its password: %v", err)
	}
	nc.Close()
	if _, err := nats.Connect(srv.ClientURL(), nats.UserInfo("worker", env["ZL_WORKER_PASSWORD_BCRYPT"])); err == nil {
		t.Error("the hash itself is admitted as a password")
	}

	keys, err := gateway.NewKeyring(gateway.KeyringConfig{File: keysFile})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("printed %q; want a key for acme and globex", out)
	}
	for _, l := range lines {
		tenant, key, _ := strings.Cut(l, "\t")
		if got, ok := keys.Authenticate(key); !ok || got != tenant {
			t.Errorf("key of %s authenticates as %q, %v", tenant, got, ok)
		}
	}

	before, _ := os.ReadFile(envFile)
	if code, out, errOut := runCLI(args...); code != 0 || out != "" || !strings.Contains(errOut, "nothing changed") {
		t.Errorf("second run: %d %q %q", code, out, errOut)
	}
	if after, _ := os.ReadFile(envFile); string(after) != string(before) {
		t.Error("the second run changed .env")
	}
}

// TestGatewayRefusesWeakKeys: a placeholder or short plain key is not an
// API key: the gateway refuses to start with one.
func TestGatewayRefusesWeakKeys(t *testing.T) {
	for _, keys := range []string{"change-me-key-acme=acme", "short=acme", "zl_ok_0123456789abcdefghij=acme,CHANGEME-0123456789abcdef=globex"} {
		t.Setenv("ZEROLAYER_API_KEYS", keys)
		if code, _, errOut := runCLI("gateway", "--nats-url", "nats://127.0.0.1:1"); code != 2 || !strings.Contains(errOut, "placeholder or shorter") {
			t.Errorf("ZEROLAYER_API_KEYS=%s: status %d, %q", keys, code, errOut)
		}
	}
}
