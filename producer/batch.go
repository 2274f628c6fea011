package producer

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/zerolayer/zerolayer/contracts"
)

// BatchLine is one line of a batch input file (JSONL): a job request and
// the caller's name for it, unique within the batch.
type BatchLine struct {
	CustomID string          `json:"custom_id"`
	Request  json.RawMessage `json:"request"`
}

// BatchRecord is one line of a batch output file, in input order: the
// job's result, or the error that kept the line from becoming a job.
type BatchRecord struct {
	CustomID string            `json:"custom_id"`
	JobID    string            `json:"job_id,omitempty"`
	Result   *contracts.Result `json:"result,omitempty"`
	Error    *contracts.Error  `json:"error,omitempty"`
}

// BatchCounts counts a batch's lines by outcome.
type BatchCounts struct {
	// Total is the lines read so far.
	Total int `json:"total"`
	// Completed, Failed and Canceled count the jobs that ended so;
	// Invalid counts lines that were not submitted (bad JSON, a missing
	// or repeated custom_id, a request the contract rejects).
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	Canceled  int `json:"canceled"`
	Invalid   int `json:"invalid"`
}

// Done is the number of lines with a record written.
func (c BatchCounts) Done() int { return c.Completed + c.Failed + c.Canceled + c.Invalid }

// BatchOpts configures RunBatch.
type BatchOpts struct {
	// ID names the batch. Line custom_id runs as job ID-custom_id, so
	// running the same input with the same ID again resumes it: jobs
	// already stored are not submitted twice (within the duplicate
	// window) and finished ones are answered from their stored results.
	// Required.
	ID string
	// Window is how many lines may be between the oldest one without a
	// record and the newest submitted. Defaults to 256.
	Window int
	// Progress, if set, is called after each record is written.
	Progress func(BatchCounts)
	// Stalled, if set, is called when no record has been written for
	// StallAfter (default 10 s), and again each StallAfter while none is,
	// with the custom_id of the line the output waits on (the oldest
	// unanswered) and how many lines are in flight.
	Stalled    func(waitingOn string, inFlight int)
	StallAfter time.Duration
	// WaitForModel queues every line's job even when no live worker
	// serves its model (contracts.JobRequest.WaitForModel), instead of
	// answering the line unknown_model. Defaults to false: only the lines
	// whose requests ask to wait do.
	WaitForModel bool
	// MaxLineBytes bounds one input line, its ending aside: a longer
	// line is read through without being held, and gets an error record
	// (request_too_large). BatchStatus and CancelBatch count such lines
	// with the default. Defaults to DefaultMaxLineBytes (4 MiB).
	MaxLineBytes int
}

// BatchJobID is the job id of line customID of batch batchID.
func BatchJobID(batchID, customID string) string { return batchID + "-" + customID }

