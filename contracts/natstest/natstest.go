package natstest

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// readyTimeout bounds the wait for a started server to accept clients.
const readyTimeout = 10 * time.Second

// Server is a running embedded server and a client connected to it.
type Server struct {
	// Server is the embedded nats-server, for tests that need to inspect or
	// restart it.
	Server *server.Server
	// URL is the client URL (nats://127.0.0.1:<port>) to hand to the code
	// under test.
	URL string
	// Conn is a client connection, closed at cleanup.
	Conn *nats.Conn
	// JS is a JetStream context on Conn.
	JS jetstream.JetStream
}

// Options adjusts the server Run starts. The zero value is what Run uses.
type Options struct {
	// MaxPayload is the server's max_payload in bytes. Defaults to the
	// server's default (1 MiB).
	MaxPayload int32
}

// Run starts a NATS server with JetStream on a random loopback port, with
// its store in t.TempDir(), and connects a client. The server and every
// connection made through it are closed by t.Cleanup. Run fails the test
// (t.Fatal) if the server cannot start.
func Run(t testing.TB) *Server {
	t.Helper()
	return RunWithOptions(t, nil)
}

// RunWithOptions is Run with options; nil means the defaults.
func RunWithOptions(t testing.TB, o *Options) *Server {
	t.Helper()
	if o == nil {
		o = &Options{}
	}
	opts := &server.Options{
		ServerName:         "natstest",
		Host:               "127.0.0.1",
		Port:               server.RANDOM_PORT,
		NoLog:              true,
		NoSigs:             true,
		JetStream:          true,
		StoreDir:           t.TempDir(),
		JetStreamMaxMemory: 256 << 20,
		JetStreamMaxStore:  1 << 30,
		MaxPayload:         o.MaxPayload,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("natstest: configure server: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(readyTimeout) {
		srv.Shutdown()
		t.Fatalf("natstest: server not ready after %v", readyTimeout)
	}
	s := &Server{Server: srv, URL: srv.ClientURL()}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	s.Conn, s.JS = s.Connect(t)
	return s
}

// Connect opens another client connection (with a JetStream context) to
// the server, closed by t.Cleanup before the server shuts down.
func (s *Server) Connect(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(s.URL, nats.Name(t.Name()), nats.MaxReconnects(0))
	if err != nil {
		t.Fatalf("natstest: connect to %s: %v", s.URL, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: jetstream context: %v", err)
	}
	return nc, js
}
