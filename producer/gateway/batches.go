package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/producer"
)

// The JetStream buckets of batches run by gateways: the input and output
// files (object store), and each batch's state (key-value), both keyed by
// tenant and batch id so that tenants never see each other's.
const (
	BatchFiles  = "ZL_BATCH_FILES"
	BatchStates = "ZL_BATCH_STATES"
	// BatchLeases holds, for each batch a gateway runs, its lease: the
	// running gateway's id, refreshed a third of Config.BatchLease apart
	// and gone (the bucket's TTL) a lease after the gateway stopped
	// refreshing it, so that another gateway takes the batch over.
	BatchLeases = "ZL_BATCH_LEASES"
)

// NativeBatches is the path of the native JSONL batches API.
const NativeBatches = "/v1/zl/batches"

// BatchState is a batch as GET /v1/zl/batches/{id} reports it.
type BatchState struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
	// Status is in_progress, canceling or ended. A batch whose gateway
	// stopped or died is taken over by another gateway once its lease
	// (BatchLeases) runs out; POST /v1/zl/batches/{id}/resume runs one
	// that ended with an error again.
	Status string `json:"status"`
	// Counts count the lines by outcome. While the batch runs no count
	// goes down, across takeovers and resumes too (atLeast); those of an
	// ended batch count each of its records once.
	Counts producer.BatchCounts `json:"request_counts"`
	// Error says why a run stopped early (the output is then absent).
	Error     string    `json:"error,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
	// API is the API that created the batch: empty for the native one,
	// else "anthropic" or "openai", whose own fields are kept in Ext. The
	// input file always holds native lines (the API's requests mapped to
	// jobs); the output file native records.
	API string          `json:"api,omitempty"`
	Ext json.RawMessage `json:"ext,omitempty"`
}

// batchStore holds the batch buckets.
type batchStore struct {
	files  jetstream.ObjectStore
	states jetstream.KeyValue
	leases jetstream.KeyValue
}

func (g *Gateway) openBatches(ctx context.Context) error {
	js, err := jetstream.New(g.nc)
	if err != nil {
		return err
	}
	files, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: BatchFiles,
		Description: "zerolayer batch input and output files", TTL: g.cfg.BatchRetention, Storage: jetstream.FileStorage, Replicas: g.cfg.Replicas})
	if err != nil {
		return fmt.Errorf("gateway: batch files bucket: %w", err)
	}
	states, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: BatchStates,
		Description: "zerolayer batch states", TTL: g.cfg.BatchRetention, Storage: jetstream.FileStorage, Replicas: g.cfg.Replicas})
	if err != nil {
		return fmt.Errorf("gateway: batch states bucket: %w", err)
	}
	leases, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: BatchLeases,
		Description: "zerolayer batch leases: which gateway runs a batch", TTL: g.cfg.BatchLease, Storage: jetstream.FileStorage, Replicas: g.cfg.Replicas})
	if err != nil {
		return fmt.Errorf("gateway: batch leases bucket: %w", err)
	}
	g.batches = &batchStore{files: files, states: states, leases: leases}
	return nil
}

func batchKey(tenant, id string) string        { return tenant + "." + id }
func batchFile(tenant, id, kind string) string { return tenant + "/" + id + "/" + kind + ".jsonl" }

func (g *Gateway) batchState(ctx context.Context, tenant, id string) (*BatchState, error) {
	e, err := g.batches.states.Get(ctx, batchKey(tenant, id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st BatchState
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// updateState changes a batch's state with fn, as a compare-and-set on
// the key's revision (retried on a conflict), so that a run's progress
// and a cancel never overwrite each other. It returns the state written.
func (g *Gateway) updateState(ctx context.Context, tenant, id string, fn func(*BatchState)) (*BatchState, error) {
	key := batchKey(tenant, id)
	for try := 0; ; try++ {
		e, err := g.batches.states.Get(ctx, key)
		if err != nil {
			return nil, err
		}
		var st BatchState
		if err := json.Unmarshal(e.Value(), &st); err != nil {
			return nil, err
		}
		fn(&st)
		st.UpdatedAt = time.Now().UTC()
		b, _ := json.Marshal(&st)
		_, err = g.batches.states.Update(ctx, key, b, e.Revision())
		if err == nil {
			return &st, nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) || try == 10 {
			return nil, err
		}
	}
}

// createBatch: POST /v1/zl/batches?id=ID with the JSONL input as the body:
// 202 with the batch state. The same id again answers the batch as it is
// (batch ids are idempotency keys).
func (g *Gateway) createBatch(w http.ResponseWriter, r *http.Request) {
	c, e := g.client(r)
	if e != nil {
		jobError(w, e)
		return
	}
	id := r.URL.Query().Get("id")
	if err := contracts.ValidateJobID(id); err != nil {
		jobError(w, contracts.NewError(contracts.CodeInvalidRequest, "batch id (?id=): %v", err))
		return
	}
	// The state first: of two posts of one id, one creates it and runs
	// the batch; the other answers the batch as it is.
	ctx := r.Context()
	now := time.Now().UTC()
	st := &BatchState{ID: id, Tenant: c.Tenant(), Status: "in_progress", CreatedAt: now, UpdatedAt: now}
	b, _ := json.Marshal(st)
	if _, err := g.batches.states.Create(ctx, batchKey(c.Tenant(), id), b); errors.Is(err, jetstream.ErrKeyExists) {
		cur, err := g.batchState(ctx, c.Tenant(), id)
		if err != nil || cur == nil {
			jobError(w, asError(fmt.Errorf("batch %s: %v", id, err)))
			return
		}
		writeJSON(w, http.StatusOK, cur)
		return
	} else if err != nil {
		jobError(w, asError(err))
		return
	}
	body := http.MaxBytesReader(w, r.Body, g.cfg.MaxBatchBytes)
	if _, err := g.batches.files.Put(ctx, jetstream.ObjectMeta{Name: batchFile(c.Tenant(), id, "input")}, body); err != nil {
		// Nothing was stored: the id is free again.
		g.batches.states.Delete(context.WithoutCancel(ctx), batchKey(c.Tenant(), id))
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			jobError(w, contracts.NewError(contracts.CodeRequestTooLarge, "the batch is larger than %d bytes", mb.Limit))
			return
		}
		jobError(w, asError(err))
		return
	}
	g.startBatch(c, id)
	w.Header().Set("Location", NativeBatches+"/"+id)
	writeJSON(w, http.StatusAccepted, st)
}

// tendBatches, until the gateway closes, looks a third of a lease apart
// for batches in progress that no gateway runs (their lease is gone: the
// gateway that ran them stopped or died, or never started them) and runs
// them: a batch survives its gateway, on any replica, with no call to
// resume. Finished lines are answered from their stored results; nothing
// runs twice.
//
// The batches in progress are kept by a watch on ZL_BATCH_STATES (each
// change of a state comes once), so a look costs a lease read per batch in
// progress, whatever number of ended batches the bucket keeps.
func (g *Gateway) tendBatches() {
	open := map[string]BatchState{}
	updates := g.watchBatchStates()
	t := time.NewTicker(g.cfg.BatchLease / 3)
	defer t.Stop()
	for {
		select {
		case <-g.ctx.Done():
			return
		case e, ok := <-updates:
			switch {
			case !ok:
				// The watch ended (the connection closed for good, or
				// it could not start): watch again a tick later.
				updates = nil
			case e == nil: // the initial values are in
				g.takeOverBatches(open)
			case e.Operation() != jetstream.KeyValuePut:
				delete(open, e.Key())
			default:
				var st BatchState
				if json.Unmarshal(e.Value(), &st) != nil || st.Status == "ended" || st.Error != "" {
					delete(open, e.Key())
				} else {
					open[e.Key()] = st
				}
			}
		case <-t.C:
			if updates == nil {
				clear(open)
				updates = g.watchBatchStates()
				continue
			}
			g.takeOverBatches(open)
		}
	}
}

// watchBatchStates returns every batch state and each change of one, a
// nil after the initial values; the channel is closed when the watch
// ends. A watch that cannot start is a closed channel.
func (g *Gateway) watchBatchStates() <-chan jetstream.KeyValueEntry {
	w, err := g.batches.states.WatchAll(g.ctx)
	if err != nil {
		if g.ctx.Err() == nil {
			g.cfg.Logger.Warn("gateway: watching batch states", "err", err)
		}
		c := make(chan jetstream.KeyValueEntry)
		close(c)
		return c
	}
	return w.Updates()
}

// takeOverBatches starts every batch of open (in progress, by key) whose
// lease is free.
func (g *Gateway) takeOverBatches(open map[string]BatchState) {
	ctx, cancel := context.WithTimeout(g.ctx, 30*time.Second)
	defer cancel()
	for key, st := range open {
		g.mu.Lock()
		mine := g.running[key]
		g.mu.Unlock()
		if mine {
			continue
		}
		if _, err := g.batches.leases.Get(ctx, key); err == nil {
			continue // another gateway runs it
		}
		// A batch whose input is not stored yet is still being created:
		// its creator starts it.
		if _, err := g.batches.files.GetInfo(ctx, batchFile(st.Tenant, st.ID, "input")); err != nil {
			continue
		}
		c, ce := g.clientFor(st.Tenant)
		if ce != nil {
			g.cfg.Logger.Warn("gateway: taking over a batch", "tenant", st.Tenant, "batch", st.ID, "err", ce)
			continue
		}
		if g.startBatch(c, st.ID) {
			g.cfg.Logger.Info("gateway: took over a batch in progress that no gateway ran", "tenant", st.Tenant, "batch", st.ID)
			if st.API == "anthropic" {
				g.watchAnthropicExpiry(c, st.ID, anthropicExt(&st).ExpiresAt)
			}
		}
	}
}

// startBatch runs batch id in the background, under its lease, unless
// this gateway or another runs it already; it reports whether it started
// it.
func (g *Gateway) startBatch(c *producer.Client, id string) bool {
	key := batchKey(c.Tenant(), id)
	g.mu.Lock()
	if g.running[key] {
		g.mu.Unlock()
		return false
	}
	g.running[key] = true
	g.mu.Unlock()
	release := func() {
		g.mu.Lock()
		delete(g.running, key)
		g.mu.Unlock()
	}
	ctx, cancel := context.WithCancel(g.ctx)
	rev, err := g.batches.leases.Create(ctx, key, []byte(g.id))
	if err != nil {
		cancel()
		release()
		if !errors.Is(err, jetstream.ErrKeyExists) && g.ctx.Err() == nil {
			g.cfg.Logger.Warn("gateway: taking a batch's lease", "tenant", c.Tenant(), "batch", id, "err", err)
		}
		return false
	}
	g.wg.Add(2)
	go func() {
		defer g.wg.Done()
		g.holdLease(ctx, cancel, key, rev)
	}()
	go func() {
		defer g.wg.Done()
		defer release()
		defer cancel()
		if err := g.runBatch(ctx, c, id); err != nil {
			g.cfg.Logger.Warn("gateway: batch stopped", "tenant", c.Tenant(), "batch", id, "err", err)
		}
	}()
	return true
}

// holdLease refreshes the lease key (at revision rev) until ctx ends, then
// gives it up, so that another gateway may take the batch over at once.
// A lease lost meanwhile (refreshed too late, and taken) stops the run:
// the batch is another gateway's now.
func (g *Gateway) holdLease(ctx context.Context, stop context.CancelFunc, key string, rev uint64) {
	t := time.NewTicker(g.cfg.BatchLease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			g.batches.leases.Delete(dctx, key, jetstream.LastRevision(rev))
			return
		case <-t.C:
		}
		next, err := g.batches.leases.Update(ctx, key, []byte(g.id), rev)
		switch {
		case err == nil:
			rev = next
		case errors.Is(err, jetstream.ErrKeyNotFound):
			// Expired while unrefreshed (a long pause): take it again
			// unless another gateway has.
			if next, err = g.batches.leases.Create(ctx, key, []byte(g.id)); err == nil {
				rev = next
				continue
			}
			fallthrough
		default:
			if ctx.Err() != nil {
				continue
			}
			if e, gerr := g.batches.leases.Get(ctx, key); gerr == nil && string(e.Value()) != g.id {
				g.cfg.Logger.Warn("gateway: lost a batch's lease to another gateway; stopping its run here", "batch", key, "err", err)
				stop()
			}
		}
	}
}

// runBatch runs the stored input through producer.RunBatch and stores the
// output, updating the state as records are written.
func (g *Gateway) runBatch(ctx context.Context, c *producer.Client, id string) error {
	tenant := c.Tenant()
	in, err := g.spoolInput(ctx, tenant, id)
	if err != nil {
		return err
	}
	defer in.Close()
	pr, pw := io.Pipe()
	stored := make(chan error, 1)
	go func() {
		_, err := g.batches.files.Put(ctx, jetstream.ObjectMeta{Name: batchFile(tenant, id, "output")}, pr)
		pr.CloseWithError(err) // unblocks the writer if the store failed
		stored <- err
	}()
	progress := newProgressWriter(func(n producer.BatchCounts) {
		g.updateState(ctx, tenant, id, func(st *BatchState) { st.Counts = atLeast(st.Counts, n) })
	})
	counts, runErr := c.RunBatch(ctx, in, pw, producer.BatchOpts{ID: id, Progress: progress.set})
	progress.stop()
	pw.CloseWithError(runErr)
	storeErr := <-stored
	if ctx.Err() != nil {
		return ctx.Err() // the gateway is stopping (or lost the lease): the batch stays in_progress, for another
	}
	if runErr == nil && storeErr == nil {
		if afterOutputStored != nil {
			afterOutputStored(tenant, id)
		}
		// A chunk of the output stored twice (its publish sent again
		// across a stream leader change, after its acknowledgement was
		// lost) leaves an object that does not read back to its digest:
		// every download of it would fail. Read it back whole; if it does
		// not, the batch runs again (its lines answered from their stored
		// results) and writes it anew.
		if _, err := g.copyObject(ctx, batchFile(tenant, id, "output"), io.Discard, nil); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("stopped: the stored output does not read back whole, to be run again: %w", err)
		}
	}
	if err := errors.Join(runErr, storeErr); err != nil && (contracts.IsUnreachable(err) || errors.Is(err, context.DeadlineExceeded)) {
		// NATS out of reach for a moment (this gateway's server went
		// down): the batch is not over. It stays in_progress, its lease
		// is given up, and tendBatches runs it again, here or on another
		// replica, answering the lines already done from their results.
		return fmt.Errorf("stopped by a passing error, to be run again: %w", err)
	}
	end, err := g.updateState(ctx, tenant, id, func(st *BatchState) {
		st.Status, st.EndedAt = "ended", time.Now().UTC()
		if err := errors.Join(runErr, storeErr); err != nil {
			// Stopped part-way, perhaps short of where an earlier run got.
			st.Counts, st.Error = atLeast(st.Counts, counts), err.Error()
		} else {
			st.Counts = counts // every line, counted from its record
		}
	})
	if err == nil {
		g.openAIBatchEnded(end)
	}
	return err
}

// afterOutputStored, when set (by tests), is called once a batch's output
// is stored, before it is read back.
var afterOutputStored func(tenant, id string)

// progressEvery is how often a running batch's state takes its counts.
const progressEvery = 500 * time.Millisecond

// progressWriter writes a running batch's latest counts to its state at
// most once per progressEvery, and always writes the last counts it was
// given: a burst of lines followed by a pause (lines held by a busy fleet)
// leaves the state at the burst's end, not at its first line.
type progressWriter struct {
	mu      sync.Mutex
	latest  producer.BatchCounts
	changed bool
	done    chan struct{}
	exited  chan struct{}
}

func newProgressWriter(write func(producer.BatchCounts)) *progressWriter {
	p := &progressWriter{done: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		defer close(p.exited)
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-p.done:
				return
			case <-t.C:
			}
			p.mu.Lock()
			n, changed := p.latest, p.changed
			p.changed = false
			p.mu.Unlock()
			if changed {
				write(n)
			}
		}
	}()
	return p
}

// set records n as the run's counts; the writer writes them soon.
func (p *progressWriter) set(n producer.BatchCounts) {
	p.mu.Lock()
	p.latest, p.changed = n, true
	p.mu.Unlock()
}

// stop ends the writer; the run's end writes its final counts itself.
func (p *progressWriter) stop() {
	close(p.done)
	<-p.exited
}

// atLeast is a run's counts n as a client may see them after cur: no
// count below cur's. A run that resumes a batch (taken over, resumed)
// walks the input from its first line again, answering the lines already
// done from their stored results, so its own counts start at zero and
// reach what earlier runs counted only once it is past where they got;
// until then the state keeps theirs (request_counts went 1,257, then 1,
// then 1,706 across a takeover). Lines keep their outcomes from run to
// run, so once the run is past, its counts are at least cur's anyway.
func atLeast(cur, n producer.BatchCounts) producer.BatchCounts {
	return producer.BatchCounts{Total: max(cur.Total, n.Total), Completed: max(cur.Completed, n.Completed),
		Failed: max(cur.Failed, n.Failed), Canceled: max(cur.Canceled, n.Canceled), Invalid: max(cur.Invalid, n.Invalid)}
}

// spoolInput copies batch id's input, whole, from the object store to a
// temporary file (see spoolObject). The batch is read at the pace its
// lines are answered, and the object store's reader does not wait that
// long: read straight from it, a batch of thousands of lines stopped
// part-way with "nats: timeout".
func (g *Gateway) spoolInput(ctx context.Context, tenant, id string) (*os.File, error) {
	return g.spoolObject(ctx, batchFile(tenant, id, "input"))
}

// tempFile returns an empty temporary file, already unlinked: it lives
// while it is open, and nothing is left behind if the gateway dies.
func tempFile() (*os.File, error) {
	f, err := os.CreateTemp("", "zerolayer-batch-*.jsonl")
	if err != nil {
		return nil, fmt.Errorf("gateway: a temporary file: %w", err)
	}
	os.Remove(f.Name())
	return f, nil
}

// batchCall authenticates a call on /v1/zl/batches/{id} and reads the batch's
// state; on failure (or an unknown batch: 404) it has answered.
func (g *Gateway) batchCall(w http.ResponseWriter, r *http.Request) (*producer.Client, *BatchState, bool) {
	c, id, ok := g.jobCall(w, r)
	if !ok {
		return nil, nil, false
	}
	st, err := g.batchState(r.Context(), c.Tenant(), id)
	if err != nil {
		jobError(w, asError(err))
		return nil, nil, false
	}
	if st == nil {
		jobError(w, contracts.NewError(contracts.CodeNotFound, "no batch %s", id))
		return nil, nil, false
	}
	return c, st, true
}

// getBatch: GET /v1/zl/batches/{id}.
func (g *Gateway) getBatch(w http.ResponseWriter, r *http.Request) {
	if _, st, ok := g.batchCall(w, r); ok {
		writeJSON(w, http.StatusOK, st)
	}
}

// batchOutput: GET /v1/zl/batches/{id}/output: the output file once the batch
// ended (400 invalid_request before), whole or visibly not (serveObject:
// Content-Length and Repr-Digest, a failed read aborts the response).
func (g *Gateway) batchOutput(w http.ResponseWriter, r *http.Request) {
	_, st, ok := g.batchCall(w, r)
	if !ok {
		return
	}
	if st.Status != "ended" || st.Error != "" {
		msg := fmt.Sprintf("batch %s is %s; its output is written when it ends", st.ID, st.Status)
		if st.Error != "" {
			msg = fmt.Sprintf("batch %s stopped (%s); resume it to write its output", st.ID, st.Error)
		}
		jobError(w, contracts.NewError(contracts.CodeInvalidRequest, "%s", msg))
		return
	}
	g.serveObject(w, r, batchFile(st.Tenant, st.ID, "output"), "application/x-ndjson", jobError)
}

// resumeBatch: POST /v1/zl/batches/{id}/resume runs a batch again whose
// gateway stopped (or that ended with an error): finished lines are
// answered from their results, nothing runs twice.
func (g *Gateway) resumeBatch(w http.ResponseWriter, r *http.Request) {
	c, st, ok := g.batchCall(w, r)
	if !ok {
		return
	}
	if st.Status == "ended" && st.Error == "" {
		writeJSON(w, http.StatusOK, st)
		return
	}
	st, err := g.updateState(r.Context(), st.Tenant, st.ID, func(st *BatchState) { st.Status, st.Error = "in_progress", "" })
	if err != nil {
		jobError(w, asError(err))
		return
	}
	g.startBatch(c, st.ID)
	writeJSON(w, http.StatusAccepted, st)
}

// cancelBatchJobs cancels the job of every line of c's batch id (the
// batch APIs' cancels and expiries all come here).
func (g *Gateway) cancelBatchJobs(ctx context.Context, c *producer.Client, id string) error {
	// Spooled: canceling line by line takes longer than the store's
	// reader waits, and a read cut short would leave lines running.
	in, err := g.spoolInput(ctx, c.Tenant(), id)
	if err != nil {
		return err
	}
	defer in.Close()
	_, err = c.CancelBatch(ctx, in, id)
	return err
}

// cancelBatch: POST /v1/zl/batches/{id}/cancel cancels the batch's jobs; the
// run ends as they do, with what ran billed.
func (g *Gateway) cancelBatch(w http.ResponseWriter, r *http.Request) {
	c, st, ok := g.batchCall(w, r)
	if !ok {
		return
	}
	if st.Status == "ended" {
		writeJSON(w, http.StatusOK, st)
		return
	}
	if err := g.cancelBatchJobs(r.Context(), c, st.ID); err != nil {
		jobError(w, asError(err))
		return
	}
	st, err := g.updateState(r.Context(), st.Tenant, st.ID, func(st *BatchState) {
		if st.Status != "ended" {
			st.Status = "canceling"
		}
	})
	if err != nil {
		jobError(w, asError(err))
		return
	}
	writeJSON(w, http.StatusAccepted, st)
}
