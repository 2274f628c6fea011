package devstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// defaultDatabaseURL is the local server a fresh Debian install runs.
const defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// postgres is a database for the dev stack, and how to stop what was
// started for it.
type postgres struct {
	url  string
	stop func()
	note string
}

// findPostgres returns a usable database: url when given; else the local
// server on 5432; else a private cluster in dir started with the initdb and
// pg_ctl found on the machine.
func findPostgres(ctx context.Context, url, dir string) (*postgres, error) {
	if url != "" {
		if err := ping(ctx, url); err != nil {
			return nil, fmt.Errorf("database %s: %w", Redact(url), err)
		}
		return &postgres{url: url, stop: func() {}, note: Redact(url)}, nil
	}
	if ping(ctx, defaultDatabaseURL) == nil {
		u, err := ensureDatabase(ctx, defaultDatabaseURL, "zerolayer")
		if err != nil {
			return nil, err
		}
		return &postgres{url: u, stop: func() {}, note: "local server on 127.0.0.1:5432, database zerolayer"}, nil
	}
	return startCluster(ctx, filepath.Join(dir, "pg"))
}

func ping(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	return c.Ping(ctx)
}

// ensureDatabase creates database name on the server of url when missing
// and returns its URL.
func ensureDatabase(ctx context.Context, url, name string) (string, error) {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", err
	}
	defer c.Close(context.Background())
	var exists bool
	if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if !exists {
		if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			return "", fmt.Errorf("create database %s: %w", name, err)
		}
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name), nil
}

// pgBinary finds a PostgreSQL server program on PATH or in Debian's
// versioned folders.
func pgBinary(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(matches) > 0 {
		return matches[len(matches)-1], nil
	}
	return "", fmt.Errorf("%s not found", name)
}

// startCluster initialises (once) and starts a private PostgreSQL cluster
// in dir on a free port, reachable over a socket in dir.
func startCluster(ctx context.Context, dir string) (*postgres, error) {
	initdb, err1 := pgBinary("initdb")
	pgctl, err2 := pgBinary("pg_ctl")
	if err1 != nil || err2 != nil {
		return nil, errors.New("no PostgreSQL is reachable on 127.0.0.1:5432 and initdb/pg_ctl are not installed: " +
			"install PostgreSQL (e.g. `apt-get install postgresql`) or set DATABASE_URL to a server you can use")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// PostgreSQL refuses to run as root: run its programs as the postgres
	// user when we are root.
	var runAs []string
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, errors.New("running as root, and there is no postgres user to run a private PostgreSQL cluster as: set DATABASE_URL")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error { return os.Chown(p, uid, gid) })
		runAs = []string{"runuser", "-u", "postgres", "--"}
	}
	run := func(args ...string) error {
		full := append(append([]string(nil), runAs...), args...)
		out, err := exec.CommandContext(ctx, full[0], full[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %w\n%s", filepath.Base(args[0]), err, out)
		}
		return nil
	}
	data := filepath.Join(dir, "data")
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		if err := run(initdb, "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8"); err != nil {
			return nil, err
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", port, dir)
	if err := run(pgctl, "-D", data, "-o", opts, "-l", filepath.Join(dir, "server.log"), "-w", "start"); err != nil {
		return nil, err
	}
	stop := func() { run(pgctl, "-D", data, "-m", "fast", "-w", "stop") }
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	if err := ping(ctx, url); err != nil {
		stop()
		return nil, err
	}
	return &postgres{url: url, stop: stop, note: fmt.Sprintf("private cluster in %s on port %d", data, port)}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Redact hides the password of a database or NATS URL, for messages. A
// PostgreSQL URL or keyword/value string with a password is shown as
// postgres://USER:***@HOST:PORT/DATABASE; another URL with user
// information has its password replaced by xxxxx; anything else (a URL
// without a password, a list of NATS servers) is shown as it is.
func Redact(s string) string {
	cfg, err := pgx.ParseConfig(s)
	if err != nil {
		if u, err := url.Parse(s); err == nil && u.User != nil {
			return u.Redacted()
		}
		return s
	}
	if cfg.Password == "" {
		return s
	}
	return fmt.Sprintf("postgres://%s:***@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}
