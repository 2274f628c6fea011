package gateway

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/producer"
)

// OpenAI's Batches API on the native batches: a batch's input file (an
// uploaded file of OpenAI request lines) is read once, at create, into a
// native input (one line per request whose body maps to a job, named by
// its line number: OpenAI's custom_ids need not be valid job ids) and a
// side file, batchFile(tenant, id, "openai"), with one openAIBatchLine per
// request line in input order. The batch then runs, is resumed and is
// billed as any native batch; its state has API "openai" and an
// openAIBatchExt. When the run ends the native output and the side file
// make the OpenAI output and error files (finishOpenAIBatch), once: the
// batch is "finalizing" until they are written, "completed" (or cancelled,
// expired) after.

// apiOpenAI is BatchState.API of the batches made by OpenAI's API.
const apiOpenAI = "openai"

// openAIBatchEndpoints are the endpoints a batch's requests may call. A
// batch is made for one of them (its endpoint), and its lines may call
// either: chat completions and embeddings mix in one file, which OpenAI's
// own batches refuse.
var openAIBatchEndpoints = []string{"/v1/chat/completions", embeddingsEndpoint}

// maxOpenAIBatchErrors bounds the validation errors a failed batch keeps.
const maxOpenAIBatchErrors = 100

// maxOpenAIBatchLine bounds one line of a batch's input file: a longer
// line's request is refused (request_too_large) and the others run.
const maxOpenAIBatchLine = 16 << 20

// openAIBatchExt is an OpenAI batch's own part of its state (BatchState.Ext).
type openAIBatchExt struct {
	Endpoint         string            `json:"endpoint"`
	InputFileID      string            `json:"input_file_id"`
	CompletionWindow string            `json:"completion_window"`
	Metadata         map[string]string `json:"metadata,omitempty"`
	ExpiresAt        int64             `json:"expires_at"`
	// Lines counts the input's requests; Refused those whose body did not
	// map to a job (they never run and go to the error file).
	Lines   int `json:"lines"`
	Refused int `json:"refused,omitempty"`
	// Errors are why the input file failed validation (the batch never
	// ran).
	Errors []openAIBatchError `json:"errors,omitempty"`
	// CancellingAt is when a cancel was asked; ExpiredAt when the
	// completion window passed with the batch unfinished (its lines were
	// canceled then).
	CancellingAt int64 `json:"cancelling_at,omitempty"`
	ExpiredAt    int64 `json:"expired_at,omitempty"`
	// Once the output is written (FinishedAt): the files and the final
	// counts.
	FinishedAt   int64  `json:"finished_at,omitempty"`
	OutputFileID string `json:"output_file_id,omitempty"`
	ErrorFileID  string `json:"error_file_id,omitempty"`
	Completed    int    `json:"completed,omitempty"`
	Failed       int    `json:"failed,omitempty"`
}

// openAIBatchError is one entry of a batch's errors.
type openAIBatchError struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
	Line    *int    `json:"line"`
}

// openAIBatchLine is one request line of an OpenAI batch, in the side
// file: the caller's custom_id, the model asked for, and, for a request
// that did not map to a job, why. An embeddings request has its url, its
// number of inputs and whether it asked for base64 vectors; a chat
// completion has none (as the lines of side files written before
// embeddings).
type openAIBatchLine struct {
	CustomID string           `json:"custom_id"`
	Model    string           `json:"model,omitempty"`
	URL      string           `json:"url,omitempty"`
	Inputs   int              `json:"inputs,omitempty"`
	Base64   bool             `json:"base64,omitempty"`
	Error    *contracts.Error `json:"error,omitempty"`
}

