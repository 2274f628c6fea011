package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/zerolayer/zerolayer/producer/gateway"
)

// runSecrets makes the secrets a deployment needs (docker compose reads
// them from .env): a random password for every NATS user of the server
// configuration, with the bcrypt hash the server gets instead of it, the
// PostgreSQL and Grafana passwords, and a gateway API key per tenant in a
// key file (hashes only; the keys are printed once). What a file already
// holds is kept, so running it again only fills in what is missing (a
// tenant added to nats.conf, say).
func runSecrets(ctx context.Context, args []string) error {
	sub, args, err := parseSub(newFlags("secrets"), args)
	if err != nil {
		return err
	}
	flags := newFlags("secrets " + sub)
	envFile := flags.String("env-file", ".env", "the environment file docker compose reads (created 0600)")
	natsConf := flags.String("nats-conf", filepath.Join("ops", "nats", "nats.conf"), "the NATS server configuration whose users get passwords")
	keysFile := flags.String("keys-file", filepath.Join("secrets", "api-keys"), "the gateway's key file (created 0600, with one key per tenant of --nats-conf when it does not exist)")
	if err := parseFlags(flags, args); err != nil {
		return err
	}
	conf, err := os.ReadFile(*natsConf)
	if err != nil {
		return fmt.Errorf("%w (run from the repository's root, or give --nats-conf)", err)
	}
	env, order, err := readEnvFile(*envFile)
	if err != nil {
		return err
	}
	var made []string
	set := func(name, value string) {
		if _, ok := env[name]; !ok {
			order = append(order, name)
		}
		env[name] = value
		made = append(made, name)
	}
	for _, v := range secretPasswordVars(string(conf)) {
		if env[v] == "" {
			set(v, randomSecret())
		}
		if h := env[v+"_BCRYPT"]; h == "" || bcrypt.CompareHashAndPassword([]byte(h), []byte(env[v])) != nil {
			hash, err := bcrypt.GenerateFromPassword([]byte(env[v]), bcrypt.DefaultCost)
			if err != nil {
				return err
			}
			set(v+"_BCRYPT", string(hash))
		}
	}
	for _, v := range []string{"POSTGRES_PASSWORD", "GRAFANA_ADMIN_PASSWORD"} {
		if env[v] == "" {
			set(v, randomSecret())
		}
	}
	if err := writeEnvFile(*envFile, env, order); err != nil {
		return err
	}
	if len(made) == 0 {
		fmt.Fprintf(stderr, "zerolayer secrets init: %s already holds every secret; nothing changed\n", *envFile)
	} else {
		fmt.Fprintf(stderr, "zerolayer secrets init: %s (0600): made %s; docker compose reads it from this folder\n", *envFile, strings.Join(made, ", "))
	}

	if _, err := os.Stat(*keysFile); err == nil {
		fmt.Fprintf(stderr, "zerolayer secrets init: %s exists; add keys with 'zerolayer keys add --file %s --tenant T'\n", *keysFile, *keysFile)
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*keysFile), 0o700); err != nil {
		return err
	}
	for _, tenant := range secretTenants(string(conf)) {
		key, e, err := gateway.NewKey(tenant, time.Now())
		if err != nil {
			return err
		}
		if err := gateway.AppendKeyFile(*keysFile, e); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\t%s\n", tenant, key)
	}
	fmt.Fprintf(stderr, "zerolayer secrets init: API keys above (tenant, key) are shown this once; their hashes are in %s\n", *keysFile)
	return nil
}

// passwordVar finds what nats.conf names as each user's password hash.
var passwordVar = regexp.MustCompile(`password:\s*\$(ZL_\w+)_BCRYPT\b`)

// secretPasswordVars returns the plain-password variables of the users of
// a NATS configuration (ZL_WORKER_PASSWORD for $ZL_WORKER_PASSWORD_BCRYPT).
func secretPasswordVars(conf string) []string {
	var vars []string
	for _, m := range passwordVar.FindAllStringSubmatch(conf, -1) {
		if !slices.Contains(vars, m[1]) {
			vars = append(vars, m[1])
		}
	}
	return vars
}

// tenantUser finds the tenants' users of a NATS configuration: the users
// whose password is a ZL_TENANT_ variable.
var tenantUser = regexp.MustCompile(`user:\s*"?(\w+)"?\s*,\s*password:\s*\$ZL_TENANT_\w+_BCRYPT\b`)

func secretTenants(conf string) []string {
	var tenants []string
	for _, m := range tenantUser.FindAllStringSubmatch(conf, -1) {
		tenants = append(tenants, m[1])
	}
	return tenants
}

// randomSecret is 26 random characters of base32 (130 bits), safe in a
// URL's user info.
func randomSecret() string { return strings.ToLower(rand.Text()) }

// readEnvFile reads NAME=VALUE lines (a value may be quoted with ' or ");
// a missing file is empty. order is the names in file order.
func readEnvFile(path string) (env map[string]string, order []string, err error) {
	env = map[string]string{}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return env, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, nil, fmt.Errorf("%s:%d: want NAME=VALUE", path, n)
		}
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if len(value) >= 2 && (value[0] == '\'' || value[0] == '"') && value[len(value)-1] == value[0] {
			value = value[1 : len(value)-1]
		}
		if _, seen := env[name]; !seen {
			order = append(order, name)
		}
		env[name] = value
	}
	return env, order, sc.Err()
}

// writeEnvFile writes env in order, replacing path atomically, readable
// by its owner only. Values are single-quoted: docker compose takes them
// literally ($ in a bcrypt hash is not a variable).
func writeEnvFile(path string, env map[string]string, order []string) error {
	var b strings.Builder
	b.WriteString("# Secrets of this zerolayer deployment (zerolayer secrets init). Keep this file private.\n")
	for _, name := range order {
		fmt.Fprintf(&b, "%s='%s'\n", name, env[name])
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".env-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.WriteString(b.String()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
