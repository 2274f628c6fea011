package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
)

// publishTimeout bounds the wait for the acks of a job's final messages.
const publishTimeout = 30 * time.Second

// handle runs one delivered job message to its end: ack, nak or term.
func (w *Worker) handle(msg jetstream.Msg) {
	start := time.Now()
	meta, err := msg.Metadata()
	if err != nil {
		w.log.Error("message without metadata", "subject", msg.Subject(), "err", err)
		msg.Term()
		return
	}
	attempt := int(meta.NumDelivered)
	h := msg.Headers()
	route, rerr := contracts.ParseJobSubject(msg.Subject())
	req, derr := contracts.DecodeJobRequest(msg.Data(), w.cfg.Limits)
	// The subject names the job (tenant and id); a job queued by an older
	// release names it in Nats-Msg-Id or its body.
	jobID := route.JobID
	if jobID == "" {
		jobID = h.Get(contracts.HeaderMsgID)
	}
	if jobID == "" && req != nil {
		jobID = req.ID
	}
	if jobID == "" || contracts.ValidateJobID(jobID) != nil {
		jobID = fmt.Sprintf("seq%d", meta.Sequence.Stream)
	}
	if derr == nil && route.JobID != "" && req.ID != "" && req.ID != route.JobID {
		derr = contracts.NewError(contracts.CodeInvalidRequest, "the request's id %q differs from the job id %q of its subject", req.ID, route.JobID)
	}
	tp, _ := contracts.TraceparentFromHeader(h)
	stream := req != nil && req.Stream
	ref := contracts.JobRef{Tenant: route.Tenant, JobID: jobID}
	em := &emitter{w: w, ref: ref, attempt: attempt, trace: tp, stream: stream}
	log := w.log.With("job", jobID, "tenant", route.Tenant, "attempt", attempt)
	if rerr != nil {
		// Without a valid subject there is no tenant to answer to.
		log.Error("job on a malformed subject", "subject", msg.Subject(), "err", rerr)
		msg.TermWithReason("malformed subject")
		return
	}
	if err := contracts.CheckContract(h); err != nil {
		w.reject(em, msg, route, nil, contracts.ErrorFrom(err), log)
		return
	}
	if derr != nil {
		w.reject(em, msg, route, nil, contracts.ErrorFrom(derr), log)
		return
	}
	if route.Model == "" && !w.serves(req.Model) {
		// Queued before the model was in the subject: pulled here,
		// but for a worker that serves its model.
		w.forward(msg, route, jobID, req.Model, log)
		return
	}
	// A job passed on to this worker's queue was first stored earlier.
	enqueued := meta.Timestamp
	if t, err := time.Parse(time.RFC3339Nano, h.Get(contracts.HeaderEnqueuedAt)); err == nil && t.Before(enqueued) {
		enqueued = t
	}
	if route.Direct == "" && route.Model != "" {
		if holder := w.holder(req); holder != "" && w.passOn(msg, route, jobID, holder, enqueued, log) {
			return
		}
	}
	job := &Job{ID: jobID, Tenant: route.Tenant, Priority: route.Priority, Bucket: route.Bucket, Attempt: attempt, Request: req, Trace: tp, EnqueuedAt: enqueued,
		Weight: w.cfg.weight(route.Tenant), MaxResultBytes: int(w.nc.MaxPayload())}
	usage := contracts.Usage{JobID: jobID, Tenant: route.Tenant, Model: req.Model, Priority: route.Priority, Bucket: route.Bucket,
		Attempt: attempt, TraceID: traceID(tp), WorkerID: w.cfg.ID, Device: w.exec.Device(), CreatedAt: enqueued.UTC(),
		BatchID: req.Metadata["batch_id"], CustomID: req.Metadata["custom_id"]}
	ctx, cancel := context.WithCancelCause(w.runCtx)
	defer cancel(nil)
	// Register before looking for a cancel marker: a cancel message that
	// arrives after the look-up then finds the job.
	w.mu.Lock()
	w.running[ref] = cancel
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.running, ref)
		w.mu.Unlock()
	}()
	// A job whose result is stored has finished: a first delivery is a
	// resubmission of a finished job, a redelivery an attempt whose ack
	// was lost (its worker died after publishing, or its heartbeats came
	// late and it finished first). Its result stands and nothing runs or
	// is billed again; a redelivery publishes the stored result's usage
	// record again first, in case the attempt that stored the result died
	// before its usage record (JetStream drops the copy of one that was
	// stored: same Nats-Msg-Id).
	stored, canceled := w.lookUp(ref)
	if stored != nil {
		if attempt > 1 && len(stored.Usage) > 0 { // (a job that ran has a usage record)
			em.publishJSON(contracts.UsageSubject(ref.Tenant), ref.String(), stored.Usage)
			if err := em.wait(); err != nil {
				log.Error("publishing a finished job's usage again; it will be redelivered", "err", err)
				msg.NakWithDelay(w.cfg.RetryDelay)
				return
			}
		}
		log.Info("job already finished; its stored result stands")
		msg.Ack()
		return
	}
	if canceled {
		log.Info("job canceled before it ran")
		em.finish(msg, job, &Outcome{}, usage, contracts.NewError(contracts.CodeCanceled, "canceled before it started"), log, false)
		return
	}
	if req.Deadline != nil {
		if !req.Deadline.After(start) {
			w.fail(em, msg, job, contracts.NewError(contracts.CodeDeadlineExceeded, "the deadline %s passed before the job started", req.Deadline.Format(time.RFC3339)), log)
			return
		}
		var stop context.CancelFunc
		ctx, stop = context.WithDeadline(ctx, *req.Deadline)
		defer stop()
	}
	if e := w.admitQuota(job); e != nil {
		w.fail(em, msg, job, e, log)
		return
	}
	defer w.releaseQuota(job)
	em.publish(&contracts.Event{Type: contracts.EventStarted})
	usage.QueueMs = ms(time.Since(enqueued))
	out, err := w.exec.Execute(ctx, job, em)
	// What is pending goes out now, before any end of this attempt (a
	// final or error event, or a Nak and a later attempt's events): a
	// delta flushed by its timer after those would be out of place.
	em.flush()
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errShutdown):
		log.Info("handing the job back: worker shutting down")
		msg.Nak()
	case err != nil:
		e := contracts.ErrorFrom(err)
		if e.Retryable() && attempt < w.cfg.Streams.MaxDeliver {
			log.Warn("retryable failure; the job will be redelivered", "err", err)
			msg.NakWithDelay(w.cfg.RetryDelay)
			return
		}
		w.fail(em, msg, job, e, log)
	default:
		jobErr := out.Err
		if out.Canceled {
			if errors.Is(cause, context.DeadlineExceeded) {
				jobErr = contracts.NewError(contracts.CodeDeadlineExceeded, "the deadline passed after %d tokens", len(out.TokenIDs))
			} else {
				jobErr = contracts.NewError(contracts.CodeCanceled, "canceled by the submitter after %d tokens", len(out.TokenIDs))
			}
		}
		em.finish(msg, job, out, usage, jobErr, log, true)
	}
}

