package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/fleet"
	"github.com/zerolayer/zerolayer/producer"
)

// TenantHeader carries the tenant when the gateway runs without keys
// (Config.TenantHeader, for development).
const TenantHeader = "X-Zerolayer-Tenant"

// PriorityHeader sets the priority of jobs submitted through the
// compatible APIs, whose bodies have no such field.
const PriorityHeader = "X-Zerolayer-Priority"

// JobIDHeader names the job behind every answer that made one.
const JobIDHeader = "X-Zerolayer-Job-Id"

// Config configures a Gateway.
type Config struct {
	// Keys authenticates API keys and maps them to tenants (see
	// NewKeyring). With keys, a request without a key it holds is refused.
	Keys *Keyring
	// TenantHeader, when Keys is nil, takes the tenant from the
	// X-Zerolayer-Tenant header: anyone can act as any tenant, so use it
	// only in development. Without keys and without it every request is
	// refused.
	TenantHeader bool
	// Models maps model names to GGUF files, for bucketing prompts by
	// their token counts (see producer.Config). While no worker is live
	// (the ZL_WORKERS bucket) they are also the models /v1/models lists;
	// while workers are live, theirs are.
	Models map[string]string
	// ServedOnly says Models are exactly the served models: a request for
	// another is refused before it is queued (see producer.Config).
	ServedOnly bool
	// Limits are the request limits. Zero fields take the contract's.
	Limits contracts.Limits
	// SyncTimeout bounds how long a synchronous call waits for its job.
	// Defaults to 10 minutes.
	SyncTimeout time.Duration
	// MaxBatchBytes bounds a batch input file. Defaults to 256 MiB.
	MaxBatchBytes int64
	// BatchRetention is how long batch files and states are kept.
	// Defaults to 30 days.
	BatchRetention time.Duration
	// BatchLease is how long a batch whose gateway stopped refreshing its
	// lease (it died) waits before another gateway takes it over; a
	// gateway that closes gives its batches up at once. Defaults to 15
	// seconds.
	BatchLease time.Duration
	// ObjectReadTimeout bounds one read of a batch file of up to 32 MiB
	// from the object store (a download, or a batch's input or output
	// read by the gateway), and a larger file's as much again per 32 MiB:
	// the store's reader notices a stall only at this deadline. A read
	// that fails is read again from the start, skipping what it
	// delivered, while reads deliver more (objects.go). Defaults to 30
	// seconds.
	ObjectReadTimeout time.Duration
	// OpenAIBatchWindow is the completion window of batches made through
	// OpenAI's Batches API ("24h"): a batch unfinished after it has its
	// remaining lines canceled and ends expired. Defaults to 24 hours.
	OpenAIBatchWindow time.Duration
	// AnthropicBatchExpiry is how long an Anthropic message batch may
	// run: one that has not ended that long after it was created expires,
	// its unfinished requests canceled and reported expired. Defaults to
	// 24 hours, as Anthropic's.
	AnthropicBatchExpiry time.Duration
	// Logger receives the gateway's logs: refused keys (by their public
	// id, never the key) and the key file's reloads. No log line holds a
	// key, a secret or a prompt. Defaults to slog.Default().
	Logger *slog.Logger
	// Metrics, if set, records every request.
	Metrics *Metrics
	// Quota, if set, checks each tenant's limits before a job is
	// published: a job over a limit is answered 429 with Retry-After
	// (quota.go). Defaults to none.
	Quota producer.Admitter
	// Replicas is the replication factor of the batch buckets (files and
	// states), as contracts.StreamsConfig's for the streams: 1 for a
	// single server, 3 for a production cluster. It applies when the
	// gateway creates them or updates them to its configuration. Zero
	// means 1.
	Replicas int
}