// openAIBatch is a batch as OpenAI's API reports it.
type openAIBatch struct {
	ID               string            `json:"id"`
	Object           string            `json:"object"`
	Endpoint         string            `json:"endpoint"`
	Errors           any               `json:"errors"`
	InputFileID      string            `json:"input_file_id"`
	CompletionWindow string            `json:"completion_window"`
	Status           string            `json:"status"`
	OutputFileID     *string           `json:"output_file_id"`
	ErrorFileID      *string           `json:"error_file_id"`
	CreatedAt        int64             `json:"created_at"`
	InProgressAt     *int64            `json:"in_progress_at"`
	ExpiresAt        *int64            `json:"expires_at"`
	FinalizingAt     *int64            `json:"finalizing_at"`
	CompletedAt      *int64            `json:"completed_at"`
	FailedAt         *int64            `json:"failed_at"`
	ExpiredAt        *int64            `json:"expired_at"`
	CancellingAt     *int64            `json:"cancelling_at"`
	CancelledAt      *int64            `json:"cancelled_at"`
	RequestCounts    openAIBatchCounts `json:"request_counts"`
	Metadata         map[string]string `json:"metadata"`

	created time.Time // orders a listing
}

// openAIBatchCounts are a batch's request_counts.
type openAIBatchCounts struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
}

// openAIBatchRoutes registers the Files and Batches APIs on mux, with
// POST /v1/batches?id=B still going to the native create, and starts the
// expiry of OpenAI batches past their completion window.
func (g *Gateway) openAIBatchRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/files", g.uploadFile)
	mux.HandleFunc("GET /v1/files", g.listFiles)
	mux.HandleFunc("GET /v1/files/{id}", g.getFile)
	mux.HandleFunc("GET /v1/files/{id}/content", g.fileContent)
	mux.HandleFunc("DELETE /v1/files/{id}", g.deleteFile)
	mux.HandleFunc("POST /v1/batches", g.postBatches)
	mux.HandleFunc("GET /v1/batches", g.listOpenAIBatches)
	mux.HandleFunc("GET /v1/batches/{id}", g.getOpenAIBatch)
	mux.HandleFunc("POST /v1/batches/{id}/cancel", g.cancelOpenAIBatch)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.expireOpenAIBatches()
	}()
}

// postBatches: POST /v1/batches creates a native batch when it has ?id=
// (the native API's old path), else an OpenAI batch.
func (g *Gateway) postBatches(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Has("id") {
		g.createBatch(w, r)
		return
	}
	g.createOpenAIBatch(w, r)
}

// extOf reads an OpenAI batch's ext.
func extOf(st *BatchState) openAIBatchExt {
	var x openAIBatchExt
	json.Unmarshal(st.Ext, &x)
	return x
}

// updateExt changes an OpenAI batch's state and ext with fn, as
// updateState does.
func (g *Gateway) updateExt(ctx context.Context, tenant, id string, fn func(*BatchState, *openAIBatchExt)) (*BatchState, error) {
	return g.updateState(ctx, tenant, id, func(st *BatchState) {
		x := extOf(st)
		fn(st, &x)
		st.Ext, _ = json.Marshal(&x)
	})
}

