package worker_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// TestBatch runs a JSONL batch through a real worker: good lines, a line
// that is not JSON, a repeated custom_id, a request the contract rejects,
// and a job that fails in the worker (an unknown model). The output has
// one record per line in input order; running the batch again answers
// from the stored results and runs nothing twice.
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
		var recs []producer.BatchRecord
		sc := bufio.NewScanner(&out)
		for sc.Scan() {
			var r producer.BatchRecord
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatal(err)
			}
			recs = append(recs, r)
		}
		if len(seen) != len(recs) || seen[len(seen)-1] != counts {
			t.Fatalf("progress %v for %d records, final counts %+v", seen, len(recs), counts)
		}
		return recs, counts
	}
	recs, counts := run()
	want := producer.BatchCounts{Total: good + 5, Completed: good + 1, Failed: 1, Invalid: 3}
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
	// The bad-max line's job never ran (pending); the line without JSON and
	// the repeated custom_id are invalid.
	if st != (producer.BatchProgress{Lines: good + 5, Completed: good + 1, Failed: 1, Pending: 1, Invalid: 2}) {
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
