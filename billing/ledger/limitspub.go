package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
)

// LimitsPublisherConfig configures NewLimitsPublisher.
type LimitsPublisherConfig struct {
	// DB is the billing database, migrated. Required.
	DB *pgxpool.Pool
	// JetStream is where the ZL_LIMITS bucket is (created if missing).
	// Required.
	JetStream jetstream.JetStream
	// Streams configures the bucket when it is created (replicas,
	// storage). Zero fields take the contract defaults.
	Streams contracts.StreamsConfig
	// Interval is how often every tenant's limits and month-to-date spend
	// are published. SetTenantLimits also triggers a round at once
	// (LISTEN on LimitsChannel). Defaults to 5 seconds.
	Interval time.Duration
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// Logger receives the publisher's logs. Defaults to slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns c with every zero field set to its default.
func (c LimitsPublisherConfig) WithDefaults() LimitsPublisherConfig {
	if c.Interval == 0 {
		c.Interval = 5 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Streams = c.Streams.WithDefaults()
	return c
}

func (c LimitsPublisherConfig) validate() error {
	switch {
	case c.DB == nil:
		return fmt.Errorf("%w: LimitsPublisherConfig.DB is nil; pass the billing database pool", ErrInvalidConfig)
	case c.JetStream == nil:
		return fmt.Errorf("%w: LimitsPublisherConfig.JetStream is nil; pass a jetstream.JetStream on the NATS connection", ErrInvalidConfig)
	case c.Interval < 100*time.Millisecond:
		return fmt.Errorf("%w: LimitsPublisherConfig.Interval %v is below 100ms; every round reads each tenant's month-to-date spend", ErrInvalidConfig, c.Interval)
	}
	return nil
}

// LimitsPublisher publishes every tenant's limits with its month-to-date
// spend (LimitsSnapshot) to the ZL_LIMITS bucket, where the gateways and
// workers read them (contracts/quota): every Interval, and at once after
// SetTenantLimits. A tenant whose limits row is gone loses its key.
//
// Lifecycle: Start publishes a first round and returns; Stop ends the
// loop. Both are idempotent.
type LimitsPublisher struct {
	cfg LimitsPublisherConfig

	mu      sync.Mutex
	kv      jetstream.KeyValue
	running bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// NewLimitsPublisher checks cfg and returns a publisher; Start starts it.
func NewLimitsPublisher(cfg LimitsPublisherConfig) (*LimitsPublisher, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &LimitsPublisher{cfg: cfg}, nil
}

// Start opens (or creates) the bucket, publishes a first round, and
// keeps publishing in the background until Stop.
func (p *LimitsPublisher) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running {
		return nil
	}
	kv, err := p.cfg.JetStream.CreateOrUpdateKeyValue(ctx, p.cfg.Streams.TenantLimitsBucketConfig())
	if err != nil {
		return fmt.Errorf("billing: open the %s bucket: %w", contracts.TenantLimitsBucket, err)
	}
	p.kv = kv
	// Listen before the first round, so that no change made after Start
	// returns goes unnoticed until the next interval.
	conn, err := p.listenConn(ctx)
	if err != nil {
		p.cfg.Logger.Warn("billing: listening for tenant-limit changes; they are published every interval meanwhile", "err", err)
	}
	if err := p.Publish(ctx); err != nil {
		if conn != nil {
			conn.Close(context.WithoutCancel(ctx))
		}
		return err
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.cancel, p.done, p.running = cancel, make(chan struct{}), true
	go p.loop(lctx, conn)
	return nil
}

// listenConn opens a connection of its own (not the pool's) listening on
// LimitsChannel.
func (p *LimitsPublisher) listenConn(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, p.cfg.DB.Config().ConnConfig.Copy())
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+LimitsChannel); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return conn, nil
}

// Stop ends the background rounds; ctx bounds the wait for the one in
// hand.
func (p *LimitsPublisher) Stop(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running {
		return nil
	}
	p.running = false
	p.cancel()
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loop publishes every Interval and on each notification on conn.
func (p *LimitsPublisher) loop(ctx context.Context, conn *pgx.Conn) {
	defer close(p.done)
	poke := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); p.listen(ctx, conn, poke) }()
	defer wg.Wait()
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-poke:
		}
		if err := p.Publish(ctx); err != nil && ctx.Err() == nil {
			p.cfg.Logger.Error("billing: publishing tenant limits", "err", err)
		}
	}
}

// listen pokes on every notification of LimitsChannel on conn (nil: to
// be opened), opening a new one after Interval on failure.
func (p *LimitsPublisher) listen(ctx context.Context, conn *pgx.Conn, poke chan<- struct{}) {
	for ctx.Err() == nil {
		var err error
		if conn == nil {
			conn, err = p.listenConn(ctx)
		}
		if conn != nil {
			for err == nil {
				if _, err = conn.WaitForNotification(ctx); err == nil {
					select {
					case poke <- struct{}{}:
					default:
					}
				}
			}
			conn.Close(context.WithoutCancel(ctx))
			conn = nil
		}
		if ctx.Err() != nil {
			return
		}
		p.cfg.Logger.Warn("billing: listening for tenant-limit changes; they are published every interval meanwhile", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(p.cfg.Interval):
		}
	}
}

// Publish runs one round: it puts every tenant's snapshot, and deletes the keys of tenants without a limits row.
func (p *LimitsPublisher) Publish(ctx context.Context) error {
	ls, err := ListTenantLimits(ctx, p.cfg.DB)
	if err != nil {
		return err
	}
	now := p.cfg.Now()
	keep := map[string]bool{}
	var errs []error
	for _, l := range ls {
		keep[l.Tenant] = true
		snap, err := LimitsSnapshot(ctx, p.cfg.DB, l, now)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		b, err := json.Marshal(snap)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, err := p.kv.Put(ctx, l.Tenant, b); err != nil {
			errs = append(errs, fmt.Errorf("billing: publish the limits of %s: %w", l.Tenant, err))
		}
	}
	keys, err := p.kv.ListKeys(ctx)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for k := range keys.Keys() {
		if !keep[k] {
			if err := p.kv.Delete(ctx, k); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