// createOpenAIBatch: POST /v1/batches with {input_file_id, endpoint,
// completion_window, metadata}. The input is validated at once: a file
// that does not parse makes a batch that failed (with its errors), as
// OpenAI's does, not an HTTP error.
func (g *Gateway) createOpenAIBatch(w http.ResponseWriter, r *http.Request) {
	c, e := g.client(r)
	if e != nil {
		openAIError(w, e)
		return
	}
	raw, e := g.body(w, r)
	if e != nil {
		openAIError(w, e)
		return
	}
	var in struct {
		InputFileID      string            `json:"input_file_id"`
		Endpoint         string            `json:"endpoint"`
		CompletionWindow string            `json:"completion_window"`
		Metadata         map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		openAIError(w, contracts.NewError(contracts.CodeMalformedJSON, "%v", err))
		return
	}
	switch {
	case in.InputFileID == "":
		e = contracts.NewError(contracts.CodeInvalidRequest, "input_file_id is missing")
	case !slices.Contains(openAIBatchEndpoints, in.Endpoint):
		e = contracts.NewError(contracts.CodeInvalidRequest, "endpoint %q is not supported: a batch's requests can call %s", in.Endpoint, strings.Join(openAIBatchEndpoints, " and "))
	case in.CompletionWindow != "24h":
		e = contracts.NewError(contracts.CodeInvalidRequest, "completion_window %q: want \"24h\"", in.CompletionWindow)
	case len(in.Metadata) > 16:
		e = contracts.NewError(contracts.CodeInvalidRequest, "metadata has %d keys; at most 16", len(in.Metadata))
	}
	for k, v := range in.Metadata {
		if e == nil && (len(k) > 64 || len(v) > 512) {
			e = contracts.NewError(contracts.CodeInvalidRequest, "metadata %q: keys are at most 64 characters, values at most 512", k)
		}
	}
	if e != nil {
		openAIError(w, e)
		return
	}
	ctx := r.Context()
	tenant := c.Tenant()
	f, e := g.fileInfo(ctx, tenant, in.InputFileID)
	if e != nil {
		openAIError(w, e)
		return
	}
	if f.Purpose != purposeBatch {
		openAIError(w, contracts.NewError(contracts.CodeInvalidRequest, "file %s has purpose %q; a batch's input is a file uploaded with purpose %q", f.ID, f.Purpose, purposeBatch))
		return
	}
	id := newOpenAIID("batch_")
	now := time.Now().UTC()
	x := openAIBatchExt{Endpoint: in.Endpoint, InputFileID: f.ID, CompletionWindow: in.CompletionWindow, Metadata: in.Metadata,
		ExpiresAt: now.Add(g.cfg.OpenAIBatchWindow).Unix()}
	st := &BatchState{ID: id, Tenant: tenant, Status: "in_progress", CreatedAt: now, UpdatedAt: now, API: apiOpenAI}
	if err := g.prepareOpenAIBatch(ctx, tenant, id, &x); err != nil {
		openAIError(w, asError(err))
		return
	}
	if len(x.Errors) > 0 {
		st.Status, st.EndedAt = "ended", now
	}
	st.Ext, _ = json.Marshal(&x)
	b, _ := json.Marshal(st)
	if _, err := g.batches.states.Create(ctx, batchKey(tenant, id), b); err != nil {
		openAIError(w, asError(err))
		return
	}
	if st.Status == "in_progress" {
		g.startBatch(c, id)
	}
	writeJSON(w, http.StatusOK, g.openAIBatchOf(st))
}

