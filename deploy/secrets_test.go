package deploy_test

import (
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"golang.org/x/crypto/bcrypt"
	"sigs.k8s.io/yaml"
)

// shippedConfigs lists the files a deployment runs as they are: the
// compose file, everything under ops/ but the Go packages, and deploy/.
func shippedConfigs(t *testing.T) []string {
	t.Helper()
	files := []string{filepath.Join("..", "docker-compose.yml"), filepath.Join("..", "Dockerfile")}
	for _, root := range []string{filepath.Join("..", "ops"), "."} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			switch filepath.Ext(p) {
			case ".conf", ".yml", ".yaml", ".json", ".env":
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// TestShippedConfigsHoldNoSecrets: no shipped file carries a default
// secret (a password, key or token anyone could read here), the NATS
// configuration holds bcrypt hashes only, compose refuses to start
// without each secret instead of falling back to one, and the NATS
// monitoring port (every connection's user, subscriptions and consumers)
// is on the loopback interface only.
func TestShippedConfigsHoldNoSecrets(t *testing.T) {
	weak := regexp.MustCompile(`(?i)change-?me|changeit|password123|hunter2|admin:admin|secret123`)
	secretName := `\w*(?:PASSWORD|SECRET|TOKEN|API_KEY|APIKEY)\w*`
	defaulted := regexp.MustCompile(`\$\{(` + secretName + `):?-`)
	literal := regexp.MustCompile(`(?i)\bpassword\s*[:=]\s*["']?([^\s"',}$][^\s"',}]*)`)
	for _, p := range shippedConfigs(t) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			if m := weak.FindString(line); m != "" {
				t.Errorf("%s:%d: a default secret %q", p, i+1, m)
			}
			if m := defaulted.FindStringSubmatch(line); m != nil {
				t.Errorf("%s:%d: %s has a default; a secret is required (${%s:?…})", p, i+1, m[1], m[1])
			}
			if m := literal.FindStringSubmatch(line); m != nil && !strings.Contains(m[1], "secretKeyRef") {
				t.Errorf("%s:%d: a password written in the file: %q", p, i+1, line)
			}
		}
	}

	// What `zerolayer secrets init` writes stays out of git and out of
	// the image built from this folder.
	for file, want := range map[string][]string{".gitignore": {"/.env", "/secrets/"}, ".dockerignore": {".env", "secrets/"}} {
		lines := strings.Split(string(readFile(t, filepath.Join("..", file))), "\n")
		for _, w := range want {
			if !slices.Contains(lines, w) {
				t.Errorf("%s does not ignore %s", file, w)
			}
		}
	}

	// nats.conf (and cluster.conf, which includes it): every user's
	// password is a bcrypt hash from the environment, and the monitor
	// listens on loopback.
	conf := string(readFile(t, filepath.Join("..", "ops", "nats", "nats.conf")))
	vars := regexp.MustCompile(`password:\s*\$(\w+)`).FindAllStringSubmatch(conf, -1)
	if n := strings.Count(conf, "password:"); n != len(vars) || n == 0 {
		t.Fatalf("nats.conf: %d passwords, %d of them from a variable", n, len(vars))
	}
	hash, err := bcrypt.GenerateFromPassword([]byte("x"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vars {
		if !strings.HasSuffix(v[1], "_BCRYPT") {
			t.Errorf("nats.conf: password $%s is not named as a bcrypt hash (…_BCRYPT)", v[1])
		}
		t.Setenv(v[1], string(hash))
	}
	t.Setenv("ZL_NATS_NAME", "n1")
	for _, name := range []string{"nats.conf", "cluster.conf"} {
		opts, err := server.ProcessConfigFile(filepath.Join("..", "ops", "nats", name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(opts.Users) == 0 {
			t.Errorf("%s: no users", name)
		}
		for _, u := range opts.Users {
			if !strings.HasPrefix(u.Password, "$2") {
				t.Errorf("%s: user %s: the password is not a bcrypt hash", name, u.Username)
			}
		}
		if opts.HTTPPort != 0 || opts.HTTPSPort != 0 {
			if ip := net.ParseIP(opts.HTTPHost); opts.HTTPHost != "localhost" && (ip == nil || !ip.IsLoopback()) {
				t.Errorf("%s: the monitoring port listens on %q, not the loopback interface", name, opts.HTTPHost)
			}
		}
	}

	// Compose publishes on every interface only what is meant for
	// clients elsewhere: the gateway. The rest is on 127.0.0.1 (NATS's
	// interface is a variable whose default is 127.0.0.1).
	var c composeFile
	if err := yaml.Unmarshal(readFile(t, filepath.Join("..", "docker-compose.yml")), &c); err != nil {
		t.Fatal(err)
	}
	public := map[string]bool{"gateway": true}
	for name, s := range c.Services {
		for _, p := range s.Ports {
			host := ""
			if v, ok := strings.CutPrefix(p, "${ZL_NATS_BIND:-"); ok { // "${ZL_NATS_BIND:-127.0.0.1}:4222:4222"
				host, _, _ = strings.Cut(v, "}")
			} else if parts := strings.Split(p, ":"); len(parts) == 3 {
				host = parts[0]
			}
			if host != "127.0.0.1" && !public[name] {
				t.Errorf("compose: %s publishes %q on every interface", name, p)
			}
		}
	}
}
