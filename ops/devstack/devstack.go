package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/migrations"
	"github.com/zerolayer/zerolayer/producer/gateway"
	"github.com/zerolayer/zerolayer/worker"
)

// DefaultModel is the model served when Config.Models names none: the
// TinyStories 260K model (`zerolayer models pull stories260k`).
const DefaultModel = "stories260k"

// Config configures a Stack.
type Config struct {
	// Dir holds the embedded NATS server's state and, when one is needed,
	// a private PostgreSQL cluster (Dir/pg). Created when missing.
	// Required.
	Dir string
	// NATSPort is the embedded NATS server's port on 127.0.0.1. Defaults
	// to 0: a free port.
	NATSPort int
	// DatabaseURL is the PostgreSQL to use. Defaults to "": the local
	// server on 127.0.0.1:5432 (database zerolayer, created when missing),
	// else a private cluster in Dir started with the initdb and pg_ctl
	// found on the machine.
	DatabaseURL string
	// Models are the worker's models and how they are served (see
	// worker.OpenModels). Models.Models defaults to DefaultModel; the
	// rest to worker.ModelsConfig's defaults.
	Models worker.ModelsConfig
	// Concurrency is how many jobs the worker holds. Defaults to the
	// models' (worker.Models.Concurrency), except 4 with the in-order
	// executor, which then overlaps publishing one job with the next.
	Concurrency int
	// WorkerMetrics, if set, records every finished job.
	WorkerMetrics *worker.Metrics
	// TenantWeights are the worker's tenant weights
	// (worker.Config.TenantWeights); nil: every tenant weighs 1.
	TenantWeights map[string]float64
	// HTTPAddr, if set, is where the HTTP gateway listens (":0" for a free
	// port), taking the tenant from the X-Zerolayer-Tenant header.
	// Defaults to "": no gateway.
	HTTPAddr string
	// GatewayMetrics, if set, receives the gateway's measurements.
	GatewayMetrics *gateway.Metrics
	// Logger receives the worker's, billing's and the gateway's logs.
	// Defaults to slog.Default().
	Logger *slog.Logger
	// AnnounceFile, if set, is where the running stack writes its
	// Endpoints (NATS and database URLs, gateway address, pid) once it is
	// up, for other commands to find with Discover; Stop removes it.
	// Defaults to "": nothing is written.
	AnnounceFile string
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if len(c.Models.Models) == 0 {
		c.Models.Models = []string{DefaultModel}
	}
	c.Models = c.Models.WithDefaults()
	if c.Concurrency == 0 && c.Models.Executor == worker.ExecutorInOrder {
		c.Concurrency = 4
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Dir == "":
		return errors.New("devstack: Dir is empty: give a folder for the NATS state (and a private PostgreSQL)")
	case c.NATSPort < 0 || c.NATSPort > 65535:
		return fmt.Errorf("devstack: NATS port %d: want 0 (a free port) to 65535", c.NATSPort)
	case c.Concurrency < 0:
		return fmt.Errorf("devstack: concurrency %d: want 0 (the models' own) or more", c.Concurrency)
	}
	return nil
}

// Stack is the whole system in one process: an embedded NATS server with
// JetStream and the streams, a PostgreSQL with the migrations applied, a
// worker serving the models, the billing service and, when asked, the
// HTTP gateway. Its accessors are valid between Start and Stop.
type Stack struct {
	cfg Config

	mu      sync.Mutex
	started bool
	pg      *postgres
	pool    *pgxpool.Pool
	nats    *server.Server
	nc      *nats.Conn
	js      jetstream.JetStream
	models  *worker.Models
	worker  *worker.Worker
	billing *ledger.Service
	gateway *GatewayServer
	quotas  quotas
}

// New returns a stack for cfg; Start starts it.
func New(cfg Config) (*Stack, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Stack{cfg: cfg}, nil
}

// Start starts the stack: PostgreSQL and the migrations, NATS and the
// streams, the models, the worker, billing, the gateway. The worker and
// billing run until Stop or until ctx is done. When a part fails, what
// started is stopped. Starting a started stack does nothing.
func (st *Stack) Start(ctx context.Context) (err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.started {
		return nil
	}
	defer func() {
		if err != nil {
			sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			st.stop(sctx)
		}
	}()
	cfg := st.cfg
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return err
	}
	if st.pg, err = findPostgres(ctx, cfg.DatabaseURL, cfg.Dir); err != nil {
		return err
	}
	pcfg, err := pgxpool.ParseConfig(st.pg.url)
	if err != nil {
		return err
	}
	pcfg.MaxConns = max(pcfg.MaxConns, 16) // ingest + River workers + reports
	if st.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		return err
	}
	if _, err := migrations.Up(ctx, st.pool); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if st.nats, err = StartNATS(cfg.Dir, cfg.NATSPort); err != nil {
		return err
	}
	if st.nc, err = nats.Connect(st.nats.ClientURL(), nats.Name("zerolayer dev")); err != nil {
		return err
	}
	if st.js, err = jetstream.New(st.nc); err != nil {
		return err
	}
	if err := contracts.EnsureStreams(ctx, st.js, contracts.StreamsConfig{}); err != nil {
		return err
	}
	if st.models, err = worker.OpenModels(ctx, cfg.Models); err != nil {
		return err
	}
	conc := cfg.Concurrency
	if conc == 0 {
		conc = st.models.Concurrency()
	}
	if err := st.quotas.start(ctx, st.nc, cfg.Logger); err != nil {
		return err
	}
	if st.worker, err = worker.New(st.nc, st.models.Executor(), worker.Config{ID: "dev-worker", Concurrency: conc, Metrics: cfg.WorkerMetrics, Logger: cfg.Logger, Quota: st.quotas.worker, TenantWeights: cfg.TenantWeights}); err != nil {
		return err
	}
	if err := st.worker.Start(ctx); err != nil {
		return err
	}
	if st.billing, err = ledger.NewService(ledger.Config{DB: st.pool, JetStream: st.js, Logger: cfg.Logger,
		Ingester: ledger.IngesterConfig{RateInBatches: true}}); err != nil {
		return err
	}
	if err := st.billing.Start(ctx); err != nil {
		return err
	}
	if cfg.HTTPAddr != "" {
		if st.gateway, err = st.serveGateway(cfg.HTTPAddr, cfg.GatewayMetrics); err != nil {
			return err
		}
	}
	if cfg.AnnounceFile != "" {
		e := Endpoints{PID: os.Getpid(), NATSURL: st.NATSURL(), DatabaseURL: st.pg.url, GatewayAddr: st.GatewayAddr(), Started: time.Now().UTC()}
		if err := announce(cfg.AnnounceFile, e); err != nil {
			return fmt.Errorf("devstack: announce file: %w", err)
		}
	}
	st.started = true
	return nil
}

