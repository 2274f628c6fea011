package gateway

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/producer"
)

// AnthropicBatches is the path of Anthropic's Message Batches API. Its
// batches are native batches underneath (batches.go): the requests are
// mapped to native lines when the batch is created, the run is the native
// run (taken over by another gateway when theirs dies, billed per line), and the native
// output is mapped back to Anthropic's results when they are read.
const AnthropicBatches = "/v1/messages/batches"

// The limits of one Anthropic message batch, Anthropic's own: at most
// maxAnthropicBatchRequests requests, each custom_id of at most
// maxCustomIDLen characters. A request's native line may not be longer
// than maxAnthropicBatchLine, the longest line a run reads
// (producer.BatchOpts.MaxLineBytes' default).
const (
	maxAnthropicBatchRequests = 100_000
	maxCustomIDLen            = 64
	maxAnthropicBatchLine     = 4 << 20
)

// anthropicBatchExt is the part of an Anthropic batch's state that the
// native state has no field for (BatchState.Ext).
type anthropicBatchExt struct {
	// Requests is how many requests the batch holds.
	Requests int `json:"requests"`
	// ExpiresAt is when the batch expires if it has not ended by then.
	ExpiresAt time.Time `json:"expires_at"`
	// CancelInitiatedAt is when the batch was first asked to cancel.
	CancelInitiatedAt time.Time `json:"cancel_initiated_at,omitzero"`
	// ExpiredAt is when the batch expired: its unfinished requests were
	// canceled then, and are reported expired rather than canceled.
	ExpiredAt time.Time `json:"expired_at,omitzero"`
}

// due reports whether the batch is past its expiry at now.
func (ext *anthropicBatchExt) due(now time.Time) bool {
	return !ext.ExpiresAt.IsZero() && !now.Before(ext.ExpiresAt)
}

// anthropicExt reads st's Anthropic fields.
func anthropicExt(st *BatchState) *anthropicBatchExt {
	var ext anthropicBatchExt
	json.Unmarshal(st.Ext, &ext)
	return &ext
}

// setExt stores ext in st.
func (ext *anthropicBatchExt) setExt(st *BatchState) {
	st.Ext, _ = json.Marshal(ext)
}

// messageBatch is Anthropic's MessageBatch object. The times that may be
// unset are pointers, written as null.
type messageBatch struct {
	ID                string             `json:"id"`
	Type              string             `json:"type"`
	ProcessingStatus  string             `json:"processing_status"`
	RequestCounts     messageBatchCounts `json:"request_counts"`
	EndedAt           *time.Time         `json:"ended_at"`
	CreatedAt         time.Time          `json:"created_at"`
	ExpiresAt         time.Time          `json:"expires_at"`
	CancelInitiatedAt *time.Time         `json:"cancel_initiated_at"`
	ArchivedAt        *time.Time         `json:"archived_at"`
	ResultsURL        *string            `json:"results_url"`
}

// messageBatchCounts counts a message batch's requests by where they are.
type messageBatchCounts struct {
	Processing int `json:"processing"`
	Succeeded  int `json:"succeeded"`
	Errored    int `json:"errored"`
	Canceled   int `json:"canceled"`
	Expired    int `json:"expired"`
}

// anthropicBatchRoutes registers the Message Batches API on mux.
func (g *Gateway) anthropicBatchRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST "+AnthropicBatches, g.createMessageBatch)
	mux.HandleFunc("GET "+AnthropicBatches, g.listMessageBatches)
	mux.HandleFunc("GET "+AnthropicBatches+"/{id}", g.getMessageBatch)
	mux.HandleFunc("DELETE "+AnthropicBatches+"/{id}", g.deleteMessageBatch)
	mux.HandleFunc("POST "+AnthropicBatches+"/{id}/cancel", g.cancelMessageBatch)
	mux.HandleFunc("GET "+AnthropicBatches+"/{id}/results", g.messageBatchResults)
}

// newMessageBatchID returns a new batch id: msgbatch_, the time in
// milliseconds as 12 hex digits, and 64 random bits. Ids sort as the
// batches were created, which the list's cursors rely on, and a line's job
// id (producer.BatchJobID with a custom_id of up to 64 characters) stays
// within contracts.MaxJobIDLen.
func newMessageBatchID() string {
	var b [8]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s%012x%s", messageBatchIDPrefix, time.Now().UnixMilli(), hex.EncodeToString(b[:]))
}

