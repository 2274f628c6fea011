package worker_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// TestBatch runs a JSONL batch through a real worker: good lines, a line
// that is not JSON, a repeated custom_id, a request the contract rejects,
// and a request for a model the live worker does not serve (refused at
// submit with unknown_model: it would otherwise wait for a worker of its
// model). The output has one record per line in input order; running the
// batch again answers from the stored results and runs nothing twice.
func TestBatch(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	b.StartWorker(t, workertest.NewSchedExecutor(t, sched.Config{}), "w1")
	var in bytes.Buffer
	line := func(id string, req any) {
		raw, _ := json.Marshal(map[string]any{"custom_id": id, "request": req})
		in.Write(append(raw, '\n'))
	}
	const good = 12
	for i := 0; i < good; i++ {
		line(fmt.Sprintf("doc-%02d", i), request(fmt.Sprintf("Once upon a time there was a cat number %d", i), 4+i%5, contracts.PriorityLow))
	}
	in.WriteString("{not json\n")
	line("doc-03", request("again", 4, contracts.PriorityLow))                                           // repeated custom_id
	line("bad-max", map[string]any{"model": workertest.ModelName, "messages": []any{}, "max_tokens": 4}) // no messages
	line("no-model", &contracts.JobRequest{Model: "no-such-model", Messages: []contracts.Message{{Role: "user", Content: "hi"}}})
	line("doc-last", request("The end", 3, contracts.PriorityHigh))
	input := in.String()

	run := func() ([]producer.BatchRecord, producer.BatchCounts) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		var out bytes.Buffer
		var seen []producer.BatchCounts
		counts, err := b.Client.RunBatch(ctx, strings.NewReader(input), &out, producer.BatchOpts{ID: "b1", Window: 4,
			Progress: func(c producer.BatchCounts) { seen = append(seen, c) }})
		if err != nil {
			t.Fatal(err)
		}
		recs := records(t, &out)
		if len(seen) != len(recs) || seen[len(seen)-1] != counts {
			t.Fatalf("progress %v for %d records, final counts %+v", seen, len(recs), counts)
		}
		return recs, counts
	}
	recs, counts := run()
	want := producer.BatchCounts{Total: good + 5, Completed: good + 1, Invalid: 4}
	if counts != want || len(recs) != want.Total {
		t.Fatalf("counts %+v, %d records; want %+v", counts, len(recs), want)
	}
	for i := 0; i < good; i++ {
		r := recs[i]
		id := fmt.Sprintf("doc-%02d", i)
		if r.CustomID != id || r.JobID != "b1-"+id || r.Result == nil || r.Result.Status != contracts.StatusCompleted ||
			r.Result.Metadata["batch_id"] != "b1" || r.Result.Metadata["custom_id"] != id || r.Result.Usage.OutputTokens != 4+i%5 {
			t.Fatalf("record %d out of order or wrong: %+v", i, r)
		}
	}
	check := func(i int, custom string, code contracts.Code) {
		t.Helper()
		r := recs[i]
		var got contracts.Code
		if r.Error != nil {
			got = r.Error.Code
		} else if r.Result != nil && r.Result.Error != nil {
			got = r.Result.Error.Code
		}
		if r.CustomID != custom || got != code {
			t.Fatalf("record %d: %+v (error %v), want custom_id %q and code %s", i, r, r.Error, custom, code)
		}
	}
	check(good, "", contracts.CodeInvalidRequest)
	check(good+1, "doc-03", contracts.CodeInvalidRequest)
	check(good+2, "bad-max", contracts.CodeMissingMessages)
	check(good+3, "no-model", contracts.CodeUnknownModel)
	if r := recs[good+4]; r.CustomID != "doc-last" || r.Result == nil || r.Result.Status != contracts.StatusCompleted {
		t.Fatalf("last record %+v", r)
	}

	// Where it stands, from another process's point of view.
	st, err := b.Client.BatchStatus(context.Background(), strings.NewReader(input), "b1")
	if err != nil {
		t.Fatal(err)
	}
	// The bad-max and no-model lines' jobs never ran (pending); the line
	// without JSON and the repeated custom_id are invalid.
	if st != (producer.BatchProgress{Lines: good + 5, Completed: good + 1, Pending: 2, Invalid: 2}) {
		t.Fatalf("status %+v", st)
	}

	// Run again: the same records, answered from the stored results.
	usage := len(workertest.StreamMsgs(t, b.Srv.JS, contracts.StreamUsage, contracts.UsageSubject("acme")))
	again, counts2 := run()
	if counts2 != want {
		t.Fatalf("second run counts %+v, want %+v", counts2, want)
	}
	for i := range recs {
		if a, b := recs[i], again[i]; a.JobID != b.JobID || (a.Result == nil) != (b.Result == nil) ||
			(a.Result != nil && (a.Result.Text != b.Result.Text || a.Result.Attempt != b.Result.Attempt || !a.Result.FinishedAt.Equal(b.Result.FinishedAt))) {
			t.Fatalf("record %d differs on the second run:\n%+v\n%+v", i, a, b)
		}
	}
	b.WaitDrained(t)
	if n := len(workertest.StreamMsgs(t, b.Srv.JS, contracts.StreamUsage, contracts.UsageSubject("acme"))); n != usage {
		t.Fatalf("usage records %d after the second run, %d before: a job ran twice", n, usage)
	}
}

