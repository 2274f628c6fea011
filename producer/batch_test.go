package producer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/producer"
)

// readLine is one call of ReadLines' fn.
type readLine struct {
	n       int
	line    string
	tooLong int64
}

func readAll(t *testing.T, r io.Reader, max int) ([]readLine, error) {
	t.Helper()
	var got []readLine
	err := producer.ReadLines(r, max, func(n int, line []byte, tooLong int64) error {
		if (line == nil) != (tooLong > 0) {
			t.Errorf("line %d: %d bytes and tooLong %d: one of them, never both", n, len(line), tooLong)
		}
		got = append(got, readLine{n, string(line), tooLong})
		return nil
	})
	return got, err
}

// TestReadLines: lines are numbered as an editor numbers them (blank lines
// counted, then skipped), end at "\n" or "\r\n" or the end of the input,
// and a line over max, however long, comes as its length alone.
func TestReadLines(t *testing.T) {
	t.Parallel()
	const max = 10
	x := func(n int) string { return strings.Repeat("x", n) }
	// The reader's buffer is 64 KiB: lines that end on and across its
	// edge.
	const buf = 64 << 10
	cases := []struct {
		name string
		in   string
		max  int
		want []readLine
	}{
		{"empty", "", max, nil},
		{"blank lines", "\n\n \t\n\r\n", max, nil},
		{"blank lines counted", "\n{a}\n\n  \n{b}\n", max, []readLine{{2, "{a}", 0}, {5, "{b}", 0}}},
		{"no last newline", "{a}\n{b}", max, []readLine{{1, "{a}", 0}, {2, "{b}", 0}}},
		{"crlf", "{a}\r\n\r\n{b}\r\n", max, []readLine{{1, "{a}", 0}, {3, "{b}", 0}}},
		{"a lone cr stays", "{a}\r", max, []readLine{{1, "{a}\r", 0}}},
		{"exactly max", x(max) + "\n", max, []readLine{{1, x(max), 0}}},
		{"exactly max, crlf", x(max) + "\r\n", max, []readLine{{1, x(max), 0}}},
		{"exactly max, last", x(max), max, []readLine{{1, x(max), 0}}},
		{"max+1", x(max+1) + "\n{b}\n", max, []readLine{{1, "", max + 1}, {2, "{b}", 0}}},
		{"max+1, crlf", x(max+1) + "\r\n{b}", max, []readLine{{1, "", max + 1}, {2, "{b}", 0}}},
		{"max+1, last", "{a}\n\n" + x(max+1), max, []readLine{{1, "{a}", 0}, {3, "", max + 1}}},
		{"too long blank", strings.Repeat(" ", max+1) + "\n", max, []readLine{{1, "", max + 1}}},
		{"buffer full, then eof", x(buf), buf, []readLine{{1, x(buf), 0}}},
		{"buffer full, then newline", x(buf) + "\n{b}", buf, []readLine{{1, x(buf), 0}, {2, "{b}", 0}}},
		{"cr ends the buffer", x(buf-1) + "\r\n{b}", buf - 1, []readLine{{1, x(buf - 1), 0}, {2, "{b}", 0}}},
		{"over the buffer", x(3*buf+5) + "\r\n{b}", buf, []readLine{{1, "", 3*buf + 5}, {2, "{b}", 0}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := readAll(t, strings.NewReader(tc.in), tc.max)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %v\nwant %v", abbrev(got), abbrev(tc.want))
			}
		})
	}
}

func abbrev(ls []readLine) []readLine {
	for i := range ls {
		if len(ls[i].line) > 20 {
			ls[i].line = fmt.Sprintf("%s…(%d bytes)", ls[i].line[:10], len(ls[i].line))
		}
	}
	return ls
}