// Gateway serves the HTTP APIs. It is an http.Handler.
type Gateway struct {
	nc      *nats.Conn
	cfg     Config
	handler http.Handler

	mu      sync.Mutex
	clients map[string]*producer.Client // by tenant
	running map[string]bool             // batches this gateway runs

	batches *batchStore
	fleet   *fleet.Watch    // the live workers; nil when out of sight
	started time.Time       // for the models' creation times
	id      string          // this gateway's id in the batch leases
	ctx     context.Context // ends at Close: stops the batch runs
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

// New returns a gateway submitting on nc. The streams must exist.
func New(nc *nats.Conn, cfg Config) (*Gateway, error) {
	if cfg.SyncTimeout <= 0 {
		cfg.SyncTimeout = 10 * time.Minute
	}
	if cfg.MaxBatchBytes <= 0 {
		cfg.MaxBatchBytes = 256 << 20
	}
	if cfg.BatchRetention <= 0 {
		cfg.BatchRetention = 30 * 24 * time.Hour
	}
	if cfg.BatchLease <= 0 {
		cfg.BatchLease = 15 * time.Second
	}
	if cfg.ObjectReadTimeout <= 0 {
		cfg.ObjectReadTimeout = 30 * time.Second
	}
	if cfg.OpenAIBatchWindow <= 0 {
		cfg.OpenAIBatchWindow = 24 * time.Hour
	}
	if cfg.AnthropicBatchExpiry <= 0 {
		cfg.AnthropicBatchExpiry = 24 * time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	g := &Gateway{nc: nc, cfg: cfg, clients: map[string]*producer.Client{}, running: map[string]bool{}, started: time.Now(),
		id: strings.TrimPrefix(newRequestID(), "req_")}
	g.ctx, g.stop = context.WithCancel(context.Background())
	octx, cancel := context.WithTimeout(g.ctx, 10*time.Second)
	defer cancel()
	if err := g.openBatches(octx); err != nil {
		g.stop()
		return nil, err
	}
	// The live workers' models: what /v1/models lists and which models a
	// job may ask for (producer.Client.CheckModel).
	if js, err := jetstream.New(nc); err == nil {
		f := fleet.New(js)
		if err := f.Start(octx); err != nil {
			f.Stop()
			cfg.Logger.Warn("the fleet of workers is out of sight: models are listed from the configuration, and jobs for any model are queued", "err", err)
		} else {
			g.fleet = f
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/jobs", g.submitJob)
	mux.HandleFunc("GET /v1/jobs/{id}", g.getJob)
	mux.HandleFunc("GET /v1/jobs/{id}/events", g.jobEvents)
	mux.HandleFunc("POST /v1/jobs/{id}/cancel", g.cancelJob)
	// The native JSONL batches. (They were under /v1/batches, which is
	// OpenAI's now; POST /v1/batches?id=B still creates one.)
	mux.HandleFunc("POST "+NativeBatches, g.createBatch)
	mux.HandleFunc("GET "+NativeBatches+"/{id}", g.getBatch)
	mux.HandleFunc("GET "+NativeBatches+"/{id}/output", g.batchOutput)
	mux.HandleFunc("POST "+NativeBatches+"/{id}/resume", g.resumeBatch)
	mux.HandleFunc("POST "+NativeBatches+"/{id}/cancel", g.cancelBatch)
	g.openAIBatchRoutes(mux) // OpenAI's files and batches; POST /v1/batches?id=B goes to createBatch
	mux.HandleFunc("POST /v1/chat/completions", g.chatCompletions)
	mux.HandleFunc("POST "+embeddingsEndpoint, g.embeddings)
	mux.HandleFunc("POST /v1/messages", g.messages)
	mux.HandleFunc("POST /v1/messages/count_tokens", g.countTokens)
	mux.HandleFunc("GET /v1/models", g.listModels)
	mux.HandleFunc("GET /v1/models/{id}", g.getModel)
	g.anthropicBatchRoutes(mux)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if !nc.IsConnected() {
			http.Error(w, "NATS is not connected", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/", g.unrouted(mux))
	g.handler = g.compat(mux)
	if cfg.Metrics != nil {
		g.handler = cfg.Metrics.observe(g.handler)
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.tendBatches()
	}()
	return g, nil
}

func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.handler.ServeHTTP(w, r) }

// Close stops the batch runs (their batches stay in_progress, to be
// resumed) and closes the per-tenant clients (not the connection).
func (g *Gateway) Close() error {
	g.stop()
	g.wg.Wait()
	if g.fleet != nil {
		g.fleet.Stop()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var errs []error
	for _, c := range g.clients {
		errs = append(errs, c.Close())
	}
	g.clients = map[string]*producer.Client{}
	return errors.Join(errs...)
}

// client authenticates r and returns its tenant's producer.
func (g *Gateway) client(r *http.Request) (*producer.Client, *contracts.Error) {
	tenant, e := g.authenticate(r)
	if e != nil {
		return nil, e
	}
	return g.clientFor(tenant)
}

// authenticate returns the tenant r acts as.
func (g *Gateway) authenticate(r *http.Request) (string, *contracts.Error) {
	switch {
	case g.cfg.Keys != nil:
		key := r.Header.Get("x-api-key")
		if a := r.Header.Get("Authorization"); key == "" && strings.HasPrefix(a, "Bearer ") {
			key = strings.TrimSpace(strings.TrimPrefix(a, "Bearer "))
		}
		if key == "" {
			return "", contracts.NewError(contracts.CodeUnauthenticated, "no API key: send Authorization: Bearer KEY or x-api-key: KEY")
		}
		t, ok := g.cfg.Keys.Authenticate(key)
		if !ok {
			// The id of a well-formed key is public; anything else may be
			// a secret pasted in the wrong place, so it is not logged.
			id, _ := KeyID(key)
			g.cfg.Logger.Warn("gateway: refused an API key", "key_id", id, "remote", r.RemoteAddr, "path", r.URL.Path)
			return "", contracts.NewError(contracts.CodeUnauthenticated, "unknown API key")
		}
		return t, nil
	case g.cfg.TenantHeader:
		tenant := r.Header.Get(TenantHeader)
		if err := contracts.ValidateTenant(tenant); err != nil {
			return "", contracts.NewError(contracts.CodeUnauthenticated, "%s header: %v", TenantHeader, err)
		}
		return tenant, nil
	default:
		return "", contracts.NewError(contracts.CodeUnauthenticated, "this gateway has no API keys configured")
	}
}

// clientFor returns tenant's producer, made on first use.
func (g *Gateway) clientFor(tenant string) (*producer.Client, *contracts.Error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.clients[tenant]; ok {
		return c, nil
	}
	c, err := producer.New(g.nc, producer.Config{Tenant: tenant, Models: g.cfg.Models, ServedOnly: g.cfg.ServedOnly, Limits: g.cfg.Limits, Admitter: g.cfg.Quota,
		Fleet: g.fleet})
	if err != nil {
		return nil, contracts.NewError(contracts.CodeUnavailable, "%v", err)
	}
	g.clients[tenant] = c
	return c, nil
}

// knownModel refuses a model no worker will run, for a call answered
// without a job (count_tokens, a jobless completion) or a model looked up:
// while workers are live, one neither served by any of them nor lately
// (the fleet, as producer.Client.CheckModel decides for jobs); with none
// live, one not in Config.Models when it was given (without them any
// name passes). wait (wait_for_model) lets any name pass.
func (g *Gateway) knownModel(name string, wait bool) *contracts.Error {
	if wait {
		return nil
	}
	if g.fleet != nil {
		if e := g.fleet.Refusal(name, false); e != nil {
			return e
		}
		if len(g.fleet.Workers()) > 0 {
			return nil
		}
	}
	if len(g.cfg.Models) == 0 {
		return nil
	}
	if _, ok := g.cfg.Models[name]; !ok {
		return contracts.NewError(contracts.CodeUnknownModel, "model %q is not served here", name)
	}
	return nil
}

// body reads a request body of at most the request byte limit, which
// must be UTF-8. A body that declares a larger length is refused before
// any of it is read (a client waiting on Expect: 100-continue gets the
// 413 instead of sending it).
func (g *Gateway) body(w http.ResponseWriter, r *http.Request) ([]byte, *contracts.Error) {
	limit := int64(g.cfg.Limits.MaxRequestBytes)
	if r.ContentLength > limit {
		return nil, contracts.NewError(contracts.CodeRequestTooLarge, "the body is %d bytes, larger than %d", r.ContentLength, limit)
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return nil, contracts.NewError(contracts.CodeRequestTooLarge, "the body is larger than %d bytes", mb.Limit)
	}
	if err != nil {
		return nil, contracts.NewError(contracts.CodeInvalidRequest, "reading the body: %v", err)
	}
	if !utf8.Valid(b) {
		return nil, contracts.NewError(contracts.CodeInvalidRequest, "the body is not valid UTF-8 (JSON text must be)")
	}
	return b, nil
}

// asError turns any error into a contract error.
func asError(err error) *contracts.Error {
	if errors.Is(err, nats.ErrConnectionClosed) || contracts.IsUnreachable(err) || retryableRead(err) {
		return contracts.NewError(contracts.CodeUnavailable, "%v", err)
	}
	return contracts.ErrorFrom(err)
}

// submitOpts continues the caller's W3C trace when it sends one.
func submitOpts(r *http.Request) *producer.SubmitOpts {
	tp, err := contracts.ParseTraceparent(r.Header.Get("traceparent"))
	if err != nil {
		return nil
	}
	return &producer.SubmitOpts{Trace: tp}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// jobError answers the jobs API's error shape: {"error": {code, message, …}}.
func jobError(w http.ResponseWriter, e *contracts.Error) {
	setRetryAfter(w, e)
	writeJSON(w, e.HTTPStatus(), map[string]any{"error": e})
}

// submitJob: POST /v1/jobs with a job request; 202 with the job id.
func (g *Gateway) submitJob(w http.ResponseWriter, r *http.Request) {
	c, e := g.client(r)
	if e != nil {
		jobError(w, e)
		return
	}
	raw, e := g.body(w, r)
	if e != nil {
		jobError(w, e)
		return
	}
	req, err := contracts.DecodeJobRequest(raw, g.cfg.Limits)
	if err != nil {
		jobError(w, asError(err))
		return
	}
	id, err := c.Submit(r.Context(), req, submitOpts(r))
	if err != nil {
		jobError(w, asError(err))
		return
	}
	w.Header().Set("Location", "/v1/jobs/"+id)
	w.Header().Set(JobIDHeader, id)
	writeJSON(w, http.StatusAccepted, map[string]string{"id": id, "status": "queued",
		"result": "/v1/jobs/" + id, "events": "/v1/jobs/" + id + "/events"})
}

// jobCall authenticates a call on /v1/jobs/{id} and checks the id; on
// failure it has answered.
func (g *Gateway) jobCall(w http.ResponseWriter, r *http.Request) (*producer.Client, string, bool) {
	c, e := g.client(r)
	if e != nil {
		jobError(w, e)
		return nil, "", false
	}
	id := r.PathValue("id")
	if err := contracts.ValidateJobID(id); err != nil {
		jobError(w, asError(err))
		return nil, "", false
	}
	return c, id, true
}

// getJob: GET /v1/jobs/{id}: 200 with the result once the job has ended,
// 202 {"status": "pending"} while it is queued or running, 404 not_found
// for an id the tenant never submitted (or whose result expired).
func (g *Gateway) getJob(w http.ResponseWriter, r *http.Request) {
	c, id, ok := g.jobCall(w, r)
	if !ok {
		return
	}
	res, err := c.Result(r.Context(), id)
	switch {
	case errors.Is(err, producer.ErrPending):
		writeJSON(w, http.StatusAccepted, map[string]string{"id": id, "status": "pending"})
	case err != nil:
		jobError(w, asError(err))
	default:
		writeJSON(w, http.StatusOK, res)
	}
}

// cancelJob: POST /v1/jobs/{id}/cancel: 202, or 200 with the status of a
// job that has already ended. Ids are the caller's tenant's: another
// tenant's job of the same id is a different job, never touched.
func (g *Gateway) cancelJob(w http.ResponseWriter, r *http.Request) {
	c, id, ok := g.jobCall(w, r)
	if !ok {
		return
	}
	// A job not submitted yet is canceled too: the stored cancel
	// request stops it if it comes.
	if res, err := c.Result(r.Context(), id); err != nil && !errors.Is(err, producer.ErrPending) && !errors.Is(err, contracts.CodeNotFound) {
		jobError(w, asError(err))
		return
	} else if res != nil {
		writeJSON(w, http.StatusOK, map[string]string{"id": id, "status": string(res.Status)})
		return
	}
	if err := c.Cancel(r.Context(), id); err != nil {
		jobError(w, asError(err))
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"id": id, "status": "canceling"})
}

// jobEvents: GET /v1/jobs/{id}/events as server-sent events, from the
// first or after Last-Event-ID ("attempt-seq"), until the terminal event.
func (g *Gateway) jobEvents(w http.ResponseWriter, r *http.Request) {
	c, id, ok := g.jobCall(w, r)
	if !ok {
		return
	}
	var lastAttempt int
	var lastSeq uint64
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		if _, err := fmt.Sscanf(v, "%d-%d", &lastAttempt, &lastSeq); err != nil {
			jobError(w, contracts.NewError(contracts.CodeInvalidRequest, "Last-Event-ID %q: want attempt-seq, as sent", v))
			return
		}
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	evs, errf, err := c.Events(ctx, id)
	if err != nil {
		jobError(w, asError(err))
		return
	}
	sse := newSSE(w)
	sse.open() // a job not submitted yet may be followed for long
	for ev := range evs {
		if ev.Attempt < lastAttempt || ev.Attempt == lastAttempt && ev.Seq <= lastSeq {
			continue
		}
		if err := sse.send(fmt.Sprintf("%d-%d", ev.Attempt, ev.Seq), string(ev.Type), ev); err != nil {
			return
		}
	}
	cancel()
	if err := errf(); err != nil && r.Context().Err() == nil {
		g.cfg.Logger.Warn("gateway: following events", "job", id, "err", err)
	}
}

// sse writes server-sent events, each flushed to the caller as it is
// written unless held (see hold).
type sse struct {
	w       http.ResponseWriter
	f       http.Flusher
	started bool
	// held defers the flushes to flush; dirty says something was
	// written since the last one.
	held, dirty bool
}

// hold makes send write without flushing until release: the events
// written for one job event (several tokens, reasoning and text, a tool
// call's pieces) go to the caller in one flush (flush). hold, release
// and flush do nothing on a nil sse.
func (s *sse) hold() {
	if s != nil {
		s.held = true
	}
}

// release ends hold, flushing what is written.
func (s *sse) release() {
	if s != nil {
		s.held = false
		s.flush()
	}
}

// flush sends what is written to the caller.
func (s *sse) flush() {
	if s == nil {
		return
	}
	if s.dirty && s.f != nil {
		s.f.Flush()
	}
	s.dirty = false
}

func newSSE(w http.ResponseWriter) *sse {
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

// open sends the status and headers, once, so that the caller knows the
// stream is open before the first event.
func (s *sse) open() {
	if s.started {
		return
	}
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
	s.started = true
	s.dirty = true
	if !s.held {
		s.flush()
	}
}

// send writes one event (id and name may be empty) with v as JSON data,
// or as is when v is a string.
func (s *sse) send(id, name string, v any) error {
	s.open()
	data, ok := v.(string)
	if !ok {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		data = string(b)
	}
	var sb strings.Builder
	if id != "" {
		sb.WriteString("id: " + id + "\n")
	}
	if name != "" {
		sb.WriteString("event: " + name + "\n")
	}
	sb.WriteString("data: " + data + "\n\n")
	if _, err := io.WriteString(s.w, sb.String()); err != nil {
		return err
	}
	s.dirty = true
	if !s.held {
		s.flush()
	}
	return nil
}