// messageBatchIDPrefix begins every message batch id.
const messageBatchIDPrefix = "msgbatch_"

// createMessageBatch: POST /v1/messages/batches with
// {"requests": [{"custom_id", "params"}]}: every request is checked and
// mapped to a job before anything is stored (one bad request refuses the
// batch, 400 naming it), then the batch runs as a native batch. 200 with
// the MessageBatch.
func (g *Gateway) createMessageBatch(w http.ResponseWriter, r *http.Request) {
	c, e := g.client(r)
	if e != nil {
		anthropicError(w, e)
		return
	}
	id := newMessageBatchID()
	tmp, err := os.CreateTemp("", "zerolayer-msgbatch-*.jsonl")
	if err != nil {
		anthropicError(w, asError(err))
		return
	}
	os.Remove(tmp.Name()) // lives while open
	defer tmp.Close()
	n, e := g.anthropicBatchInput(r, http.MaxBytesReader(w, r.Body, g.cfg.MaxBatchBytes), id, tmp)
	if e != nil {
		anthropicError(w, e)
		return
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		anthropicError(w, asError(err))
		return
	}
	ctx := r.Context()
	now := time.Now().UTC()
	ext := &anthropicBatchExt{Requests: n, ExpiresAt: now.Add(g.cfg.AnthropicBatchExpiry)}
	st := &BatchState{ID: id, Tenant: c.Tenant(), Status: "in_progress", CreatedAt: now, UpdatedAt: now, API: "anthropic"}
	ext.setExt(st)
	b, _ := json.Marshal(st)
	// The state first, as the native batches do: the id is taken before
	// its input is written.
	if _, err := g.batches.states.Create(ctx, batchKey(c.Tenant(), id), b); err != nil {
		anthropicError(w, asError(err))
		return
	}
	if _, err := g.batches.files.Put(ctx, jetstream.ObjectMeta{Name: batchFile(c.Tenant(), id, "input")}, tmp); err != nil {
		g.batches.states.Delete(context.WithoutCancel(ctx), batchKey(c.Tenant(), id))
		anthropicError(w, asError(err))
		return
	}
	g.startBatch(c, id)
	g.watchAnthropicExpiry(c, id, ext.ExpiresAt)
	writeJSON(w, http.StatusOK, messageBatchOf(r, st))
}

// anthropicBatchInput reads a create body from body and writes the batch's
// native input to out, one line per request, returning how many there
// are. The body is decoded as it is read: a batch is never held whole.
func (g *Gateway) anthropicBatchInput(r *http.Request, body io.Reader, id string, out io.Writer) (int, *contracts.Error) {
	dec := json.NewDecoder(body)
	bad := func(err error, where string) *contracts.Error {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return contracts.NewError(contracts.CodeRequestTooLarge, "the batch is larger than %d bytes", mb.Limit)
		}
		return contracts.NewError(contracts.CodeMalformedJSON, "%s: %v", where, err)
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		if err == nil {
			err = fmt.Errorf("want an object {\"requests\": [...]}")
		}
		return 0, bad(err, "the body")
	}
	n := -1
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return 0, bad(err, "the body")
		}
		if t != "requests" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return 0, bad(err, fmt.Sprintf("the body's %v", t))
			}
			continue
		}
		if n >= 0 {
			return 0, contracts.NewError(contracts.CodeInvalidRequest, "requests is given twice")
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('[') {
			if err == nil {
				err = fmt.Errorf("want a list")
			}
			return 0, bad(err, "requests")
		}
		n = 0
		seen := map[string]int{}
		for ; dec.More(); n++ {
			if n == maxAnthropicBatchRequests {
				return 0, contracts.NewError(contracts.CodeInvalidRequest, "requests: more than %d requests; split the batch", maxAnthropicBatchRequests)
			}
			var item struct {
				CustomID string          `json:"custom_id"`
				Params   json.RawMessage `json:"params"`
			}
			if err := dec.Decode(&item); err != nil {
				return 0, bad(err, fmt.Sprintf("requests[%d]", n))
			}
			line, e := g.anthropicBatchLine(r, id, n, item.CustomID, item.Params, seen)
			if e != nil {
				return 0, e
			}
			if _, err := out.Write(append(line, '\n')); err != nil {
				return 0, asError(fmt.Errorf("gateway: spooling batch %s: %w", id, err))
			}
		}
		if _, err := dec.Token(); err != nil {
			return 0, bad(err, "requests")
		}
	}
	if _, err := dec.Token(); err != nil {
		return 0, bad(err, "the body")
	}
	switch n {
	case -1:
		return 0, &contracts.Error{Code: contracts.CodeInvalidRequest, Field: "requests", Message: "requests is required"}
	case 0:
		return 0, &contracts.Error{Code: contracts.CodeInvalidRequest, Field: "requests", Message: "a batch needs at least one request"}
	}
	return n, nil
}