// TestReadLinesHugeLine reads a 50 MB line between two short ones with
// well under 50 MB of memory. Not parallel: it measures what the process
// allocates.
func TestReadLinesHugeLine(t *testing.T) {
	const huge = 50 << 20
	const max = 1 << 20
	in := io.MultiReader(strings.NewReader("{a}\n"), io.LimitReader(repeatReader('x'), huge), strings.NewReader("\r\n\n{b}"))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got, err := readAll(t, in, max)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if want := []readLine{{1, "{a}", 0}, {2, "", huge}, {4, "{b}", 0}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8*max {
		t.Errorf("reading a %d-byte line allocated %d bytes; the line limit is %d", huge, alloc, max)
	}
}

// repeatReader reads as an endless run of one byte.
type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// TestReadLinesErrors: a read error names the line being read; fn's error
// stops the reading and comes back as it is.
func TestReadLinesErrors(t *testing.T) {
	t.Parallel()
	broken := errors.New("disk on fire")
	in := io.MultiReader(strings.NewReader("{a}\n\n{b"), errReader{broken})
	got, err := readAll(t, in, 100)
	if !errors.Is(err, broken) || !strings.Contains(err.Error(), "line 3") || fmt.Sprint(got) != fmt.Sprint([]readLine{{1, "{a}", 0}}) {
		t.Errorf("got %v, %v; want line 1, then the error at line 3", got, err)
	}
	stop := errors.New("stop")
	n := 0
	err = producer.ReadLines(strings.NewReader("a\nb\nc\n"), 100, func(int, []byte, int64) error { n++; return stop })
	if err != stop || n != 1 {
		t.Errorf("fn's error: %v after %d lines", err, n)
	}
	if err := producer.ReadLines(strings.NewReader("a"), 0, func(int, []byte, int64) error { return nil }); err == nil {
		t.Error("max 0 accepted")
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// answerJobs answers every job submitted on srv, after delay, with a
// completed result, as a worker would.
func answerJobs(t *testing.T, srv *natstest.Server, delay time.Duration) {
	t.Helper()
	sub, err := srv.Conn.Subscribe(contracts.SubjectJobsAll, func(m *nats.Msg) {
		r, err := contracts.ParseJobSubject(m.Subject)
		if err != nil {
			t.Errorf("job subject %s: %v", m.Subject, err)
			return
		}
		time.AfterFunc(delay, func() {
			res := contracts.Result{JobID: r.JobID, Tenant: r.Tenant, Status: contracts.StatusCompleted, StopReason: contracts.StopEndTurn, Attempt: 1, FinishedAt: time.Now()}
			b, _ := json.Marshal(res)
			srv.Conn.Publish(contracts.ResultsSubject(r.Tenant, r.JobID), b)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
}

func batchLine(id string) string {
	return fmt.Sprintf(`{"custom_id": %q, "request": {"model": "stories260k", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}}`, id)
}

// TestBatchTooLongLine: a line over MaxLineBytes is its own error record
// (request_too_large, its line number counting blank lines) and the batch
// goes on.
func TestBatchTooLongLine(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	answerJobs(t, srv, 0)
	long := `{"custom_id": "long", "request": {"model": "stories260k", "messages": [{"role": "user", "content": "` + strings.Repeat("x", 2000) + `"}]}}`
	input := strings.Join([]string{batchLine("a"), "", long, "\r", batchLine("b") + "\r", "{bad", long, batchLine("c")}, "\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	counts, err := c.RunBatch(ctx, strings.NewReader(input), &out, producer.BatchOpts{ID: "b1", MaxLineBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if want := (producer.BatchCounts{Total: 6, Completed: 3, Invalid: 3}); counts != want {
		t.Errorf("counts %+v, want %+v", counts, want)
	}
	var recs []producer.BatchRecord
	for dec := json.NewDecoder(&out); dec.More(); {
		var r producer.BatchRecord
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if len(recs) != 6 {
		t.Fatalf("%d records, want 6:\n%s", len(recs), out.String())
	}
	for i, want := range []struct {
		custom string
		code   contracts.Code
		line   string
	}{{"a", "", ""}, {"", contracts.CodeRequestTooLarge, "line 3 "}, {"b", "", ""}, {"", contracts.CodeInvalidRequest, "line 6:"}, {"", contracts.CodeRequestTooLarge, "line 7 "}, {"c", "", ""}} {
		r := recs[i]
		if want.code == "" {
			if r.CustomID != want.custom || r.Result == nil || r.Result.Status != contracts.StatusCompleted {
				t.Errorf("record %d: %+v, want %s completed", i, r, want.custom)
			}
			continue
		}
		if r.Error == nil || r.Error.Code != want.code || !strings.Contains(r.Error.Message, want.line) || r.CustomID != "" {
			t.Errorf("record %d: %+v (error %v), want %s naming %q", i, r, r.Error, want.code, want.line)
		}
	}
}

// TestBatchInputErrorKeepsAnswered: when reading the input fails, the
// lines already submitted are still answered and written before RunBatch
// returns the error.
func TestBatchInputErrorKeepsAnswered(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	// The answers come after the input failed.
	answerJobs(t, srv, 300*time.Millisecond)
	var lines []string
	for i := range 5 {
		lines = append(lines, batchLine(fmt.Sprintf("d%d", i)))
	}
	broken := errors.New("disk on fire")
	in := io.MultiReader(strings.NewReader(strings.Join(lines, "\n")+"\n\n"), errReader{broken})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	counts, err := c.RunBatch(ctx, in, &out, producer.BatchOpts{ID: "b1"})
	if !errors.Is(err, broken) || !strings.Contains(err.Error(), "line 7") {
		t.Errorf("error %v, want the input's, at line 7", err)
	}
	if n := strings.Count(out.String(), "\n"); counts != (producer.BatchCounts{Total: 5, Completed: 5}) || n != 5 {
		t.Errorf("counts %+v, %d records; want the 5 lines read answered:\n%s", counts, n, out.String())
	}
}
