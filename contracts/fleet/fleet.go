// Package fleet follows what the live workers serve: the ZL_WORKERS and
// ZL_MODELS key-value buckets (contracts.WorkersBucket and
// contracts.ModelsBucket), which every worker rewrites with each heartbeat.
// Producers decide with it whether a job for a model is refused at submit
// (workers are live and none serves the model, nor did one lately), the
// gateway lists the served models with it (/v1/models), and the queue
// metrics count the jobs waiting for a model no live worker serves.
//
// A Watch reads the buckets through JetStream's API (a key-value watch):
// in a tenant's own NATS account, which has none, Start fails and callers
// act as if no worker were live (jobs are queued, and wait).
//
//	w := fleet.New(js)
//	if err := w.Start(ctx); err == nil {
//		defer w.Stop()
//		st := w.Model("qwen3-s-f32") // st.LiveWorkers, st.Live, st.Recent
//	}
package fleet

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
)

// rebind is how often a Watch looks again for a bucket that did not exist
// (no worker of this release has started yet).
const rebind = 2 * time.Second

// Watch keeps the fleet's buckets in memory. Its methods are safe for
// concurrent use.
type Watch struct {
	js jetstream.JetStream

	mu      sync.Mutex
	workers map[string]workerEntry // by key
	models  map[string]modelEntry  // by key
	// prefixes are ZL_PREFIXES's entries (followed after WithPrefixes):
	// the worker token holding each prefix key, and when it said so.
	prefixes     map[string]prefixEntry
	withPrefixes bool
	prefixKV     jetstream.KeyValue // for HolderNow's look-ups, once bound
	started      bool
	ctx          context.Context
	stop         context.CancelFunc
	done         sync.WaitGroup
	now          func() time.Time
}

type workerEntry struct {
	info contracts.WorkerInfo
	at   time.Time // when the server stored it
}

type modelEntry struct {
	rec contracts.ModelRecord
	at  time.Time
}

type prefixEntry struct {
	worker string // its token (contracts.ModelToken of its id)
	at     time.Time
	rev    uint64 // the entry's revision: an older one never replaces it
}

// New returns a Watch reading through js; it reads nothing until Start.
func New(js jetstream.JetStream) *Watch {
	return &Watch{js: js, workers: map[string]workerEntry{}, models: map[string]modelEntry{}, now: time.Now}
}

// WithPrefixes makes Start follow the held prefixes too
// (contracts.PrefixesBucket; Holder), as workers do to pass a job on to
// the worker holding its prompt's prefix. Call it before Start.
func (w *Watch) WithPrefixes() *Watch {
	w.withPrefixes = true
	w.prefixes = map[string]prefixEntry{}
	return w
}