// forward republishes a job of a model-less subject form for a model this
// worker does not serve on its subject of the current form
// (contracts.JobSubject), where the workers serving the model pull it, and
// acks the original once the stream has stored the copy (a copy stored
// already, by an attempt whose ack was lost, counts as stored). The copy
// keeps the body and the headers but JetStream's own (Nats-Msg-Id among
// them: the original's id would have the copy dropped as a duplicate). A
// publish that fails hands the job back for a later try.
func (w *Worker) forward(msg jetstream.Msg, route contracts.JobRoute, jobID, model string, log *slog.Logger) {
	m := republished(msg, contracts.JobSubject(route.Priority, route.Bucket, route.Tenant, model, jobID))
	ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
	defer cancel()
	if _, err := w.js.PublishMsg(ctx, m); err != nil && !contracts.IsDuplicateJob(err) {
		log.Warn("passing a job on to the workers of its model failed; it will be redelivered", "model", model, "err", err)
		msg.NakWithDelay(w.cfg.RetryDelay)
		return
	}
	if err := msg.DoubleAck(ctx); err != nil {
		// Redelivered: the next try finds the copy stored.
		log.Warn("acking a job passed on to the workers of its model", "model", model, "err", err)
	}
	w.cfg.Metrics.forwarded()
	log.Info("job of a model-less subject passed on to the workers of its model", "model", model, "subject", m.Subject)
}