// RunBatch submits every line of in as a job, waits for each, and writes
// one BatchRecord per non-blank line to out in input order (ReadLines
// reads in; an error names its line as ReadLines numbers it, blank lines
// counted). A bad line, a line longer than opts.MaxLineBytes among them,
// gets an error record and does not stop the batch; the batch stops
// early only when ctx ends or in or out fails. When reading in fails,
// the lines already read still get their records before RunBatch returns
// the error. Each request's metadata gets batch_id and
// custom_id. A line refused at submit for a rate or concurrency limit
// (Config.Admitter) waits its retry-after and is submitted again; a
// look-up, submit or wait that fails for a passing reason (a timeout, a
// reconnect) is tried again: a line gets a record only once its job has a
// result or its request was refused for good, never for an error of the
// runner's own. When ctx ends, lines without a record get none (their
// jobs may still run): run the batch again with the same ID to resume.
func (c *Client) RunBatch(ctx context.Context, in io.Reader, out io.Writer, opts BatchOpts) (BatchCounts, error) {
	if err := contracts.ValidateJobID(opts.ID); err != nil {
		return BatchCounts{}, fmt.Errorf("producer: batch id: %w", err)
	}
	if opts.Window <= 0 {
		opts.Window = 256
	}
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = DefaultMaxLineBytes
	}
	if opts.StallAfter <= 0 {
		opts.StallAfter = 10 * time.Second
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	type slot struct {
		rec     BatchRecord
		invalid bool // the line never became a job
		done    chan struct{}
	}
	// The writer takes slots in input order; the window bounds how many
	// are outstanding (and so the records held for the ordered write).
	slots := make(chan *slot, opts.Window)
	var counts BatchCounts
	var mu sync.Mutex // counts
	writeErr := make(chan error, 1)
	var inFlight atomic.Int64
	go func() {
		enc := json.NewEncoder(out)
		stall := time.NewTicker(opts.StallAfter)
		defer stall.Stop()
		for s := range slots {
		wait:
			for {
				select {
				case <-s.done:
					break wait
				case <-ctx.Done():
					// A line answered as ctx ended is written only if
					// it has its answer: never a record for the
					// runner's own stop.
					writeErr <- ctx.Err()
					return
				case <-stall.C:
					if opts.Stalled != nil {
						opts.Stalled(s.rec.CustomID, int(inFlight.Load()))
					}
				}
			}
			stall.Reset(opts.StallAfter)
			if s.rec.Result == nil && s.rec.Error == nil {
				// ctx ended before the line had its answer.
				writeErr <- ctx.Err()
				return
			}
			if err := enc.Encode(&s.rec); err != nil {
				writeErr <- fmt.Errorf("producer: writing the batch output: %w", err)
				cancel()
				return
			}
			mu.Lock()
			if s.invalid {
				counts.Invalid++
			} else {
				tally(s.rec.Result, &counts.Completed, &counts.Failed, &counts.Canceled)
			}
			cnt := counts
			mu.Unlock()
			if opts.Progress != nil {
				opts.Progress(cnt)
			}
		}
		writeErr <- nil
	}()

	var wg sync.WaitGroup
	seen := map[string]int{}
	readErr := ReadLines(in, opts.MaxLineBytes, func(line int, raw []byte, tooLong int64) error {
		s := &slot{done: make(chan struct{})}
		select {
		case slots <- s:
		case <-ctx.Done():
			return ctx.Err()
		}
		mu.Lock()
		counts.Total++
		mu.Unlock()
		if tooLong > 0 {
			s.rec.Error, s.invalid = contracts.NewError(contracts.CodeRequestTooLarge, "line %d is %d bytes, above the limit of %d for a batch line", line, tooLong, opts.MaxLineBytes), true
			close(s.done)
			return nil
		}
		req, e := c.batchRequest(raw, line, opts.ID, seen, &s.rec)
		if e != nil {
			s.rec.Error, s.invalid = e, true
			close(s.done)
			return nil
		}
		req.WaitForModel = req.WaitForModel || opts.WaitForModel
		wg.Add(1)
		inFlight.Add(1)
		go func() {
			defer wg.Done()
			defer close(s.done)
			defer inFlight.Add(-1)
			s.rec.Result, s.rec.Error, s.invalid = c.submitAndWait(ctx, req)
		}()
		return nil
	})
	if readErr != nil && ctx.Err() == nil {
		// The lines already read go on to their records: what was
		// submitted is answered, not dropped for the input's fault.
		readErr = fmt.Errorf("producer: batch input: %w", readErr)
	} else {
		readErr = nil // ended by ctx: the writer reports it
	}
	close(slots)
	wg.Wait()
	err := <-writeErr
	mu.Lock()
	defer mu.Unlock()
	return counts, errors.Join(readErr, err)
}

// CheckBatchRequest refuses what a request may ask for alone but not in a
// batch: logprobs, which travel on a job's delta events, which a batch
// does not follow (its output would lack them without a word). The
// gateway's batches endpoints check their lines with it too.
func CheckBatchRequest(req *contracts.JobRequest) *contracts.Error {
	if req.Logprobs {
		return contracts.NewError(contracts.CodeInvalidRequest, "logprobs are not available in batches (they come on a job's delta events): ask for them in a call of their own")
	}
	return nil
}

