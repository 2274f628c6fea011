package devstacktest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/migrations/dbtest"
	"github.com/zerolayer/zerolayer/ops/devstack"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/sched"
)

// Start starts a stack of cfg and stops it when the test ends (giving
// running jobs 30 seconds). Fields left zero default for a test: Dir a
// temporary folder, DatabaseURL a fresh schema, Models the TinyStories
// 260K model on one thread with 256 KV blocks and no host swap, Logger
// one that discards. It skips the test without the model or a database.
func Start(t testing.TB, cfg devstack.Config) *devstack.Stack {
	t.Helper()
	if len(cfg.Models.Models) == 0 {
		cfg.Models = worker.ModelsConfig{Models: []string{modeltest.StoriesPath(t)}, Threads: 1, Sched: sched.Config{KVBlocks: 256, HostSwapMB: -1}}
	}
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.DatabaseURL == "" {
		cfg.DatabaseURL = dbtest.SchemaURL(t, dbtest.EmptyPool(t))
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	st, err := devstack.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The worker and billing run until Start's context ends: the test's.
	if err := st.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := st.Stop(ctx); err != nil {
			t.Errorf("devstacktest: stop: %v", err)
		}
	})
	return st
}