// anthropicBatchLine checks request i of a create body and returns its
// native batch line. A request is refused as the Messages API would refuse
// it, and also for a custom_id that is not 1-64 letters, digits, '-' and
// '_' or repeats one, and for stream: true (a batch answers whole
// messages). The error names the request by its index.
func (g *Gateway) anthropicBatchLine(r *http.Request, batchID string, i int, customID string, params json.RawMessage, seen map[string]int) ([]byte, *contracts.Error) {
	at := func(field string, e *contracts.Error) *contracts.Error {
		f := *e
		f.Field = fmt.Sprintf("requests[%d].%s", i, field)
		if e.Field != "" {
			f.Field += "." + e.Field
		}
		return &f
	}
	if len(customID) > maxCustomIDLen || contracts.ValidateJobID(customID) != nil {
		return nil, at("custom_id", contracts.NewError(contracts.CodeInvalidRequest,
			"custom_id %q: want 1-%d characters, each a letter, digit, '-' or '_'", customID, maxCustomIDLen))
	}
	if first, dup := seen[customID]; dup {
		return nil, at("custom_id", contracts.NewError(contracts.CodeInvalidRequest, "custom_id %q repeats requests[%d]'s", customID, first))
	}
	seen[customID] = i
	jobID := producer.BatchJobID(batchID, customID)
	if err := contracts.ValidateJobID(jobID); err != nil {
		return nil, at("custom_id", contracts.ErrorFrom(err))
	}
	if len(params) == 0 || string(params) == "null" {
		return nil, at("params", contracts.NewError(contracts.CodeInvalidRequest, "params is required"))
	}
	var mr messagesRequest
	if err := json.Unmarshal(params, &mr); err != nil {
		return nil, at("params", contracts.NewError(contracts.CodeInvalidRequest, "not a Messages API request: %v", err))
	}
	if mr.Stream {
		return nil, at("params", &contracts.Error{Code: contracts.CodeInvalidRequest, Field: "stream",
			Message: "stream: true is not supported in a batch, whose results are whole messages"})
	}
	req, e := mr.job()
	if e != nil {
		return nil, at("params", e)
	}
	if e := priority(r, req); e != nil {
		return nil, e
	}
	raw, err := json.Marshal(req)
	if err != nil {
		return nil, at("params", contracts.ErrorFrom(err))
	}
	// The run decodes the line's request so: a request it would refuse is
	// refused here, while nothing is stored.
	if _, err := contracts.DecodeJobRequest(raw, g.cfg.Limits); err != nil {
		return nil, at("params", contracts.ErrorFrom(err))
	}
	if _, _, err := contracts.ParseSystem(req.System); err != nil {
		return nil, at("params", contracts.ErrorFrom(err))
	}
	line, _ := json.Marshal(producer.BatchLine{CustomID: customID, Request: raw})
	if len(line) > maxAnthropicBatchLine {
		return nil, at("params", contracts.NewError(contracts.CodeRequestTooLarge, "the request is %d bytes, above the limit of %d", len(line), maxAnthropicBatchLine))
	}
	return line, nil
}

