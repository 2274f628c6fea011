package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/riverqueue/river"

	"github.com/zerolayer/zerolayer/contracts"
)

// Config configures a Service.
type Config struct {
	// DB is the billing database, migrated (migrations.Up). Required.
	DB *pgxpool.Pool
	// JetStream is the NATS connection usage records come from. Required.
	JetStream jetstream.JetStream
	// Ingester configures the ingester. Leave its JetStream, DB, River and
	// Logger unset: the service fills them in.
	Ingester IngesterConfig
	// River configures the River client. Leave its Logger unset.
	River RiverConfig
	// Limits configures the publisher of tenant limits to ZL_LIMITS.
	// Leave its DB, JetStream and Logger unset; its Streams default to
	// the Ingester's.
	Limits LimitsPublisherConfig
	// Logger receives the service's logs. Defaults to slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns c with every zero field set to its default, the
// Ingester's and River's shared fields included.
func (c Config) WithDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.River.Logger == nil {
		c.River.Logger = c.Logger
	}
	if c.Ingester.Logger == nil {
		c.Ingester.Logger = c.Logger
	}
	if c.Ingester.JetStream == nil {
		c.Ingester.JetStream = c.JetStream
	}
	if c.Ingester.DB == nil {
		c.Ingester.DB = c.DB
	}
	c.River = c.River.WithDefaults()
	if c.Limits.DB == nil {
		c.Limits.DB = c.DB
	}
	if c.Limits.JetStream == nil {
		c.Limits.JetStream = c.JetStream
	}
	if c.Limits.Logger == nil {
		c.Limits.Logger = c.Logger
	}
	if c.Limits.Streams.Replicas == 0 && c.Limits.Streams.Storage == 0 {
		c.Limits.Streams = c.Ingester.Streams
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.DB == nil:
		return fmt.Errorf("%w: Config.DB is nil; pass the billing database pool", ErrInvalidConfig)
	case c.JetStream == nil:
		return fmt.Errorf("%w: Config.JetStream is nil; pass a jetstream.JetStream on the NATS connection", ErrInvalidConfig)
	case c.River.InsertOnly:
		return fmt.Errorf("%w: Config.River.InsertOnly is set, but the service's River client rates; unset it", ErrInvalidConfig)
	}
	return c.River.validate()
}

// Service is the billing process: the Ingester feeding usage records in,
// and a River client rating them and rolling them up.
type Service struct {
	cfg      Config
	river    *river.Client[pgx.Tx]
	ingester *Ingester
	limits   *LimitsPublisher

	mu      sync.Mutex
	running bool
}

// NewService checks cfg and builds the service; Start starts it.
func NewService(cfg Config) (*Service, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	rc, err := NewRiver(cfg.DB, cfg.River)
	if err != nil {
		return nil, err
	}
	ic := cfg.Ingester
	ic.River = rc
	ing, err := NewIngester(ic)
	if err != nil {
		return nil, err
	}
	lp, err := NewLimitsPublisher(cfg.Limits)
	if err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, river: rc, ingester: ing, limits: lp}, nil
}

// River returns the service's River client, to insert jobs (a RerateArgs,
// a RollupArgs) or subscribe to their events.
func (s *Service) River() *river.Client[pgx.Tx] { return s.river }

// Ingester returns the service's ingester.
func (s *Service) Ingester() *Ingester { return s.ingester }

// Limits returns the service's tenant-limits publisher.
func (s *Service) Limits() *LimitsPublisher { return s.limits }

// Start checks the NATS server is recent enough (contracts.CheckServer),
// then starts River, then the ingester (which waits in the background for
// ZL_USAGE if it does not exist yet), then the tenant-limits publisher
// (which creates ZL_LIMITS if needed and publishes a first round). Starting a running service does
// nothing.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		return nil
	}
	if err := contracts.CheckServer(s.cfg.JetStream.Conn()); err != nil {
		return err
	}
	if err := s.river.Start(ctx); err != nil {
		return fmt.Errorf("billing: start River: %w", err)
	}
	if err := s.ingester.Start(ctx); err != nil {
		return errors.Join(err, s.river.Stop(context.WithoutCancel(ctx)))
	}
	if err := s.limits.Start(ctx); err != nil {
		return errors.Join(err, s.ingester.Stop(context.WithoutCancel(ctx)), s.river.Stop(context.WithoutCancel(ctx)))
	}
	s.running = true
	return nil
}

// Stop stops the limits publisher, the ingester, then River, each letting the work in hand
// finish; if ctx ends first, work in hand is abandoned (to be redone: a
// record is redelivered, a job retried) and Stop returns ctx.Err().
// Stopping a stopped service does nothing.
func (s *Service) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return nil
	}
	s.running = false
	errLimits := s.limits.Stop(ctx)
	errIngest := s.ingester.Stop(ctx)
	errRiver := s.river.Stop(ctx)
	if errRiver != nil && ctx.Err() != nil {
		// River reports a timeout its own way; hard-stop it so nothing
		// keeps running after Stop returns.
		_ = s.river.StopAndCancel(context.WithoutCancel(ctx))
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.Join(errLimits, errIngest, errRiver)
}