// prepareOpenAIBatch reads input file x.InputFileID and, when every line
// parses, stores the batch's native input and side file, counting the
// lines in x; else it fills x.Errors and stores nothing.
func (g *Gateway) prepareOpenAIBatch(ctx context.Context, tenant, id string, x *openAIBatchExt) error {
	// Spooled whole first: the store's reader is not read at the pace of
	// the conversion, and a read cut short is an error, never a shorter
	// batch.
	obj, err := g.spoolObject(ctx, openAIFileName(tenant, x.InputFileID))
	if err != nil {
		return err
	}
	defer obj.Close()
	native, err := tempFile()
	if err != nil {
		return err
	}
	defer native.Close()
	side, err := tempFile()
	if err != nil {
		return err
	}
	defer side.Close()
	nw, sw := bufio.NewWriter(native), bufio.NewWriter(side)
	nenc, senc := json.NewEncoder(nw), json.NewEncoder(sw)
	fail := func(line int, code, format string, args ...any) {
		if len(x.Errors) < maxOpenAIBatchErrors {
			x.Errors = append(x.Errors, openAIBatchError{Code: code, Message: fmt.Sprintf(format, args...), Line: &line})
		}
	}
	seen := map[string]int{}
	// Every line of any length: one longer than maxOpenAIBatchLine is not
	// read (nor held), and its request is refused as too large, the batch
	// going on; its custom_id is not known.
	// record writes line n's side record (its error, when refused), once
	// the file has shown no fault.
	record := func(bl openAIBatchLine) {
		if len(x.Errors) > 0 {
			return // only checking now
		}
		x.Lines++
		if bl.Error != nil {
			x.Refused++
		}
		senc.Encode(&bl)
	}
	err = producer.ReadLines(obj, maxOpenAIBatchLine, func(n int, raw []byte, tooLong int64) error {
		if tooLong > 0 {
			record(openAIBatchLine{Error: contracts.NewError(contracts.CodeRequestTooLarge,
				"line %d is %d bytes, above the limit of %d for a batch line", n, tooLong, maxOpenAIBatchLine)})
			return nil
		}
		var l struct {
			CustomID *string         `json:"custom_id"`
			Method   string          `json:"method"`
			URL      string          `json:"url"`
			Body     json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(raw, &l); err != nil {
			fail(n, "invalid_json_line", "line %d is not a JSON object {\"custom_id\", \"method\", \"url\", \"body\"}: %v", n, err)
			return nil
		}
		switch {
		case l.CustomID == nil || *l.CustomID == "":
			fail(n, "missing_custom_id", "line %d has no custom_id", n)
			return nil
		case seen[*l.CustomID] != 0:
			fail(n, "duplicate_custom_id", "line %d: custom_id %q repeats line %d", n, *l.CustomID, seen[*l.CustomID])
			return nil
		case l.Method != http.MethodPost:
			fail(n, "invalid_method", "line %d: method %q; requests are POST", n, l.Method)
			return nil
		case !slices.Contains(openAIBatchEndpoints, l.URL):
			fail(n, "mismatched_url", "line %d: url %q is not an endpoint a batch's requests can call (%s)", n, l.URL, strings.Join(openAIBatchEndpoints, ", "))
			return nil
		case len(l.Body) == 0 || l.Body[0] != '{':
			fail(n, "missing_body", "line %d: body is missing or not a JSON object", n)
			return nil
		}
		seen[*l.CustomID] = n
		if len(x.Errors) > 0 {
			return nil // only checking now
		}
		bl := openAIBatchLine{CustomID: *l.CustomID}
		if req, e := openAIBatchRequest(l.URL, l.Body, &bl); e != nil {
			bl.Error = e
		} else {
			nenc.Encode(producer.BatchLine{CustomID: strconv.Itoa(n), Request: mustJSON(req)})
		}
		record(bl)
		return nil
	})
	if err != nil {
		return err
	}
	if len(x.Errors) == 0 && x.Lines == 0 {
		fail(1, "empty_file", "the input file has no requests")
	}
	if len(x.Errors) > 0 {
		x.Lines, x.Refused = 0, 0
		return nil
	}
	for _, p := range []struct {
		w    *bufio.Writer
		f    *os.File
		kind string
	}{{nw, native, "input"}, {sw, side, "openai"}} {
		if err := p.w.Flush(); err != nil {
			return err
		}
		if _, err := p.f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		if _, err := g.batches.files.Put(ctx, jetstream.ObjectMeta{Name: batchFile(tenant, id, p.kind)}, p.f); err != nil {
			return err
		}
	}
	return nil
}

// openAIBatchRequest maps the body of a batch line calling url to a job,
// noting in bl what its output line needs (the model, the url, an
// embeddings request's inputs and encoding).
func openAIBatchRequest(url string, body json.RawMessage, bl *openAIBatchLine) (*contracts.JobRequest, *contracts.Error) {
	var req *contracts.JobRequest
	var e *contracts.Error
	if url == embeddingsEndpoint {
		var er embeddingsRequest
		if err := json.Unmarshal(body, &er); err != nil {
			return nil, contracts.NewError(contracts.CodeMalformedJSON, "body: %v", err)
		}
		bl.Model, bl.URL, bl.Base64 = er.Model, url, er.base64()
		if req, e = er.job(); e != nil {
			return nil, e
		}
		bl.Inputs = len(req.Embedding.Input)
	} else {
		var cr chatRequest
		if err := json.Unmarshal(body, &cr); err != nil {
			return nil, contracts.NewError(contracts.CodeMalformedJSON, "body: %v", err)
		}
		bl.Model = cr.Model
		if req, e = cr.job(); e != nil {
			return nil, e
		}
		req.Stream = false // nobody follows a batch line's events
	}
	if e := producer.CheckBatchRequest(req); e != nil {
		return nil, e
	}
	return req, nil
}

// mustJSON marshals v, which cannot fail.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// openAIBatchOf reports a batch's state as OpenAI's API does.
func (g *Gateway) openAIBatchOf(st *BatchState) openAIBatch {
	x := extOf(st)
	at := func(unix int64) *int64 {
		if unix == 0 {
			return nil
		}
		return &unix
	}
	created := st.CreatedAt.Unix()
	b := openAIBatch{ID: st.ID, Object: "batch", Endpoint: x.Endpoint, InputFileID: x.InputFileID, CompletionWindow: x.CompletionWindow,
		CreatedAt: created, ExpiresAt: at(x.ExpiresAt), CancellingAt: at(x.CancellingAt), Metadata: x.Metadata, created: st.CreatedAt,
		RequestCounts: openAIBatchCounts{Total: x.Lines, Completed: st.Counts.Completed,
			Failed: st.Counts.Failed + st.Counts.Canceled + st.Counts.Invalid + x.Refused}}
	errs := x.Errors
	switch {
	case len(x.Errors) > 0:
		b.Status, b.FailedAt = "failed", at(created)
	case st.Status == "ended" && st.Error != "":
		// The run stopped on an error of its own (storage): see
		// POST /v1/zl/batches/{id}/resume.
		b.Status, b.InProgressAt, b.FailedAt = "failed", at(created), at(st.EndedAt.Unix())
		errs = []openAIBatchError{{Code: string(contracts.CodeInternal), Message: st.Error}}
	case st.Status == "ended" && x.FinishedAt == 0:
		b.Status, b.InProgressAt, b.FinalizingAt = "finalizing", at(created), at(st.EndedAt.Unix())
	case st.Status == "ended":
		b.InProgressAt, b.FinalizingAt = at(created), at(st.EndedAt.Unix())
		b.RequestCounts = openAIBatchCounts{Total: x.Lines, Completed: x.Completed, Failed: x.Failed}
		if x.OutputFileID != "" {
			b.OutputFileID = &x.OutputFileID
		}
		if x.ErrorFileID != "" {
			b.ErrorFileID = &x.ErrorFileID
		}
		switch {
		case x.ExpiredAt != 0:
			b.Status, b.ExpiredAt = "expired", at(x.ExpiredAt)
		case x.CancellingAt != 0:
			b.Status, b.CancelledAt = "cancelled", at(x.FinishedAt)
		default:
			b.Status, b.CompletedAt = "completed", at(x.FinishedAt)
		}
	case x.CancellingAt != 0 && x.ExpiredAt == 0:
		b.Status, b.InProgressAt = "cancelling", at(created)
	default:
		// Running, or canceling its lines as the window passed: it
		// reads expired once they ended.
		b.Status, b.InProgressAt = "in_progress", at(created)
	}
	if len(errs) > 0 {
		b.Errors = map[string]any{"object": "list", "data": errs}
	}
	return b
}

// openAIBatchState reads tenant's OpenAI batch id, writing its output
// first when its run ended without (a gateway stopped in between); nil
// when there is no such batch.
func (g *Gateway) openAIBatchState(ctx context.Context, tenant, id string) (*BatchState, error) {
	if !validOpenAIID(id, "batch_") {
		return nil, nil
	}
	st, err := g.batchState(ctx, tenant, id)
	if err != nil || st == nil || st.API != apiOpenAI {
		return nil, err
	}
	if x := extOf(st); st.Status == "ended" && st.Error == "" && len(x.Errors) == 0 && x.FinishedAt == 0 && !g.runs(tenant, id) {
		return g.finishOpenAIBatch(ctx, st)
	}
	return st, nil
}

// runs reports whether this gateway runs tenant's batch id.
func (g *Gateway) runs(tenant, id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.running[batchKey(tenant, id)]
}

// openAIBatchCall authenticates a call on /v1/batches/{id} and reads the
// batch; on failure (another tenant's or a native batch: 404) it has
// answered.
func (g *Gateway) openAIBatchCall(w http.ResponseWriter, r *http.Request) (*producer.Client, *BatchState, bool) {
	c, e := g.client(r)
	if e != nil {
		openAIError(w, e)
		return nil, nil, false
	}
	id := r.PathValue("id")
	st, err := g.openAIBatchState(r.Context(), c.Tenant(), id)
	if err != nil {
		openAIError(w, asError(err))
		return nil, nil, false
	}
	if st == nil {
		openAIError(w, contracts.NewError(contracts.CodeNotFound, "no batch %q", id))
		return nil, nil, false
	}
	return c, st, true
}

// getOpenAIBatch: GET /v1/batches/{id}.
func (g *Gateway) getOpenAIBatch(w http.ResponseWriter, r *http.Request) {
	if _, st, ok := g.openAIBatchCall(w, r); ok {
		writeJSON(w, http.StatusOK, g.openAIBatchOf(st))
	}
}

// listOpenAIBatches: GET /v1/batches with limit (1 to 100, default 20)
// and after (a batch id), newest first. Native batches are not listed.
func (g *Gateway) listOpenAIBatches(w http.ResponseWriter, r *http.Request) {
	tenant, e := g.authenticate(r)
	if e != nil {
		openAIError(w, e)
		return
	}
	limit, e := listLimit(r.URL.Query().Get("limit"), 20, 100)
	if e != nil {
		openAIError(w, e)
		return
	}
	ctx := r.Context()
	keys, err := g.batches.states.ListKeysFiltered(ctx, batchKey(tenant, "*"))
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		openAIError(w, asError(err))
		return
	}
	var out []openAIBatch
	if keys != nil {
		for key := range keys.Keys() {
			st, err := g.openAIBatchState(ctx, tenant, strings.TrimPrefix(key, batchKey(tenant, "")))
			if err != nil {
				openAIError(w, asError(err))
				return
			}
			if st != nil {
				out = append(out, g.openAIBatchOf(st))
			}
		}
	}
	slices.SortFunc(out, func(a, b openAIBatch) int {
		return cmp.Or(b.created.Compare(a.created), strings.Compare(b.ID, a.ID))
	})
	writeJSON(w, http.StatusOK, listPage(out, r.URL.Query().Get("after"), limit, func(b openAIBatch) string { return b.ID }))
}