// batchRequest decodes and checks one input line, filling rec's ids.
func (c *Client) batchRequest(raw []byte, line int, batchID string, seen map[string]int, rec *BatchRecord) (*contracts.JobRequest, *contracts.Error) {
	var bl BatchLine
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&bl); err != nil {
		return nil, contracts.NewError(contracts.CodeInvalidRequest, "line %d: not a batch line {\"custom_id\", \"request\"}: %v", line, err)
	}
	rec.CustomID = bl.CustomID
	if err := contracts.ValidateJobID(bl.CustomID); err != nil {
		return nil, contracts.NewError(contracts.CodeInvalidRequest, "line %d: custom_id: %v", line, err)
	}
	if first, dup := seen[bl.CustomID]; dup {
		return nil, contracts.NewError(contracts.CodeInvalidRequest, "line %d: custom_id %q repeats line %d", line, bl.CustomID, first)
	}
	seen[bl.CustomID] = line
	id := BatchJobID(batchID, bl.CustomID)
	if err := contracts.ValidateJobID(id); err != nil {
		return nil, contracts.NewError(contracts.CodeInvalidRequest, "line %d: job id %s: shorten the batch id or custom_id", line, err)
	}
	rec.JobID = id
	if len(bl.Request) == 0 {
		return nil, contracts.NewError(contracts.CodeInvalidRequest, "line %d: no request", line)
	}
	req, err := contracts.DecodeJobRequest(bl.Request, c.cfg.Limits)
	if err != nil {
		return nil, contracts.ErrorFrom(err)
	}
	if err := CheckBatchRequest(req); err != nil {
		err.Message = fmt.Sprintf("line %d: %s", line, err.Message)
		return nil, err
	}
	if req.ID != "" && req.ID != id {
		return nil, contracts.NewError(contracts.CodeInvalidRequest, "line %d: request id %q; in a batch the id is the batch id and custom_id (%s)", line, req.ID, id)
	}
	req.ID = id
	if req.Metadata == nil {
		req.Metadata = map[string]string{}
	}
	req.Metadata["batch_id"], req.Metadata["custom_id"] = batchID, bl.CustomID
	return req, nil
}

// submitAndWait returns the stored result of req's job when there is one
// (a batch run again), else submits req (a repeat of a queued job is
// stored once) and waits for its result. A request refused for good comes
// back as the error with rejected set. Look-ups, submits and waits that
// fail for a passing reason are tried again; it returns neither a result
// nor an error only when ctx ends first.
func (c *Client) submitAndWait(ctx context.Context, req *contracts.JobRequest) (_ *contracts.Result, _ *contracts.Error, rejected bool) {
	res, err := retrying(ctx, func() (*contracts.Result, error) { return c.storedResult(ctx, req.ID) })
	if res != nil || err != nil {
		return res, nil, false // err: ctx ended
	}
	for {
		if _, err := retrying(ctx, func() (struct{}, error) { return struct{}{}, c.submitPatiently(ctx, req) }); err != nil {
			if ctx.Err() != nil {
				return nil, nil, false
			}
			return nil, contracts.ErrorFrom(err), true
		}
		res, err := retrying(ctx, func() (*contracts.Result, error) { return c.Wait(ctx, req.ID) })
		if !errors.Is(err, contracts.CodeNotFound) || ctx.Err() != nil {
			return res, nil, false
		}
		// Neither a result nor a queued job: the job was lost on the
		// way (a publish the server never stored, a stream that lost
		// it): submit it again (the id makes the repeat safe).
	}
}

// retrying calls f until it succeeds, fails for good (an error with a
// contract code that is not retryable, internal aside: the request itself
// is refused), or ctx ends, waiting longer after each passing failure (up to
// retryMaxWait). It returns ctx's error when ctx ended.
func retrying[T any](ctx context.Context, f func() (T, error)) (T, error) {
	wait := retryMinWait
	for {
		v, err := f()
		if err == nil || ctx.Err() != nil {
			return v, cmp.Or(ctx.Err(), err)
		}
		var ce *contracts.Error
		if errors.As(err, &ce) && !ce.Retryable() && ce.Code != contracts.CodeInternal || errors.Is(err, nats.ErrConnectionClosed) {
			return v, err // (a connection closed for good stays closed)
		}
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, retryMaxWait)
	}
}

// The waits between tries of a look-up, submit or wait that failed for a
// passing reason.
const (
	retryMinWait = 100 * time.Millisecond
	retryMaxWait = time.Second
)