// republished returns a copy of job message msg on subject: its body and
// headers, but JetStream's own (Nats-*).
func republished(msg jetstream.Msg, subject string) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = msg.Data()
	for k, v := range msg.Headers() {
		if !strings.HasPrefix(k, "Nats-") {
			m.Header[k] = v
		}
	}
	return m
}

// storedResult is what the worker reads of a stored result: the usage
// record, as it was published (absent for a job that never ran).
type storedResult struct {
	Usage json.RawMessage `json:"usage"`
}

// lookUp returns the job's stored result, if any, and whether a cancel
// request for it is stored; the two direct gets go out together, so a job
// waits one round trip for them, not two.
func (w *Worker) lookUp(ref contracts.JobRef) (result *storedResult, canceled bool) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if m := w.stored(contracts.StreamResults, contracts.ResultsSubject(ref.Tenant, ref.JobID)); m != nil {
			result = &storedResult{}
			if err := json.Unmarshal(m.Data, result); err != nil {
				w.log.Warn("a stored result is not JSON; it stands, without its usage", "job", ref.JobID, "tenant", ref.Tenant, "err", err)
				result.Usage = nil
			}
		}
	}()
	canceled = w.stored(contracts.StreamCancel, contracts.CancelSubject(ref.Tenant, ref.JobID)) != nil
	<-done
	return result, canceled
}

// stored returns the last message stream holds on subject, or nil; a
// failed look-up counts as none (the job runs).
func (w *Worker) stored(stream, subject string) *nats.Msg {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := contracts.LastMsg(ctx, w.nc, stream, subject)
	if err != nil {
		w.log.Warn("look-up failed", "stream", stream, "subject", subject, "err", err)
	}
	return m
}

// reject answers a job that cannot run (bad input): error event, failed
// result, DLQ record, Term.
func (w *Worker) reject(em *emitter, msg jetstream.Msg, route contracts.JobRoute, job *Job, e *contracts.Error, log interface{ Warn(string, ...any) }) {
	log.Warn("job rejected", "code", e.Code, "err", e.Message)
	w.terminal(em, msg, route, job, e)
}

// fail ends a job that ran into a permanent error.
func (w *Worker) fail(em *emitter, msg jetstream.Msg, job *Job, e *contracts.Error, log interface{ Warn(string, ...any) }) {
	log.Warn("job failed", "code", e.Code, "err", e.Message)
	w.terminal(em, msg, contracts.JobRoute{Priority: job.Priority, Bucket: job.Bucket, Tenant: job.Tenant}, job, e)
}