// cancelOpenAIBatch: POST /v1/batches/{id}/cancel: the batch is
// cancelling until its run ends, with its unfinished lines canceled
// (billed for what ran), then cancelled, with the output and error files
// of what it did. A batch that ended is answered as it is.
func (g *Gateway) cancelOpenAIBatch(w http.ResponseWriter, r *http.Request) {
	c, st, ok := g.openAIBatchCall(w, r)
	if !ok {
		return
	}
	if st.Status == "ended" {
		writeJSON(w, http.StatusOK, g.openAIBatchOf(st))
		return
	}
	// The state first: the run's end then knows its lines were canceled.
	st, err := g.updateExt(r.Context(), st.Tenant, st.ID, func(st *BatchState, x *openAIBatchExt) {
		if st.Status != "ended" && x.CancellingAt == 0 {
			st.Status, x.CancellingAt = "canceling", time.Now().Unix()
		}
	})
	if err != nil {
		openAIError(w, asError(err))
		return
	}
	if st.Status != "ended" {
		if err := g.cancelBatchJobs(r.Context(), c, st.ID); err != nil {
			openAIError(w, asError(err))
			return
		}
	}
	writeJSON(w, http.StatusOK, g.openAIBatchOf(st))
}

// expireOpenAIBatches looks, until the gateway closes, at the OpenAI
// batches this gateway runs: one whose completion window has passed has
// its lines canceled and ends expired; one canceling (a cancel, or an
// expiry) has its lines canceled once more by this gateway, should the
// gateway that took the cancel have stopped before it canceled them all.
// It looks a tenth of the window apart (at least every minute).
func (g *Gateway) expireOpenAIBatches() {
	every := min(max(g.cfg.OpenAIBatchWindow/10, 50*time.Millisecond), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	canceled := map[string]bool{} // the running batches whose lines this gateway canceled
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-t.C:
		}
		g.mu.Lock()
		running := maps.Clone(g.running)
		g.mu.Unlock()
		maps.DeleteFunc(canceled, func(k string, _ bool) bool { return !running[k] })
		for k := range running {
			tenant, id, _ := strings.Cut(k, ".")
			done, err := g.expireOpenAIBatch(tenant, id, canceled[k])
			if err != nil && g.ctx.Err() == nil {
				g.cfg.Logger.Warn("gateway: expiring a batch", "tenant", tenant, "batch", id, "err", err)
			}
			canceled[k] = canceled[k] || done
		}
	}
}