// messageBatchOf is batch st as Anthropic's MessageBatch. A batch whose
// run stopped with an error is in_progress: it is run again when read
// (tendMessageBatch).
func messageBatchOf(r *http.Request, st *BatchState) messageBatch {
	ext := anthropicExt(st)
	mb := messageBatch{ID: st.ID, Type: "message_batch", ProcessingStatus: st.Status, CreatedAt: st.CreatedAt, ExpiresAt: ext.ExpiresAt}
	if st.Error != "" {
		mb.ProcessingStatus = "in_progress"
	}
	n := st.Counts
	mb.RequestCounts = messageBatchCounts{Succeeded: n.Completed, Errored: n.Failed + n.Invalid}
	if ext.ExpiredAt.IsZero() {
		mb.RequestCounts.Canceled = n.Canceled
	} else {
		mb.RequestCounts.Expired = n.Canceled
	}
	if mb.ProcessingStatus == "ended" {
		ended, url := st.EndedAt, resultsURL(r, st.ID)
		mb.EndedAt, mb.ResultsURL = &ended, &url
	} else {
		mb.RequestCounts.Processing = max(0, ext.Requests-n.Done())
	}
	if !ext.CancelInitiatedAt.IsZero() {
		mb.CancelInitiatedAt = &ext.CancelInitiatedAt
	}
	return mb
}

// resultsURL is the absolute URL of batch id's results, on the host the
// caller reached (and its scheme, as a proxy in front reports it).
func resultsURL(r *http.Request, id string) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p == "http" || p == "https" {
		scheme = p
	}
	return scheme + "://" + r.Host + AnthropicBatches + "/" + id + "/results"
}

// messageBatchCall authenticates a call on /v1/messages/batches/{id} and
// reads the batch, tended (tendMessageBatch); on failure it has answered.
// Another tenant's batch, a native or an OpenAI batch, or a deleted one,
// is not found.
func (g *Gateway) messageBatchCall(w http.ResponseWriter, r *http.Request) (*producer.Client, *BatchState, bool) {
	c, e := g.client(r)
	if e != nil {
		anthropicError(w, e)
		return nil, nil, false
	}
	id := r.PathValue("id")
	var st *BatchState
	var err error
	if contracts.ValidateJobID(id) == nil {
		st, err = g.batchState(r.Context(), c.Tenant(), id)
	}
	if err != nil {
		anthropicError(w, asError(err))
		return nil, nil, false
	}
	if st == nil || st.API != "anthropic" {
		anthropicError(w, contracts.NewError(contracts.CodeNotFound, "no message batch %s", id))
		return nil, nil, false
	}
	return c, g.tendMessageBatch(r.Context(), c, st), true
}

// tendMessageBatch does what a batch is due when it is read, and returns
// its state: a run that stopped with an error (the store failed) is run
// again, and a batch past its expiry that has not expired yet is expired
// (in the background). The expiry timer (watchAnthropicExpiry) does the
// latter too; this catches a batch whose timer is on a gateway that
// stopped.
func (g *Gateway) tendMessageBatch(ctx context.Context, c *producer.Client, st *BatchState) *BatchState {
	if st.Status == "ended" && st.Error != "" {
		g.cfg.Logger.Warn("gateway: running a stopped message batch again", "tenant", st.Tenant, "batch", st.ID, "err", st.Error)
		again, err := g.updateState(ctx, st.Tenant, st.ID, func(s *BatchState) {
			if s.Status == "ended" && s.Error != "" {
				s.Status, s.Error, s.EndedAt = "in_progress", "", time.Time{}
				if !anthropicExt(s).CancelInitiatedAt.IsZero() {
					s.Status = "canceling"
				}
			}
		})
		if err != nil {
			return st
		}
		g.startBatch(c, st.ID)
		st = again
	}
	if ext := anthropicExt(st); st.Status == "in_progress" && ext.ExpiredAt.IsZero() && ext.due(time.Now()) {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			g.expireMessageBatch(c, st.ID)
		}()
	}
	return st
}

// watchAnthropicExpiry expires batch id at its expiry unless it has ended
// by then (or the gateway closes first).
func (g *Gateway) watchAnthropicExpiry(c *producer.Client, id string, at time.Time) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		t := time.NewTimer(time.Until(at))
		defer t.Stop()
		select {
		case <-g.ctx.Done():
			return
		case <-t.C:
		}
		g.expireMessageBatch(c, id)
	}()
}