func (w *Worker) terminal(em *emitter, msg jetstream.Msg, route contracts.JobRoute, job *Job, e *contracts.Error) {
	em.publish(&contracts.Event{Type: contracts.EventError, Error: e})
	res := &contracts.Result{JobID: em.ref.JobID, Tenant: em.ref.Tenant, Status: contracts.StatusFailed, Error: e, Attempt: em.attempt, FinishedAt: time.Now().UTC()}
	if job != nil {
		res.Metadata = job.Request.Metadata
	}
	em.publishJSON(contracts.ResultsSubject(em.ref.Tenant, em.ref.JobID), em.ref.String(), res)
	meta, _ := msg.Metadata()
	deliveries := 0
	if meta != nil {
		deliveries = int(meta.NumDelivered)
	}
	d := &contracts.DLQRecord{JobID: em.ref.JobID, Tenant: route.Tenant, Priority: route.Priority, Bucket: route.Bucket,
		Code: e.Code, Message: e.Message, Deliveries: deliveries, Time: time.Now().UTC()}
	if meta != nil {
		d.StreamSequence = meta.Sequence.Stream
	}
	d.SetRequest(msg.Data())
	em.publishJSON(contracts.DLQSubject(route.Priority, route.Bucket, route.Tenant), em.ref.String(), d)
	if err := em.wait(); err != nil {
		w.log.Error("publishing a failed job's records", "job", em.ref.JobID, "tenant", em.ref.Tenant, "err", err)
		msg.NakWithDelay(w.cfg.RetryDelay)
		return
	}
	w.cfg.Metrics.observe(contracts.StatusFailed, e, nil, nil)
	msg.TermWithReason(string(e.Code))
}

// emitter publishes one attempt's events in order and collects the
// publish acks.
type emitter struct {
	w       *Worker
	ref     contracts.JobRef
	attempt int
	trace   contracts.Traceparent
	stream  bool

	mu      sync.Mutex
	seq     uint64
	futures []jetstream.PubAckFuture
	err     error
	// pending delta, when coalescing
	text      string
	reasoning string
	ids       []int32
	lps       []contracts.TokenLogprob
	// A streaming job's coalescing: when its last delta went out (zero
	// before the first), and the timer that flushes a pending delta
	// DeltaInterval after it, so that none waits for a next token.
	lastDelta time.Time
	timer     *time.Timer
}

// Delta implements Sink. Deltas are coalesced (Config.DeltaTokens,
// Config.DeltaInterval): a job that did not ask to stream gets one event
// per DeltaTokens tokens; a streaming job gets its first delta at once,
// then one event per DeltaTokens tokens or per DeltaInterval, whichever
// comes first, a timer flushing what is pending when tokens pause. Only
// the grouping changes: the events' text, ids and logprobs add up to the
// same output.
func (e *emitter) Delta(text string, ids []int32, lps []contracts.TokenLogprob) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.text += text
	e.ids = append(e.ids, ids...)
	e.lps = append(e.lps, lps...)
	if len(e.ids) >= e.w.cfg.DeltaTokens {
		e.flushLocked()
		return
	}
	if !e.stream {
		return
	}
	wait := e.w.cfg.DeltaInterval - time.Since(e.lastDelta)
	switch {
	case e.lastDelta.IsZero() || wait <= 0:
		e.flushLocked()
	case e.timer == nil:
		var t *time.Timer
		t = time.AfterFunc(wait, func() {
			e.mu.Lock()
			defer e.mu.Unlock()
			// A flush since the timer was set has stopped it, or
			// (had it already fired) replaced or cleared e.timer.
			if e.timer == t {
				e.flushLocked()
			}
		})
		e.timer = t
	}
}

// Reasoning implements ReasoningSink: a thinking job's new reasoning text,
// published with the next delta.
func (e *emitter) Reasoning(text string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.reasoning += text
}

// Tool implements Sink: a tool event.
func (e *emitter) Tool(tool string, action contracts.ToolAction, detail string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.flushLocked()
	e.publishLocked(&contracts.Event{Type: contracts.EventTool, Tool: tool, Action: action, Detail: detail})
}

// Event implements Sink: a preempted or resumed event.
func (e *emitter) Event(kind, detail string) {
	t := contracts.EventPreempted
	if kind == "resumed" {
		t = contracts.EventResumed
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.flushLocked()
	e.publishLocked(&contracts.Event{Type: t, Detail: detail})
}

// flush publishes the pending delta, if any.
func (e *emitter) flush() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.flushLocked()
}

// flushLocked publishes the pending delta, if any, and stops the timer
// waiting to flush it.
func (e *emitter) flushLocked() {
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	if len(e.ids) == 0 && e.text == "" && e.reasoning == "" {
		return
	}
	e.lastDelta = time.Now()
	ev := &contracts.Event{Type: contracts.EventDelta, Text: e.text, Reasoning: e.reasoning, TokenIDs: e.ids, Logprobs: e.lps}
	e.text, e.reasoning, e.ids, e.lps = "", "", nil, nil
	e.publishLocked(ev)
}