// GatewayServer is an HTTP gateway listening on a port.
type GatewayServer struct {
	gw   *gateway.Gateway
	srv  *http.Server
	addr string
}

// ServeGateway serves a gateway of cfg in front of nc on addr (":0" for a
// free port) until Stop; an error of the server is logged to cfg.Logger
// (slog.Default() when nil).
func ServeGateway(nc *nats.Conn, addr string, cfg gateway.Config) (*GatewayServer, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	gw, err := gateway.New(nc, cfg)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		gw.Close()
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g := &GatewayServer{gw: gw, srv: &http.Server{Handler: gw, ReadHeaderTimeout: 10 * time.Second}, addr: l.Addr().String()}
	go func() {
		if err := g.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("gateway", "err", err)
		}
	}()
	return g, nil
}

// Addr is the address the gateway listens on.
func (g *GatewayServer) Addr() string { return g.addr }

// Stop lets open requests finish until ctx ends, then closes the gateway.
func (g *GatewayServer) Stop(ctx context.Context) error {
	return errors.Join(g.srv.Shutdown(ctx), g.gw.Close())
}

// serveGateway serves an HTTP gateway of the stack's models on addr,
// taking the tenant from the X-Zerolayer-Tenant header.
func (st *Stack) serveGateway(addr string, metrics *gateway.Metrics) (*GatewayServer, error) {
	return ServeGateway(st.nc, addr, gateway.Config{TenantHeader: true, Models: st.models.Paths(), ServedOnly: true, Logger: st.cfg.Logger, Metrics: metrics, Quota: st.quotas.gateway})
}

// Stop stops the stack in reverse order: the gateway, the worker (running
// jobs finish, or are handed back when ctx ends), billing, NATS, the
// models, the database pool and a private cluster. It returns ctx.Err()
// when ctx ended before the worker and billing finished. Safe to call
// twice, and on a stack that never started.
func (st *Stack) Stop(ctx context.Context) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	err := st.stop(ctx)
	st.started = false
	return err
}

// stop releases whatever is set, each part once.
func (st *Stack) stop(ctx context.Context) error {
	if st.cfg.AnnounceFile != "" {
		unannounce(st.cfg.AnnounceFile)
	}
	var errs []error
	if st.gateway != nil {
		errs = append(errs, st.gateway.Stop(ctx))
		st.gateway = nil
	}
	if st.worker != nil {
		errs = append(errs, st.worker.Stop(ctx))
		st.worker = nil
	}
	if st.billing != nil {
		errs = append(errs, st.billing.Stop(ctx))
		st.billing = nil
	}
	errs = append(errs, st.quotas.stop(ctx))
	if st.nc != nil {
		st.nc.Close()
		st.nc = nil
	}
	if st.nats != nil {
		st.nats.Shutdown()
		st.nats = nil
	}
	if st.models != nil {
		st.models.Close()
		st.models = nil
	}
	if st.pool != nil {
		st.pool.Close()
		st.pool = nil
	}
	if st.pg != nil {
		st.pg.stop()
		st.pg = nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.Join(errs...)
}

// NATSURL is the embedded NATS server's client URL.
func (st *Stack) NATSURL() string { return st.nats.ClientURL() }

// Conn is the stack's NATS connection.
func (st *Stack) Conn() *nats.Conn { return st.nc }

// JetStream returns the stack's JetStream context (the queue-depth
// collectors read the streams through it).
func (st *Stack) JetStream() jetstream.JetStream { return st.js }

// Pool is the stack's database pool.
func (st *Stack) Pool() *pgxpool.Pool { return st.pool }

// DatabaseURL is the database the stack uses.
func (st *Stack) DatabaseURL() string { return st.pg.url }

// DatabaseNote says which database that is, for people: the given URL
// (its password hidden), "local server on 127.0.0.1:5432, database
// zerolayer", or the private cluster's folder and port.
func (st *Stack) DatabaseNote() string { return st.pg.note }

// Models are the models the worker serves.
func (st *Stack) Models() *worker.Models { return st.models }

// Billing is the billing service (for its Prometheus collector).
func (st *Stack) Billing() *ledger.Service { return st.billing }

// GatewayAddr is the address the HTTP gateway listens on ("" without
// one).
func (st *Stack) GatewayAddr() string {
	if st.gateway == nil {
		return ""
	}
	return st.gateway.Addr()
}