// expireMessageBatch expires batch id unless it has ended or is being
// canceled: it records when, and cancels the batch's jobs, so that the
// run ends with the unfinished requests canceled, which the batch reports
// as expired. Canceling again is harmless, so a batch that expired on a
// gateway that stopped part-way is canceled whole again.
func (g *Gateway) expireMessageBatch(c *producer.Client, id string) {
	ctx := g.ctx
	st, err := g.batchState(ctx, c.Tenant(), id)
	if err != nil || st == nil || st.Status != "in_progress" || !anthropicExt(st).due(time.Now()) {
		return
	}
	if anthropicExt(st).ExpiredAt.IsZero() {
		st, err = g.updateState(ctx, c.Tenant(), id, func(s *BatchState) {
			if ext := anthropicExt(s); ext.ExpiredAt.IsZero() && s.Status == "in_progress" {
				ext.ExpiredAt = time.Now().UTC()
				ext.setExt(s)
			}
		})
		if err != nil || anthropicExt(st).ExpiredAt.IsZero() {
			return
		}
	}
	g.cfg.Logger.Info("gateway: a message batch expired", "tenant", c.Tenant(), "batch", id)
	if err := g.cancelBatchJobs(ctx, c, id); err != nil {
		g.cfg.Logger.Warn("gateway: canceling an expired message batch", "tenant", c.Tenant(), "batch", id, "err", err)
	}
}

// getMessageBatch: GET /v1/messages/batches/{id}.
func (g *Gateway) getMessageBatch(w http.ResponseWriter, r *http.Request) {
	if _, st, ok := g.messageBatchCall(w, r); ok {
		writeJSON(w, http.StatusOK, messageBatchOf(r, st))
	}
}

// cancelMessageBatch: POST /v1/messages/batches/{id}/cancel cancels the
// batch's jobs, as the native cancel does, and answers the batch,
// canceling; the run ends as its jobs do, the unfinished ones canceled. An
// ended batch is answered as it is.
func (g *Gateway) cancelMessageBatch(w http.ResponseWriter, r *http.Request) {
	c, st, ok := g.messageBatchCall(w, r)
	if !ok {
		return
	}
	if st.Status == "ended" {
		writeJSON(w, http.StatusOK, messageBatchOf(r, st))
		return
	}
	now := time.Now().UTC()
	// Not stopped half-way by a caller that goes away.
	ctx := context.WithoutCancel(r.Context())
	if err := g.cancelBatchJobs(ctx, c, st.ID); err != nil {
		anthropicError(w, asError(err))
		return
	}
	st, err := g.updateState(ctx, st.Tenant, st.ID, func(s *BatchState) {
		if s.Status == "ended" {
			return
		}
		s.Status = "canceling"
		if ext := anthropicExt(s); ext.CancelInitiatedAt.IsZero() {
			ext.CancelInitiatedAt = now
			ext.setExt(s)
		}
	})
	if err != nil {
		anthropicError(w, asError(err))
		return
	}
	writeJSON(w, http.StatusOK, messageBatchOf(r, st))
}