// publish publishes ev after the pending delta, if any.
func (e *emitter) publish(ev *contracts.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.flushLocked()
	e.publishLocked(ev)
}

func (e *emitter) publishLocked(ev *contracts.Event) {
	e.seq++
	ev.JobID, ev.Tenant, ev.Seq, ev.Attempt, ev.Time = e.ref.JobID, e.ref.Tenant, e.seq, e.attempt, time.Now().UTC()
	e.publishJSONLocked(contracts.EventsSubject(e.ref.Tenant, e.ref.JobID), contracts.EventMsgID(e.ref, e.attempt, e.seq), ev)
}

func (e *emitter) publishJSON(subject, msgID string, v any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.publishJSONLocked(subject, msgID, v)
}

func (e *emitter) publishJSONLocked(subject, msgID string, v any) {
	if e.err != nil {
		return
	}
	data, err := json.Marshal(v)
	if err != nil {
		e.err = err
		return
	}
	m := &nats.Msg{Subject: subject, Data: data, Header: contracts.NewHeader(e.ref.Tenant, e.trace)}
	m.Header.Set(contracts.HeaderMsgID, msgID)
	f, err := e.w.js.PublishMsgAsync(m)
	if err != nil {
		e.err = fmt.Errorf("publish %s: %w", subject, err)
		return
	}
	e.futures = append(e.futures, f)
}

// wait returns the first publish failure of the messages sent so far.
func (e *emitter) wait() error {
	e.mu.Lock()
	fs := e.futures
	e.futures = nil
	err := e.err
	e.mu.Unlock()
	if len(fs) > 0 && e.w.nc.IsClosed() {
		return nats.ErrConnectionClosed
	}
	// A message whose acknowledgement is lost (its stream's leader went
	// down with it) is sent again after publishAttemptTimeout, until
	// publishTimeout: its Nats-Msg-Id makes a repeat a duplicate the
	// stream drops.
	deadline := time.Now().Add(publishTimeout)
	for len(fs) > 0 {
		actx, cancel := context.WithTimeout(context.Background(), min(publishAttemptTimeout, time.Until(deadline)))
		var lost []jetstream.PubAckFuture
		for _, f := range fs {
			select {
			case <-f.Ok():
			case perr := <-f.Err():
				if err == nil {
					err = perr
				}
			case <-actx.Done():
				lost = append(lost, f)
			}
		}
		cancel()
		if len(lost) > 0 && time.Until(deadline) <= 0 {
			return errors.New("timed out waiting for publish acks")
		}
		fs = fs[:0]
		for _, f := range lost {
			nf, perr := e.w.js.PublishMsgAsync(f.Msg())
			if perr != nil {
				return perr
			}
			fs = append(fs, nf)
		}
	}
	return err
}

// publishAttemptTimeout is how long a job's message waits for its
// acknowledgement before it is sent again (wait).
const publishAttemptTimeout = 2 * time.Second

