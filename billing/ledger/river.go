package ledger

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// RiverConfig configures NewRiver.
type RiverConfig struct {
	// MaxWorkers is how many billing jobs but the ratings (rollups,
	// re-ratings) one client runs at once, each holding a database
	// connection. Defaults to 20.
	MaxWorkers int
	// RateWorkers is how many rating jobs one client runs at once. The
	// records of the rating jobs running at once are rated together, in
	// one transaction (one connection), so this bounds how many records
	// one rating transaction takes. Defaults to 256.
	RateWorkers int
	// FetchCooldown is the shortest time between two fetches of available
	// jobs; with RateWorkers it bounds the rate of RateArgs jobs (River's
	// own default of 100ms would cap it near RateWorkers×10 jobs/s).
	// Defaults to 10 milliseconds.
	FetchCooldown time.Duration
	// RollupDelay is how long a day's rollup waits after the rating that
	// asked for it, so that one rollup covers a burst of ratings. Negative
	// means no wait (tests use it). Defaults to 10 seconds.
	RollupDelay time.Duration
	// InsertOnly makes a client that only inserts jobs (for a process
	// that ingests or asks for re-ratings while others rate). Defaults to
	// false: the client works the billing queues once started.
	InsertOnly bool
	// Logger receives River's logs. Defaults to slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns c with every zero field set to its default.
func (c RiverConfig) WithDefaults() RiverConfig {
	if c.MaxWorkers == 0 {
		c.MaxWorkers = 20
	}
	if c.RateWorkers == 0 {
		c.RateWorkers = 256
	}
	if c.FetchCooldown == 0 {
		c.FetchCooldown = 10 * time.Millisecond
	}
	if c.RollupDelay == 0 {
		c.RollupDelay = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c RiverConfig) validate() error {
	if c.MaxWorkers < 1 || c.MaxWorkers > 10_000 {
		return fmt.Errorf("%w: RiverConfig.MaxWorkers %d is outside [1, 10000]", ErrInvalidConfig, c.MaxWorkers)
	}
	if c.RateWorkers < 1 || c.RateWorkers > 10_000 {
		return fmt.Errorf("%w: RiverConfig.RateWorkers %d is outside [1, 10000]", ErrInvalidConfig, c.RateWorkers)
	}
	return nil
}

// NewRiver returns a River client on pool with billing's workers
// registered: RateArgs and RateBatchArgs on RateQueue, RerateArgs,
// RollupArgs and BatchRollupArgs on Queue (rating jobs queued on Queue by
// an earlier version are worked too). The pool's schema (search_path) must have the migrations applied. Start the
// client to work the queue (or run a Service, which does); any client may
// insert.
func NewRiver(pool *pgxpool.Pool, cfg RiverConfig) (*river.Client[pgx.Tx], error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	workers := river.NewWorkers()
	r := &rater{db: pool, rollupDelay: cfg.RollupDelay}
	river.AddWorker(workers, &rateWorker{rater: r})
	river.AddWorker(workers, &rateBatchWorker{rater: r})
	river.AddWorker(workers, &rerateWorker{db: pool, rollupDelay: cfg.RollupDelay})
	river.AddWorker(workers, &rerateRangeWorker{db: pool, rollupDelay: cfg.RollupDelay})
	river.AddWorker(workers, &rollupWorker{db: pool})
	river.AddWorker(workers, &batchRollupWorker{db: pool})
	rc := &river.Config{Workers: workers, Logger: cfg.Logger, FetchCooldown: cfg.FetchCooldown}
	if !cfg.InsertOnly {
		rc.Queues = map[string]river.QueueConfig{Queue: {MaxWorkers: cfg.MaxWorkers}, RateQueue: {MaxWorkers: cfg.RateWorkers}}
	}
	client, err := river.NewClient(riverpgxv5.New(pool), rc)
	if err != nil {
		return nil, fmt.Errorf("billing: River client: %w", err)
	}
	return client, nil
}