// deleteMessageBatch: DELETE /v1/messages/batches/{id} deletes an ended
// batch, its state and files; one still running is refused (400: cancel
// it first).
func (g *Gateway) deleteMessageBatch(w http.ResponseWriter, r *http.Request) {
	_, st, ok := g.messageBatchCall(w, r)
	if !ok {
		return
	}
	if st.Status != "ended" || st.Error != "" {
		anthropicError(w, contracts.NewError(contracts.CodeInvalidRequest,
			"message batch %s is %s; cancel it and wait until it has ended to delete it", st.ID, messageBatchOf(r, st).ProcessingStatus))
		return
	}
	ctx := r.Context()
	if err := g.batches.states.Delete(ctx, batchKey(st.Tenant, st.ID)); err != nil {
		anthropicError(w, asError(err))
		return
	}
	// The state is gone, so the batch is; its files would go with the
	// retention anyway.
	for _, kind := range []string{"input", "output"} {
		if err := g.batches.files.Delete(ctx, batchFile(st.Tenant, st.ID, kind)); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			g.cfg.Logger.Warn("gateway: deleting a message batch's file", "tenant", st.Tenant, "batch", st.ID, "file", kind, "err", err)
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": st.ID, "type": "message_batch_deleted"})
}

// listMessageBatches: GET /v1/messages/batches lists the tenant's message
// batches, newest first, limit (1-1000, default 20) at a time: after_id
// gives the page after that batch (older ones), before_id the page before
// it (newer ones). The cursor need not be a batch that still exists.
func (g *Gateway) listMessageBatches(w http.ResponseWriter, r *http.Request) {
	c, e := g.client(r)
	if e != nil {
		anthropicError(w, e)
		return
	}
	q := r.URL.Query()
	limit, e := listLimit(q.Get("limit"), 20, 1000)
	if e != nil {
		anthropicError(w, e)
		return
	}
	before, after := q.Get("before_id"), q.Get("after_id")
	if before != "" && after != "" {
		anthropicError(w, contracts.NewError(contracts.CodeInvalidRequest, "before_id and after_id: give one or the other"))
		return
	}
	ids, err := g.messageBatchIDs(r.Context(), c.Tenant())
	if err != nil {
		anthropicError(w, asError(err))
		return
	}
	// ids[lo:hi] are the candidates, newest first; the page is the first
	// limit of them that are message batches (a candidate may be deleted,
	// or a native batch so named), taken from the cursor's side. One more
	// says whether there are more.
	lo, hi := 0, len(ids)
	switch {
	case before != "":
		hi, _ = slices.BinarySearchFunc(ids, before, func(id, target string) int { return strings.Compare(target, id) })
	case after != "":
		lo, _ = slices.BinarySearchFunc(ids, after, func(id, target string) int { return strings.Compare(target, id) })
		if lo < len(ids) && ids[lo] == after {
			lo++
		}
	}
	var page []*BatchState
	for k := 0; k < hi-lo && len(page) <= limit; k++ {
		i := lo + k
		if before != "" {
			i = hi - 1 - k // the ones nearest the cursor, the newer side
		}
		st, err := g.batchState(r.Context(), c.Tenant(), ids[i])
		if err != nil {
			anthropicError(w, asError(err))
			return
		}
		if st != nil && st.API == "anthropic" {
			page = append(page, st)
		}
	}
	hasMore := len(page) > limit
	page = page[:min(len(page), limit)]
	if before != "" {
		slices.Reverse(page)
	}
	data := make([]messageBatch, 0, len(page))
	for _, st := range page {
		data = append(data, messageBatchOf(r, g.tendMessageBatch(r.Context(), c, st)))
	}
	var first, last *string
	if len(data) > 0 {
		first, last = &data[0].ID, &data[len(data)-1].ID
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": data, "has_more": hasMore, "first_id": first, "last_id": last})
}

// messageBatchIDs returns the ids of tenant's batches that may be message
// batches (they have its ids' prefix), newest first (ids sort by
// creation: newMessageBatchID). They are read from the subjects of the
// states' stream, one consistent answer: the initial values of a KV watch
// (and so a key listing) were seen to miss a batch whose state was being
// updated meanwhile, as a running batch's often is. A deleted batch's id
// may be among them.
func (g *Gateway) messageBatchIDs(ctx context.Context, tenant string) ([]string, error) {
	js, err := jetstream.New(g.nc)
	if err != nil {
		return nil, err
	}
	s, err := js.Stream(ctx, "KV_"+BatchStates)
	if err != nil {
		return nil, err
	}
	prefix := "$KV." + BatchStates + "." + batchKey(tenant, "")
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(prefix+"*"))
	if err != nil {
		return nil, err
	}
	var ids []string
	for subj := range info.State.Subjects {
		if id := strings.TrimPrefix(subj, prefix); strings.HasPrefix(id, messageBatchIDPrefix) {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b string) int { return strings.Compare(b, a) })
	return ids, nil
}

// messageBatchResults: GET /v1/messages/batches/{id}/results once the
// batch has ended (400 before): JSONL, one result per request in input
// order, mapped from the native output: a completed job succeeded (its
// message, with the job id as the message id), a failed one or a line that
// never ran errored (with the Messages API's error), a canceled one
// canceled, or expired when the batch expired. The results are mapped
// whole before they are sent, with their Content-Length and Repr-Digest
// (serveFile); a batch file that cannot be read whole is an error answer.
func (g *Gateway) messageBatchResults(w http.ResponseWriter, r *http.Request) {
	_, st, ok := g.messageBatchCall(w, r)
	if !ok {
		return
	}
	if st.Status != "ended" || st.Error != "" {
		anthropicError(w, contracts.NewError(contracts.CodeInvalidRequest,
			"message batch %s is %s; its results can be read once it has ended", st.ID, messageBatchOf(r, st).ProcessingStatus))
		return
	}
	ctx := r.Context()
	models, err := g.batchModels(ctx, st.Tenant, st.ID)
	if err != nil {
		anthropicError(w, asError(err))
		return
	}
	// The native output spooled whole, and the results mapped from it to
	// a file before the answer begins: the answer has its length and
	// digest, and a failure here is an error answer, not a short one.
	out, err := g.spoolObject(ctx, batchFile(st.Tenant, st.ID, "output"))
	if err != nil {
		anthropicError(w, asError(err))
		return
	}
	defer out.Close()
	results, err := tempFile()
	if err != nil {
		anthropicError(w, asError(err))
		return
	}
	defer results.Close()
	expired := !anthropicExt(st).ExpiredAt.IsZero()
	sum := sha256.New()
	bw := bufio.NewWriter(io.MultiWriter(results, sum))
	dec, enc := json.NewDecoder(out), json.NewEncoder(bw)
	for {
		var rec producer.BatchRecord
		if err := dec.Decode(&rec); err == io.EOF {
			break
		} else if err != nil {
			anthropicError(w, asError(fmt.Errorf("gateway: reading message batch %s's output: %w", st.ID, err)))
			return
		}
		enc.Encode(map[string]any{"custom_id": rec.CustomID, "result": messageBatchResult(&rec, models[rec.CustomID], expired)})
	}
	if err := bw.Flush(); err != nil {
		anthropicError(w, asError(err))
		return
	}
	size, err := results.Seek(0, io.SeekCurrent)
	if err == nil {
		_, err = results.Seek(0, io.SeekStart)
	}
	if err != nil {
		anthropicError(w, asError(err))
		return
	}
	g.serveFile(w, r, results, size, sum.Sum(nil), "application/x-jsonl")
}

// messageBatchResult is the result of one request from its native record.
func messageBatchResult(rec *producer.BatchRecord, model string, expired bool) map[string]any {
	errored := func(e *contracts.Error) map[string]any {
		return map[string]any{"type": "errored", "error": map[string]any{"type": "error",
			"error": map[string]any{"type": errorType(e, "api_error"), "message": e.Error(), "code": e.Code}}}
	}
	res := answered(rec.Result)
	switch {
	case rec.Error != nil:
		return errored(rec.Error)
	case res == nil:
		return errored(contracts.NewError(contracts.CodeInternal, "request %s has no result", rec.CustomID))
	case res.Status == contracts.StatusCompleted:
		return map[string]any{"type": "succeeded", "message": anthropicMessage(rec.JobID, model, res)}
	case res.Status == contracts.StatusCanceled && expired:
		return map[string]any{"type": "expired"}
	case res.Status == contracts.StatusCanceled:
		return map[string]any{"type": "canceled"}
	case res.Error != nil:
		return errored(res.Error)
	default:
		return errored(contracts.NewError(contracts.CodeInternal, "job %s ended %s", rec.JobID, res.Status))
	}
}

// batchModels maps the custom_id of each line of batch id's input to its
// request's model.
func (g *Gateway) batchModels(ctx context.Context, tenant, id string) (map[string]string, error) {
	// Spooled whole: a read that fails part-way is an error, never a
	// shorter map (json.Decoder.More reads a failed read as the end).
	in, err := g.spoolInput(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	models := map[string]string{}
	dec := json.NewDecoder(in)
	for {
		var line struct {
			CustomID string `json:"custom_id"`
			Request  struct {
				Model string `json:"model"`
			} `json:"request"`
		}
		if err := dec.Decode(&line); err == io.EOF {
			return models, nil
		} else if err != nil {
			return nil, fmt.Errorf("gateway: reading batch %s's input: %w", id, err)
		}
		models[line.CustomID] = line.Request.Model
	}
}