// expireOpenAIBatch marks tenant's batch id expired when it is an OpenAI
// batch past its window, and cancels its lines if it is canceling and
// they were not canceled here yet (canceled). It reports whether they
// are canceled now.
func (g *Gateway) expireOpenAIBatch(tenant, id string, canceled bool) (bool, error) {
	ctx, cancel := context.WithTimeout(g.ctx, 30*time.Second)
	defer cancel()
	st, err := g.batchState(ctx, tenant, id)
	if err != nil || st == nil || st.API != apiOpenAI || st.Status == "ended" {
		return false, err
	}
	if x := extOf(st); x.ExpiredAt == 0 && time.Now().Unix() >= x.ExpiresAt {
		st, err = g.updateExt(ctx, tenant, id, func(st *BatchState, x *openAIBatchExt) {
			if st.Status != "ended" && x.ExpiredAt == 0 {
				st.Status, x.ExpiredAt = "canceling", time.Now().Unix()
				canceled = false
			}
		})
		if err != nil {
			return false, err
		}
		if st.Status == "canceling" {
			g.cfg.Logger.Info("gateway: a batch's completion window passed: canceling its unfinished lines", "tenant", tenant, "batch", id)
		}
	}
	if st.Status != "canceling" || canceled {
		return canceled, nil
	}
	c, e := g.clientFor(tenant)
	if e != nil {
		return false, e
	}
	if err := g.cancelBatchJobs(ctx, c, st.ID); err != nil {
		return false, err
	}
	return true, nil
}

