package main

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// runNATSServer runs the embedded NATS server with a configuration file
// until ctx ends (SIGTERM, interrupt), then shuts it down.
func runNATSServer(ctx context.Context, args []string) error {
	fs := newFlags("nats-server")
	config := fs.String("config", "", "nats-server configuration file (required)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *config == "" {
		return usagef("--config is required")
	}
	opts, err := server.ProcessConfigFile(*config)
	if err != nil {
		return err
	}
	opts.NoSigs = true
	srv, err := server.NewServer(opts)
	if err != nil {
		return err
	}
	srv.ConfigureLogger()
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return errors.New("the NATS server did not accept connections within 30s")
	}
	<-ctx.Done()
	srv.Shutdown()
	srv.WaitForShutdown()
	return nil
}
