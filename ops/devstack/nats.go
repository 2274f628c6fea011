package devstack

import (
	"errors"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// StartNATS runs an embedded NATS server with JetStream on 127.0.0.1, its
// state in dir; port 0 picks a free port. The dev stack's, and bench
// --fleet's without a cluster.
func StartNATS(dir string, port int) (*server.Server, error) {
	if port == 0 {
		port = server.RANDOM_PORT
	}
	srv, err := server.NewServer(&server.Options{ServerName: "zerolayer-dev", Host: "127.0.0.1", Port: port,
		JetStream: true, StoreDir: filepath.Join(dir, "nats"), NoSigs: true, NoLog: true})
	if err != nil {
		return nil, err
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("embedded NATS server did not start within 10s")
	}
	return srv, nil
}
