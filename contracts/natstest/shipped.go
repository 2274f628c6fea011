package natstest

import (
	"crypto/rand"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"golang.org/x/crypto/bcrypt"
)

// Shipped is a server running a shipped configuration file (the
// repository's ops/nats/nats.conf) with only its ports, monitoring and
// store changed, and the passwords of its users.
type Shipped struct {
	// Server is the embedded nats-server.
	Server *server.Server
	// Passwords maps each user of the file to its plain password.
	Passwords map[string]string

	opts *server.Options
	port int
	log  *violationLog
}

// userPassword finds the users of a configuration file and the variable
// that holds each one's password hash: `user: NAME, password: $VAR`.
var userPassword = regexp.MustCompile(`user:\s*"?(\w+)"?\s*,\s*password:\s*\$(\w+)`)

// shippedEnv holds the passwords RunShipped gives every user of a file, by
// variable: one set per test process (the server reads them from the
// environment, which t.Setenv would keep tests from sharing in parallel).
var shippedEnv struct {
	sync.Mutex
	plain map[string]string // variable → plain password
}

// RunShipped starts a server from the configuration file at path as the
// deployment runs it, changing only what a test must: the client port (a
// random loopback one), the monitoring port (off), the JetStream store
// (t.TempDir()), logging (captured). Every `password: $VAR` of the file
// is given, through the environment, the bcrypt hash of a random password
// (the file must hold hashes, never plain passwords: the test of the
// shipped files checks that); Passwords has the plain ones for clients.
// Permission violations the server logs are kept (Violations), and any
// left by a user in trusted when the test ends fails it: the roles must
// be granted every subject their work needs.
func RunShipped(t testing.TB, path string, trusted ...string) *Shipped {
	t.Helper()
	conf, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	s := &Shipped{Passwords: map[string]string{}, log: &violationLog{}}
	shippedEnv.Lock()
	if shippedEnv.plain == nil {
		shippedEnv.plain = map[string]string{}
	}
	for _, m := range userPassword.FindAllStringSubmatch(string(conf), -1) {
		user, variable := m[1], m[2]
		plain, ok := shippedEnv.plain[variable]
		if !ok {
			plain = rand.Text()
			hash, err := bcrypt.GenerateFromPassword([]byte(plain), bcrypt.MinCost)
			if err != nil {
				shippedEnv.Unlock()
				t.Fatal(err)
			}
			os.Setenv(variable, string(hash))
			shippedEnv.plain[variable] = plain
		}
		s.Passwords[user] = plain
	}
	shippedEnv.Unlock()
	if len(s.Passwords) == 0 {
		t.Fatalf("natstest: %s names no `user: NAME, password: $VAR`", path)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("natstest: %s: %v", path, err)
	}
	opts.Host, opts.Port, opts.StoreDir = "127.0.0.1", server.RANDOM_PORT, t.TempDir()
	opts.HTTPHost, opts.HTTPPort, opts.HTTPSPort = "", 0, 0
	opts.NoSigs, opts.NoLog = true, false
	s.opts = opts
	s.start(t)
	t.Cleanup(func() {
		for _, v := range s.Violations() {
			for _, u := range trusted {
				if strings.Contains(v, "/"+u+`"`) || strings.Contains(v, "/user:"+u+`"`) {
					t.Errorf("natstest: trusted user %s needed a subject its permissions do not grant: %s", u, v)
				}
			}
		}
	})
	return s
}

// start starts (or starts again) the server on s's port and store.
func (s *Shipped) start(t testing.TB) {
	t.Helper()
	s.Server = serve(t, s.opts, s.log)
	if s.port == 0 {
		s.port = s.Server.Addr().(*net.TCPAddr).Port
		s.opts.Port = s.port
	}
}

// Restart shuts the server down, waits down, and starts it again on the
// same port and store.
func (s *Shipped) Restart(t testing.TB, down time.Duration) {
	t.Helper()
	s.Server.Shutdown()
	s.Server.WaitForShutdown()
	time.Sleep(down)
	s.start(t)
}

// URL is the server's client URL with user's credentials in it, as a
// deployment hands it to a process (NATS_URL).
func (s *Shipped) URL(user string) string {
	u := url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", s.port), User: url.UserPassword(user, s.Passwords[user])}
	return u.String()
}

// Connect connects as user (closed at cleanup); the connection reconnects
// while the server restarts.
func (s *Shipped) Connect(t testing.TB, user string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	if _, ok := s.Passwords[user]; !ok {
		t.Fatalf("natstest: the configuration has no user %q", user)
	}
	nc, err := nats.Connect(s.URL(user), append([]nats.Option{nats.Name(t.Name() + " as " + user),
		nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})}, opts...)...)
	if err != nil {
		t.Fatalf("natstest: connect as %s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Violations returns the permission violations the server has logged, in
// order: each line names the account and user ("ZEROLAYER/user:gateway").
func (s *Shipped) Violations() []string {
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	return append([]string(nil), s.log.lines...)
}

// violationLog is the server's logger: it keeps the lines about
// permission violations and drops the rest.
type violationLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *violationLog) keep(format string, v ...any) {
	line := fmt.Sprintf(format, v...)
	if strings.Contains(line, "Violation") {
		l.mu.Lock()
		l.lines = append(l.lines, line)
		l.mu.Unlock()
	}
}

func (l *violationLog) Noticef(format string, v ...any) {}
func (l *violationLog) Warnf(format string, v ...any)   { l.keep(format, v...) }
func (l *violationLog) Fatalf(format string, v ...any)  { l.keep(format, v...) }
func (l *violationLog) Errorf(format string, v ...any)  { l.keep(format, v...) }
func (l *violationLog) Debugf(format string, v ...any)  {}
func (l *violationLog) Tracef(format string, v ...any)  {}