// TestBatchRefusesLogprobs: a batch line asking for logprobs, which come
// on a job's delta events only, is refused with a word rather than
// answered without them; the line beside it runs.
func TestBatchRefusesLogprobs(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	b.StartWorker(t, workertest.NewSchedExecutor(t, sched.Config{}), "w1")
	lp := request("Once upon a time", 4, contracts.PriorityLow)
	lp.Logprobs, lp.TopLogprobs = true, 5
	var in bytes.Buffer
	for i, req := range []*contracts.JobRequest{lp, request("Once upon a time", 4, contracts.PriorityLow)} {
		raw, _ := json.Marshal(map[string]any{"custom_id": []string{"lp", "plain"}[i], "request": req})
		in.Write(append(raw, '\n'))
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	counts, err := b.Client.RunBatch(ctx, &in, &out, producer.BatchOpts{ID: "lp1"})
	if err != nil {
		t.Fatal(err)
	}
	recs := records(t, &out)
	if want := (producer.BatchCounts{Total: 2, Completed: 1, Invalid: 1}); counts != want || len(recs) != 2 {
		t.Fatalf("counts %+v, %d records; want %+v", counts, len(recs), want)
	}
	if r := recs[0]; r.CustomID != "lp" || r.Error == nil || r.Error.Code != contracts.CodeInvalidRequest || !strings.Contains(r.Error.Message, "logprobs") {
		t.Errorf("the logprobs line: %+v (error %v)", r, r.Error)
	}
	if r := recs[1]; r.CustomID != "plain" || r.Result == nil || r.Result.Status != contracts.StatusCompleted {
		t.Errorf("the plain line: %+v", r)
	}
}

// TestBatchInterruptedUnderConsumerLimit runs a 400-line batch (a window of
// 256 lines in flight) against streams that allow one consumer each, so a
// runner that followed each job with a consumer of its own would be
// refused by the server; the run is interrupted after 50 records and
// resumed. Every line is answered once, none is failed for the
// interruption, and every job is billed once.
func TestBatchInterruptedUnderConsumerLimit(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	ctx := context.Background()
	for _, name := range []string{contracts.StreamResults, contracts.StreamEvents} {
		s, err := b.Srv.JS.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		cfg := s.CachedInfo().Config
		cfg.MaxConsumers = 1
		if err := b.Srv.JS.DeleteStream(ctx, name); err != nil {
			t.Fatal(err)
		}
		s, err = b.Srv.JS.CreateStream(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		// The limit holds: a second consumer is refused.
		c1, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{}); err == nil {
			t.Fatalf("%s: a second consumer was created under a limit of one", name)
		}
		if err := s.DeleteConsumer(ctx, c1.CachedInfo().Name); err != nil {
			t.Fatal(err)
		}
	}
	b.StartWorker(t, workertest.NewSchedExecutor(t, sched.Config{}), "w1")
	const n = 400
	var in bytes.Buffer
	for i := range n {
		raw, _ := json.Marshal(map[string]any{"custom_id": fmt.Sprintf("l%03d", i), "request": request(fmt.Sprintf("A cat named %d", i), 2, contracts.PriorityNormal)})
		in.Write(append(raw, '\n'))
	}
	run := func(stopAfter int) ([]producer.BatchRecord, producer.BatchCounts, error) {
		rctx, cancel := context.WithTimeout(ctx, 120*time.Second)
		defer cancel()
		var out bytes.Buffer
		counts, err := b.Client.RunBatch(rctx, bytes.NewReader(in.Bytes()), &out, producer.BatchOpts{ID: "big", Progress: func(c producer.BatchCounts) {
			if stopAfter > 0 && c.Done() >= stopAfter {
				cancel() // the user's Ctrl-C
			}
		}})
		recs := records(t, &out)
		return recs, counts, err
	}
	answered := func(recs []producer.BatchRecord) {
		t.Helper()
		for i, r := range recs {
			if r.CustomID != fmt.Sprintf("l%03d", i) || r.Error != nil || r.Result == nil || r.Result.Status != contracts.StatusCompleted {
				t.Fatalf("record %d: %+v (error %v)", i, r, r.Error)
			}
		}
	}
	recs, counts, err := run(50)
	if !errors.Is(err, context.Canceled) || len(recs) < 50 || len(recs) >= n || counts.Failed+counts.Invalid != 0 {
		t.Fatalf("interrupted run: %d records, counts %+v, err %v", len(recs), counts, err)
	}
	answered(recs)
	t.Logf("interrupted after %d records", len(recs))
	recs, counts, err = run(0)
	if err != nil || len(recs) != n || counts.Completed != n {
		t.Fatalf("resumed run: %d records, counts %+v, err %v", len(recs), counts, err)
	}
	answered(recs)
	b.WaitDrained(t)
	if u := len(workertest.StreamMsgs(t, b.Srv.JS, contracts.StreamUsage, contracts.UsageSubject("acme"))); u != n {
		t.Fatalf("%d usage records for %d jobs", u, n)
	}
}

// records parses a batch output.
func records(t *testing.T, out *bytes.Buffer) []producer.BatchRecord {
	t.Helper()
	var recs []producer.BatchRecord
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var r producer.BatchRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	return recs
}

// TestBatchIntoFullQueue: a 30-line batch into a queue capped at 5 jobs,
// a worker draining it: the lines refused as overloaded wait and are
// submitted again, and every line completes (none is failed for it).
func TestBatchIntoFullQueue(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{JobsMaxMsgs: 5})
	b.StartWorker(t, workertest.NewSchedExecutor(t, sched.Config{}), "w1")
	var in bytes.Buffer
	for i := range 30 {
		raw, _ := json.Marshal(map[string]any{"custom_id": fmt.Sprintf("l%02d", i), "request": request("Once upon a time", 8, contracts.PriorityNormal)})
		in.Write(append(raw, '\n'))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	counts, err := b.Client.RunBatch(ctx, &in, &out, producer.BatchOpts{ID: "full"})
	if err != nil || counts.Completed != 30 {
		t.Fatalf("counts %+v, err %v", counts, err)
	}
	for i, r := range records(t, &out) {
		if r.Error != nil || r.Result == nil || r.Result.Status != contracts.StatusCompleted {
			t.Fatalf("record %d: %+v (error %v)", i, r, r.Error)
		}
	}
}