// Start begins following both buckets and returns once it has read what
// they hold (or ctx ends: then ctx's error). A bucket that does not exist
// yet is looked for again every few seconds. It fails when JetStream's API
// is out of reach (a tenant's account). Calling it again does nothing.
func (w *Watch) Start(ctx context.Context) error {
	w.mu.Lock()
	if w.started {
		w.mu.Unlock()
		return nil
	}
	w.started = true
	w.ctx, w.stop = context.WithCancel(context.Background())
	w.mu.Unlock()
	buckets := []string{contracts.WorkersBucket, contracts.ModelsBucket}
	if w.withPrefixes {
		buckets = append(buckets, contracts.PrefixesBucket)
		w.done.Add(1)
		go w.prunePrefixes()
	}
	ready := make(chan error, len(buckets))
	for _, bucket := range buckets {
		w.done.Add(1)
		go w.follow(bucket, ready)
	}
	for range buckets {
		select {
		case err := <-ready:
			if err != nil {
				w.Stop()
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Stop ends the watch. Safe to call twice, and without Start.
func (w *Watch) Stop() {
	w.mu.Lock()
	stop := w.stop
	w.mu.Unlock()
	if stop != nil {
		stop()
	}
	w.done.Wait()
}

// follow watches bucket until Stop, reporting on ready once it has read
// what the bucket holds (nil), found it absent (nil), or failed to reach
// JetStream (the error). An absent bucket, or one out of reach after
// Start, is looked up again every rebind.
func (w *Watch) follow(bucket string, ready chan<- error) {
	defer w.done.Done()
	var once sync.Once
	report := func(err error) { once.Do(func() { ready <- err }) } // (ready holds one per bucket)
	defer report(nil)
	for {
		kv, err := w.js.KeyValue(w.ctx, bucket)
		switch {
		case err == nil:
			if bucket == contracts.PrefixesBucket {
				w.mu.Lock()
				w.prefixKV = kv
				w.mu.Unlock()
			}
			// Until Stop, or until the watch ends (then watch again).
			w.run(kv, bucket, func() { report(nil) })
		case errors.Is(err, jetstream.ErrBucketNotFound):
			report(nil) // absent: nothing is served yet
		default:
			report(err) // Start gives up (and stops this); later, try again
		}
		select {
		case <-w.ctx.Done():
			return
		case <-time.After(rebind):
		}
	}
}

// run applies kv's entries until Stop.
func (w *Watch) run(kv jetstream.KeyValue, bucket string, ready func()) {
	kw, err := kv.WatchAll(w.ctx)
	if err != nil {
		ready()
		return
	}
	defer kw.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return
		case e, ok := <-kw.Updates():
			if !ok {
				return
			}
			if e == nil {
				ready() // the initial values are in
				continue
			}
			w.apply(bucket, e)
		}
	}
}

func (w *Watch) apply(bucket string, e jetstream.KeyValueEntry) {
	w.mu.Lock()
	defer w.mu.Unlock()
	put := e.Operation() == jetstream.KeyValuePut
	switch bucket {
	case contracts.WorkersBucket:
		info, err := contracts.DecodeWorkerInfo(e.Value())
		if !put || err != nil {
			delete(w.workers, e.Key())
			return
		}
		w.workers[e.Key()] = workerEntry{info: info, at: e.Created()}
	case contracts.ModelsBucket:
		rec, err := contracts.DecodeModelRecord(e.Value())
		if !put || err != nil {
			delete(w.models, e.Key())
			return
		}
		w.models[e.Key()] = modelEntry{rec: rec, at: e.Created()}
	case contracts.PrefixesBucket:
		if old, ok := w.prefixes[e.Key()]; ok && old.rev > e.Revision() {
			return // HolderNow read a later one
		}
		if !put || !contracts.ValidWorkerToken(string(e.Value())) {
			delete(w.prefixes, e.Key())
			return
		}
		w.prefixes[e.Key()] = prefixEntry{worker: string(e.Value()), at: e.Created(), rev: e.Revision()}
	}
}

// prunePrefixes forgets, every minute, the prefixes whose entries have
// expired (a bucket's TTL removes them without a word to watchers).
func (w *Watch) prunePrefixes() {
	defer w.done.Done()
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-t.C:
		}
		w.mu.Lock()
		now := w.now()
		for k, e := range w.prefixes {
			if now.Sub(e.at) >= contracts.PrefixTTL {
				delete(w.prefixes, k)
			}
		}
		w.mu.Unlock()
	}
}

// Holder returns the token of the worker that holds the prefix of key
// (contracts.PrefixKey) if that worker is live, else "". Only a Watch
// WithPrefixes knows any.
func (w *Watch) Holder(key string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.prefixes[key]
	if !ok || w.now().Sub(e.at) >= contracts.PrefixTTL {
		return ""
	}
	if we, ok := w.workers[e.worker]; !ok || w.now().Sub(we.at) >= contracts.WorkersTTL {
		return ""
	}
	return e.worker
}

// HolderNow is Holder, but where the watch knows no holder of key it
// looks the key up in ZL_PREFIXES itself. A watch applies a bucket's
// updates a moment after they are stored, and in a cluster its consumer
// may stall for seconds before it is reset; a worker publishes what it
// holds before the result that lets the next turn be submitted, so that
// turn can be pulled before the watch has the holder: the look-up (one
// round trip, only for a prompt continuing a conversation no known worker
// holds) finds it. An error of the look-up reads as no holder.
func (w *Watch) HolderNow(ctx context.Context, key string) string {
	if h := w.Holder(key); h != "" || !w.withPrefixes {
		return h
	}
	w.mu.Lock()
	kv := w.prefixKV
	w.mu.Unlock()
	if kv == nil {
		return ""
	}
	e, err := kv.Get(ctx, key)
	if err != nil {
		return ""
	}
	w.apply(contracts.PrefixesBucket, e)
	return w.Holder(key)
}