// submitPatiently submits req, waiting and trying again while it is
// refused for a rate or concurrency limit (the line is not failed for
// going too fast), until ctx ends.
func (c *Client) submitPatiently(ctx context.Context, req *contracts.JobRequest) error {
	for {
		_, err := c.Submit(ctx, req, nil)
		wait, ok := limitRetry(contracts.ErrorFrom(err))
		if !ok {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// tally counts a job's result by how it ended; a job without a result
// counts as failed.
func tally(res *contracts.Result, completed, failed, canceled *int) {
	switch {
	case res != nil && res.Status == contracts.StatusCompleted:
		*completed++
	case res != nil && res.Status == contracts.StatusCanceled:
		*canceled++
	default:
		*failed++
	}
}

// DefaultMaxLineBytes is the longest batch input line read by default
// (BatchOpts.MaxLineBytes), and the one BatchStatus and CancelBatch read
// with: 4 MiB.
const DefaultMaxLineBytes = 4 << 20

// ReadLines calls fn with each non-blank line of r, in order, stopping at
// fn's first error, which it returns as it is. n numbers the lines from 1
// and counts every line of r, blank ones too, so it is the line number an
// editor shows. A line ends at "\n" or "\r\n" (its ending is not passed);
// a last line without an ending counts too. A line of only white space is
// blank and skipped.
//
// A line longer than max bytes (its ending aside) is never held whole:
// it is read through and dropped, and fn gets it as line nil with tooLong
// its length in bytes; for every other line tooLong is 0. ReadLines so
// reads lines of any length with about max bytes of memory. line is only
// valid until fn returns. An error reading r ends ReadLines with that
// error, saying the line it was reading.
func ReadLines(r io.Reader, max int, fn func(n int, line []byte, tooLong int64) error) error {
	if max <= 0 {
		return fmt.Errorf("producer: ReadLines: max %d; give the longest line to read, in bytes", max)
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	for n := 1; ; n++ {
		buf = buf[:0]
		var (
			size int64   // bytes read of the line, its ending included
			tail [2]byte // its last two bytes
			err  error
		)
		for {
			var chunk []byte
			chunk, err = br.ReadSlice('\n')
			size += int64(len(chunk))
			// Keep the line while it may still fit: max bytes and
			// "\r\n".
			if size <= int64(max)+2 {
				buf = append(buf, chunk...)
			}
			switch k := len(chunk); {
			case k >= 2:
				tail = [2]byte{chunk[k-2], chunk[k-1]}
			case k == 1:
				tail = [2]byte{tail[1], chunk[0]}
			}
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("reading line %d: %w", n, err)
		}
		if size == 0 {
			return nil // io.EOF: the last line had its ending
		}
		length := size
		if tail[1] == '\n' {
			length--
			if size >= 2 && tail[0] == '\r' {
				length--
			}
		}
		var e error
		switch {
		case length > int64(max):
			e = fn(n, nil, length)
		case len(bytes.TrimSpace(buf[:length])) > 0:
			e = fn(n, buf[:length], 0)
		}
		if e != nil {
			return e
		}
		if err == io.EOF {
			return nil
		}
	}
}

// eachJob calls fn with the job id of every non-blank line of a batch
// input file (read as RunBatch reads it with the default MaxLineBytes)
// whose custom_id is readable and new, or "" for any other line.
func eachJob(in io.Reader, batchID string, fn func(jobID string) error) error {
	seen := map[string]bool{}
	return ReadLines(in, DefaultMaxLineBytes, func(_ int, raw []byte, tooLong int64) error {
		var bl struct {
			CustomID string `json:"custom_id"`
		}
		id := ""
		if tooLong == 0 && json.Unmarshal(raw, &bl) == nil && contracts.ValidateJobID(bl.CustomID) == nil && !seen[bl.CustomID] {
			seen[bl.CustomID] = true
			if jid := BatchJobID(batchID, bl.CustomID); contracts.ValidateJobID(jid) == nil {
				id = jid
			}
		}
		return fn(id)
	})
}

// ErrPending is Result's answer for a job that has not finished: it is
// queued or running.
var ErrPending = errors.New("producer: the job has not finished")

// Result returns the job's stored result without waiting. A job that has
// not finished (it is queued or running) is ErrPending; a job that has no
// result and is not queued (never submitted, or its result expired) is a
// CodeNotFound error. Where the client cannot see the queue (a tenant
// account that imports only its own direct gets), a job without a result
// is ErrPending. A result stored by a release before job ids were scoped
// by tenant is found too, when this client may read it and it is this
// tenant's.
func (c *Client) Result(ctx context.Context, jobID string) (*contracts.Result, error) {
	if err := contracts.ValidateJobID(jobID); err != nil {
		return nil, err
	}
	res, err := c.storedResult(ctx, jobID)
	if res != nil || err != nil {
		return res, err
	}
	switch queued, err := c.queued(ctx, jobID); {
	case errors.Is(err, errNoQueueView):
		return nil, ErrPending
	case err != nil && c.passing(ctx, err):
		return nil, contracts.NewError(contracts.CodeUnavailable, "job %s: %v", jobID, err)
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil || queued:
		return nil, ErrPending
	}
	// Not queued: it may have finished in between.
	if res, err := c.result(ctx, jobID); res != nil || err != nil {
		return res, err
	}
	return nil, contracts.NewError(contracts.CodeNotFound, "job %s of tenant %s: no result, and it is not queued (never submitted, or expired)", jobID, c.cfg.Tenant)
}

// storedResult returns the job's stored result, or nil, looking in the
// old form too.
func (c *Client) storedResult(ctx context.Context, jobID string) (*contracts.Result, error) {
	res, err := c.result(ctx, jobID)
	if res != nil || err != nil {
		return res, err
	}
	// A tenant's account cannot read the old subjects: no responders (or
	// no answer at all), and nothing to find there, so the client stops
	// looking.
	if c.noLegacy.Load() {
		return nil, nil
	}
	lctx, cancel := context.WithTimeout(ctx, legacyLookupTimeout)
	defer cancel()
	m, err := contracts.LastMsg(lctx, c.nc, contracts.StreamResults, contracts.LegacyResultsSubject(jobID))
	if err != nil && ctx.Err() == nil {
		c.noLegacy.Store(true)
	}
	if err != nil || m == nil {
		return nil, nil
	}
	var r contracts.Result
	if json.Unmarshal(m.Data, &r) != nil || r.Tenant != c.Tenant() {
		return nil, nil
	}
	return &r, nil
}

// legacyLookupTimeout bounds the look-up of a result in the old form.
const legacyLookupTimeout = time.Second

// CancelBatch cancels the job of every line of in (a batch input file) of
// batch batchID, and returns how many it asked to stop. Lines RunBatch
// would not submit (no readable or a repeated custom_id, a job id too
// long) are skipped; finished jobs are left as they
// are. Results of canceled jobs say canceled, with what ran billed.
func (c *Client) CancelBatch(ctx context.Context, in io.Reader, batchID string) (int, error) {
	if err := contracts.ValidateJobID(batchID); err != nil {
		return 0, fmt.Errorf("producer: batch id: %w", err)
	}
	n := 0
	err := eachJob(in, batchID, func(id string) error {
		if id == "" {
			return nil
		}
		if err := c.Cancel(ctx, id); err != nil {
			return err
		}
		n++
		return nil
	})
	return n, err
}

// BatchStatus counts the jobs of batch batchID (one per line of in, a
// batch input file) by how far they got, from their stored results: lines
// whose job has no result yet count as Pending. It submits nothing.
func (c *Client) BatchStatus(ctx context.Context, in io.Reader, batchID string) (BatchProgress, error) {
	var p BatchProgress
	if err := contracts.ValidateJobID(batchID); err != nil {
		return p, fmt.Errorf("producer: batch id: %w", err)
	}
	err := eachJob(in, batchID, func(id string) error {
		p.Lines++
		if id == "" {
			p.Invalid++
			return nil
		}
		res, err := c.Result(ctx, id)
		switch {
		case errors.Is(err, ErrPending) || errors.Is(err, contracts.CodeNotFound):
			p.Pending++
		case err != nil:
			return err
		default:
			tally(res, &p.Completed, &p.Failed, &p.Canceled)
		}
		return nil
	})
	return p, err
}

// BatchProgress is where a batch stands (BatchStatus).
type BatchProgress struct {
	Lines     int `json:"lines"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	Canceled  int `json:"canceled"`
	// Pending counts jobs without a result: queued, running, or never
	// submitted (a line the contract rejects stays pending too).
	Pending int `json:"pending"`
	// Invalid counts lines without a readable custom_id, or repeating one.
	Invalid int `json:"invalid"`
}