// finish publishes a job's final event, result and usage record, then acks.
// ran says whether the job used the model (and is billed).
func (e *emitter) finish(msg jetstream.Msg, job *Job, out *Outcome, u contracts.Usage, jobErr *contracts.Error, log interface {
	Info(string, ...any)
	Error(string, ...any)
}, ran bool) {
	e.flush()
	now := time.Now().UTC()
	status := contracts.StatusCompleted
	switch {
	case jobErr != nil && jobErr.Code == contracts.CodeCanceled:
		status = contracts.StatusCanceled
	case jobErr != nil:
		status = contracts.StatusFailed
	}
	var usage *contracts.Usage
	if ran {
		x := out.Usage
		x.JobID, x.Tenant, x.Model, x.Priority, x.Bucket = u.JobID, u.Tenant, u.Model, u.Priority, u.Bucket
		// Queue time: JetStream to the worker, plus any wait inside the
		// executor (the scheduler's admission queue).
		x.Status, x.QueueMs, x.Attempt, x.TraceID, x.WorkerID, x.Device = status, u.QueueMs+out.Usage.QueueMs, u.Attempt, u.TraceID, u.WorkerID, u.Device
		x.CreatedAt, x.FinishedAt = u.CreatedAt, now
		x.BatchID, x.CustomID = u.BatchID, u.CustomID
		usage = &x
	}
	stop := out.StopReason
	if status == contracts.StatusCanceled {
		stop = contracts.StopCanceled
	}
	if jobErr != nil && status == contracts.StatusFailed {
		e.publish(&contracts.Event{Type: contracts.EventError, Error: jobErr})
	} else {
		e.publish(&contracts.Event{Type: contracts.EventFinal, StopReason: stop, StopSequence: out.StopSequence, Usage: usage, Text: out.Text, Reasoning: out.Reasoning, ToolReport: out.ToolReport,
			Incomplete: out.Incomplete && status == contracts.StatusCompleted, IncompleteReason: incompleteReason(out, status), Attempts: attempts(out, ran)})
	}
	res := &contracts.Result{JobID: e.ref.JobID, Tenant: e.ref.Tenant, Status: status, Text: out.Text, Reasoning: out.Reasoning, TokenIDs: out.TokenIDs,
		Usage: usage, Error: jobErr, ToolReport: out.ToolReport, Metadata: job.Request.Metadata, Attempt: e.attempt, FinishedAt: now,
		Attempts: attempts(out, ran)}
	if status == contracts.StatusCompleted {
		for _, v := range out.Embeddings {
			res.Embeddings = append(res.Embeddings, contracts.Vector(v))
		}
		res.StopReason, res.StopSequence = out.StopReason, out.StopSequence
		res.Incomplete, res.IncompleteReason = out.Incomplete, incompleteReason(out, status)
	}
	res.Fallback, res.ToolFailureReason = out.Fallback, out.ToolFailureReason
	if ran && status == contracts.StatusCompleted {
		// Before the result (the same connection keeps the order): a next
		// turn submitted on the result finds its holder. A core publish, no
		// ack awaited: a claim lost costs a cache miss, never the job.
		if k := e.w.claim(job.Request, out.Text); k != "" {
			e.w.nc.Publish("$KV."+contracts.PrefixesBucket+"."+k, []byte(e.w.aff.me))
		}
	}
	e.publishJSON(contracts.ResultsSubject(e.ref.Tenant, e.ref.JobID), e.ref.String(), res)
	if usage != nil {
		e.publishJSON(contracts.UsageSubject(e.ref.Tenant), e.ref.String(), usage)
	}
	if err := e.wait(); err != nil {
		log.Error("publishing the job's results; it will be redelivered", "err", err)
		msg.NakWithDelay(e.w.cfg.RetryDelay)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
	defer cancel()
	if err := msg.DoubleAck(ctx); err != nil {
		log.Error("ack failed; the job may be redelivered (billing dedupes on tenant and job id)", "err", err)
		return
	}
	e.w.cfg.Metrics.observe(status, jobErr, usage, out.ToolReport)
	log.Info("job done", "status", status, "output_tokens", len(out.TokenIDs))
}

// attempts is the generations a job that ran went through (absent when
// it did not run).
func attempts(out *Outcome, ran bool) int {
	if !ran {
		return 0
	}
	return max(out.Attempts, 1)
}

// incompleteReason is the outcome's reason for an incomplete output of a
// completed job, or "".
func incompleteReason(out *Outcome, status contracts.ResultStatus) string {
	if !out.Incomplete || status != contracts.StatusCompleted {
		return ""
	}
	return out.IncompleteReason
}

func traceID(tp contracts.Traceparent) string {
	if tp.IsZero() {
		return ""
	}
	return tp.TraceIDString()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