// LiveCount returns how many workers are live.
func (w *Watch) LiveCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, e := range w.workers {
		if w.now().Sub(e.at) < contracts.WorkersTTL {
			n++
		}
	}
	return n
}

// LiveToken reports whether the worker of token (contracts.ModelToken of
// its id) is live.
func (w *Watch) LiveToken(token string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.workers[token]
	return ok && w.now().Sub(e.at) < contracts.WorkersTTL
}

// Workers returns the live workers (an entry written within
// contracts.WorkersTTL), by worker id.
func (w *Watch) Workers() []contracts.WorkerInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	var out []contracts.WorkerInfo
	for _, e := range w.workers {
		if now.Sub(e.at) < contracts.WorkersTTL {
			out = append(out, e.info)
		}
	}
	slices.SortFunc(out, func(a, b contracts.WorkerInfo) int {
		switch {
		case a.WorkerID < b.WorkerID:
			return -1
		case a.WorkerID > b.WorkerID:
			return 1
		}
		return 0
	})
	return out
}

// Served returns the names of the models the live workers serve, sorted.
func (w *Watch) Served() []string {
	var out []string
	for _, wi := range w.Workers() {
		for _, m := range wi.Models {
			if !slices.Contains(out, m.Name) {
				out = append(out, m.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Known returns the names of the models served by a live worker or lately
// by any (contracts.ModelsTTL), sorted.
func (w *Watch) Known() []string {
	out := w.Served()
	w.mu.Lock()
	now := w.now()
	for _, e := range w.models {
		if now.Sub(e.at) < contracts.ModelsTTL && !slices.Contains(out, e.rec.Model) {
			out = append(out, e.rec.Model)
		}
	}
	w.mu.Unlock()
	slices.Sort(out)
	return out
}

// ModelState is what the fleet says of one model.
type ModelState struct {
	// LiveWorkers counts the live workers, whatever they serve.
	LiveWorkers int
	// Live is set when a live worker serves the model.
	Live bool
	// Recent is set when a worker served it within contracts.ModelsTTL.
	Recent bool
	// EmbeddingOnly is set when every live worker that serves the model
	// says it only embeds (contracts.WorkerModel.EmbeddingOnly).
	EmbeddingOnly bool
}

// Model returns what the fleet says of model.
func (w *Watch) Model(model string) ModelState {
	var st ModelState
	generates := false
	for _, wi := range w.Workers() {
		st.LiveWorkers++
		for _, m := range wi.Models {
			if m.Name == model {
				st.Live = true
				generates = generates || !m.EmbeddingOnly
			}
		}
	}
	st.EmbeddingOnly = st.Live && !generates
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.models[contracts.ModelToken(model)]; ok && e.rec.Model == model && w.now().Sub(e.at) < contracts.ModelsTTL {
		st.Recent = true
	}
	st.Recent = st.Recent || st.Live
	return st
}

// Refusal is the error a producer answers a job for model with when the
// fleet says no worker will run it: workers are live and none serves the
// model nor served it lately. It returns nil otherwise (the model is
// served, or no worker is live: the job waits), or when wait is set (the
// client asked to wait for such a worker).
func (w *Watch) Refusal(model string, wait bool) *contracts.Error {
	if w == nil || wait {
		return nil
	}
	st := w.Model(model)
	if st.LiveWorkers == 0 || st.Recent {
		return nil
	}
	return contracts.NewError(contracts.CodeUnknownModel,
		"model %q is not served: none of the %d live workers serves it, nor did one lately (served: %v); submit with wait_for_model to queue it for a worker yet to start",
		model, st.LiveWorkers, w.Known())
}
