package natstest

import (
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// readyTimeout bounds the wait for a started server to accept clients. A
// cluster node on a machine busy with the whole test suite (make test runs
// the packages in parallel) once took more than 10 s; a server that never
// comes up still fails the test.
const readyTimeout = 30 * time.Second

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

	opts *Options
	port int    // the port the server listens on
	dir  string // the store dir it was given
}

// Options adjusts the server Run starts. The zero value is what Run uses.
type Options struct {
	// MaxPayload is the server's max_payload in bytes. Defaults to the
	// server's default (1 MiB).
	MaxPayload int32
	// Restartable makes every connection of the server (Conn, Connect)
	// reconnect, forever and 50 milliseconds apart, so that a test can
	// restart the server (Restart) under the code it tests. Without it a
	// connection closes when the server goes.
	Restartable bool
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
	s := &Server{opts: o}
	s.start(t, server.RANDOM_PORT, t.TempDir())
	s.URL = s.Server.ClientURL()
	s.Conn, s.JS = s.Connect(t)
	return s
}

// start starts the server on port with its store in dir.
func (s *Server) start(t testing.TB, port int, dir string) {
	t.Helper()
	opts := &server.Options{
		ServerName:         "natstest",
		Host:               "127.0.0.1",
		Port:               port,
		NoLog:              true,
		NoSigs:             true,
		JetStream:          true,
		StoreDir:           dir,
		JetStreamMaxMemory: 256 << 20,
		JetStreamMaxStore:  1 << 30,
		MaxPayload:         s.opts.MaxPayload,
	}
	srv := serve(t, opts, nil)
	s.Server, s.port, s.dir = srv, srv.Addr().(*net.TCPAddr).Port, dir
}

// serve starts a server from opts (with log as its logger, if not nil),
// waits until it takes clients, and shuts it down at cleanup.
func serve(t testing.TB, opts *server.Options, log server.Logger) *server.Server {
	t.Helper()
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("natstest: configure server: %v", err)
	}
	if log != nil {
		srv.SetLoggerV2(log, false, false, false)
	}
	go srv.Start()
	if !srv.ReadyForConnections(readyTimeout) {
		srv.Shutdown()
		t.Fatalf("natstest: server not ready after %v", readyTimeout)
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	return srv
}

// Restart shuts the server down, waits down, and starts it again on the
// same port with the same store, as an operator's restart does: JetStream
// keeps what it stored, and the connections come back when the server was
// started Restartable.
// (A server already shut down by the test is only started again.)
func (s *Server) Restart(t testing.TB, down time.Duration) {
	t.Helper()
	s.Server.Shutdown()
	s.Server.WaitForShutdown()
	time.Sleep(down)
	s.start(t, s.port, s.dir)
}

// Connect opens another client connection (with a JetStream context) to
// the server, closed by t.Cleanup before the server shuts down.
func (s *Server) Connect(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	reconnects := []nats.Option{nats.MaxReconnects(0)}
	if s.opts.Restartable {
		reconnects = []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond)}
	}
	nc, err := nats.Connect(s.URL, append(reconnects, nats.Name(t.Name()))...)
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