// openAIBatchEnded writes the output of an OpenAI batch whose run just
// ended (st: its state then). Should it fail, the next read of the batch
// writes it.
func (g *Gateway) openAIBatchEnded(st *BatchState) {
	if st.API != apiOpenAI || st.Error != "" {
		return
	}
	if _, err := g.finishOpenAIBatch(g.ctx, st); err != nil {
		g.cfg.Logger.Warn("gateway: writing a batch's output files", "tenant", st.Tenant, "batch", st.ID, "err", err)
	}
}

// finishOpenAIBatch writes the output and error files of an OpenAI batch
// whose run ended, from its native output and side file, and records them
// in its state, which it returns. The file ids follow from the batch id,
// so two gateways doing it at once write the same files.
func (g *Gateway) finishOpenAIBatch(ctx context.Context, st *BatchState) (*BatchState, error) {
	x := extOf(st)
	// Both spooled whole first (copyObject): read side by side from the
	// store, each reader went at the other's pace, and a reader gives up
	// on an object it has not read by its deadline (5 s without one).
	side, err := g.spoolObject(ctx, batchFile(st.Tenant, st.ID, "openai"))
	if err != nil {
		return nil, err
	}
	defer side.Close()
	native, err := g.spoolObject(ctx, batchFile(st.Tenant, st.ID, "output"))
	if err != nil {
		return nil, err
	}
	defer native.Close()
	outF, err := tempFile()
	if err != nil {
		return nil, err
	}
	defer outF.Close()
	errF, err := tempFile()
	if err != nil {
		return nil, err
	}
	defer errF.Close()
	ow, ew := bufio.NewWriter(outF), bufio.NewWriter(errF)
	oenc, eenc := json.NewEncoder(ow), json.NewEncoder(ew)
	completed, failed := 0, 0
	sides := json.NewDecoder(side)
	recs := json.NewDecoder(native)
	for n := 1; ; n++ {
		var bl openAIBatchLine
		if err := sides.Decode(&bl); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("gateway: batch %s: reading its requests: %w", st.ID, err)
		}
		line := map[string]any{"id": fmt.Sprintf("batch_req_%s_%d", strings.TrimPrefix(st.ID, "batch_"), n), "custom_id": bl.CustomID,
			"response": nil, "error": nil}
		if bl.Error != nil {
			line["response"] = openAIErrorResponse("", bl.openAIError(bl.Error))
			failed++
			eenc.Encode(line)
			continue
		}
		var rec producer.BatchRecord
		if err := recs.Decode(&rec); err != nil {
			return nil, fmt.Errorf("gateway: batch %s: reading its output: %w", st.ID, err)
		}
		res := answered(rec.Result)
		var body any
		var bodyErr *contracts.Error
		if res != nil && res.Status == contracts.StatusCompleted {
			if bl.URL == embeddingsEndpoint {
				body, bodyErr = embeddingsResponse(bl.Model, res, bl.Inputs, bl.Base64)
			} else {
				body = chatCompletion(rec.JobID, bl.Model, res.FinishedAt.Unix(), res, nil)
			}
		}
		switch {
		case bodyErr != nil:
			line["response"] = openAIErrorResponse(rec.JobID, bodyErr)
		case body != nil:
			line["response"] = map[string]any{"status_code": http.StatusOK, "request_id": rec.JobID, "body": body}
			completed++
			oenc.Encode(line)
			continue
		case res != nil && res.Status == contracts.StatusCanceled && x.ExpiredAt != 0:
			line["error"] = map[string]string{"code": "batch_expired", "message": "the request did not finish within the batch's completion window"}
		case res != nil && res.Status == contracts.StatusCanceled && x.CancellingAt != 0:
			line["error"] = map[string]string{"code": "batch_cancelled", "message": "the batch was cancelled before the request finished"}
		case res != nil:
			e := res.Error
			if e == nil {
				e = contracts.NewError(contracts.CodeInternal, "job %s ended %s", rec.JobID, res.Status)
			}
			line["response"] = openAIErrorResponse(rec.JobID, bl.openAIError(e))
		default:
			e := rec.Error
			if e == nil {
				e = contracts.NewError(contracts.CodeInternal, "no result")
			}
			line["response"] = openAIErrorResponse(rec.JobID, bl.openAIError(e))
		}
		failed++
		eenc.Encode(line)
	}
	outID := "file-" + strings.TrimPrefix(st.ID, "batch_") + "-output"
	errID := ""
	if failed > 0 {
		errID = "file-" + strings.TrimPrefix(st.ID, "batch_") + "-errors"
	}
	for _, p := range []struct {
		w        *bufio.Writer
		f        *os.File
		id, name string
	}{{ow, outF, outID, st.ID + "_output.jsonl"}, {ew, errF, errID, st.ID + "_error.jsonl"}} {
		if p.id == "" {
			continue
		}
		if err := p.w.Flush(); err != nil {
			return nil, err
		}
		if _, err := p.f.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		if _, err := g.putFile(ctx, st.Tenant, p.id, p.name, purposeBatchOutput, p.f); err != nil {
			return nil, err
		}
	}
	return g.updateExt(ctx, st.Tenant, st.ID, func(st *BatchState, x *openAIBatchExt) {
		if x.FinishedAt == 0 {
			x.FinishedAt = time.Now().Unix()
		}
		x.OutputFileID, x.ErrorFileID, x.Completed, x.Failed = outID, errID, completed, failed
	})
}

// openAIError is e as the line's API names its fields (see openAIField).
func (bl *openAIBatchLine) openAIError(e *contracts.Error) *contracts.Error {
	if bl.URL == embeddingsEndpoint {
		return openAIField(e)
	}
	return e
}

// openAIErrorResponse is the response of an output line that failed: e's
// HTTP status and the chat completions API's error body for it.
func openAIErrorResponse(requestID string, e *contracts.Error) map[string]any {
	// The body is what openAIError answers, so that the two stay the same.
	rec := &answer{header: http.Header{}}
	openAIError(rec, e)
	return map[string]any{"status_code": rec.status, "request_id": requestID, "body": json.RawMessage(bytes.TrimSpace(rec.body.Bytes()))}
}

// answer is an http.ResponseWriter that keeps what is written to it.
type answer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (a *answer) Header() http.Header         { return a.header }
func (a *answer) WriteHeader(status int)      { a.status = status }
func (a *answer) Write(b []byte) (int, error) { return a.body.Write(b) }
