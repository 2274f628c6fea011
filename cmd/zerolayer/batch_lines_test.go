package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// TestBatchCommandHugeLines runs `zerolayer batch` on 1,000 good lines
// with a 5 MB line, a 50 MB line and blank lines among them (the sizes
// users bring): every good line completes, each huge line is its own
// request_too_large record naming its line as an editor numbers it, and
// the status is 1; --status counts the huge lines invalid, and the
// progress total counts them too.
func TestBatchCommandHugeLines(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 55 MB input file")
	}
	b := workertest.Setup(t, contracts.StreamsConfig{})
	b.StartWorker(t, workertest.NewSchedExecutor(t, sched.Config{}), "w1")
	t.Setenv("ZEROLAYER_DEV_FILE", filepath.Join(t.TempDir(), "dev.json"))
	dir := t.TempDir()
	in := filepath.Join(dir, "in put.jsonl")
	f, err := os.Create(in)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	line := 0
	writeLine := func(s string) {
		line++
		w.WriteString(s + "\n")
	}
	// huge writes a well-formed batch line of about size bytes, streamed:
	// under a higher limit it would be a job.
	huge := func(id string, size int64) {
		line++
		fmt.Fprintf(w, `{"custom_id": %q, "request": {"model": %q, "max_tokens": 1, "messages": [{"role": "user", "content": "`, id, workertest.ModelName)
		io.Copy(w, io.LimitReader(repeatByte('a'), size))
		w.WriteString(`"}]}}` + "\r\n")
	}
	type bad struct {
		id   string
		line int
	}
	var bads []bad
	var want []string // custom_ids in record order, "" for a huge line
	for i := range 1000 {
		switch i {
		case 10, 500:
			writeLine("")
			writeLine("  \t")
		case 300:
			huge("big5", 5_000_000)
			bads, want = append(bads, bad{"big5", line}), append(want, "")
		case 700:
			writeLine("")
			huge("big50", 50_000_000)
			bads, want = append(bads, bad{"big50", line}), append(want, "")
			writeLine("")
		}
		id := fmt.Sprintf("d%04d", i)
		raw, _ := json.Marshal(map[string]any{"custom_id": id, "request": map[string]any{
			"model": workertest.ModelName, "max_tokens": 1, "messages": []any{map[string]string{"role": "user", "content": "Once"}}}})
		writeLine(string(raw))
		want = append(want, id)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := countLines(in); n != 1002 || err != nil {
		t.Errorf("countLines: %d, %v; want 1002 (the huge lines too, no blank ones)", n, err)
	}

	out := filepath.Join(dir, "out.jsonl")
	code, _, errOut := runCLI("batch", "--nats-url", b.Srv.URL, "--tenant", "acme", "--id", "huge", "--input", in, "--output", out, "--quiet")
	if code != 1 || !strings.Contains(errOut, "2 of 1002 lines failed or were invalid") {
		t.Errorf("status %d (want 1); stderr:\n%s", code, errOut)
	}
	of, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer of.Close()
	var recs []producer.BatchRecord
	for dec := json.NewDecoder(of); dec.More(); {
		var r producer.BatchRecord
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d", len(recs), len(want))
	}
	next := 0
	for i, r := range recs {
		if want[i] != "" {
			if r.CustomID != want[i] || r.Result == nil || r.Result.Status != contracts.StatusCompleted {
				t.Errorf("record %d: %+v, want %s completed", i, r, want[i])
			}
			continue
		}
		bl := bads[next]
		next++
		if r.Error == nil || r.Error.Code != contracts.CodeRequestTooLarge || !strings.HasPrefix(r.Error.Message, fmt.Sprintf("line %d ", bl.line)) {
			t.Errorf("record %d, for %s at line %d: %+v (error %v)", i, bl.id, bl.line, r, r.Error)
		}
	}

	code, stdout, errOut := runCLI("batch", "--status", "--nats-url", b.Srv.URL, "--tenant", "acme", "--id", "huge", "--input", in)
	if want := "batch huge: 1002 lines: 1000 completed, 0 failed, 0 canceled, 0 pending, 2 invalid\n"; code != 0 || stdout != want {
		t.Errorf("--status: status %d, %q, want %q; stderr:\n%s", code, stdout, want, errOut)
	}
}

// repeatByte reads as an endless run of one byte.
type repeatByte byte

func (r repeatByte) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// TestBatchResumeCommand: the command printed after an interrupted batch
// is one a shell runs as it was given (paths with spaces and quotes, the
// server, a window that is not the default) and never shows a password or
// token.
func TestBatchResumeCommand(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name                 string
		natsURL, env         string // env: $NATS_URL when the command runs
		window               int
		input, output        string
		quiet                bool
		wantArgs             []string
		wantNote, secretGone string
	}{
		{name: "defaults", window: defaultBatchWindow, input: "in.jsonl",
			wantArgs: []string{"--tenant", "acme", "--id", "b1", "--input", "in.jsonl"}},
		{name: "every flag", natsURL: "nats://10.0.0.5:4222", window: 8, input: "my docs/it's in.jsonl", output: "/tmp/out dir/o.jsonl", quiet: true,
			wantArgs: []string{"--nats-url", "nats://10.0.0.5:4222", "--tenant", "acme", "--id", "b1", "--window", "8", "--input", "my docs/it's in.jsonl", "--output", "/tmp/out dir/o.jsonl", "--quiet"}},
		{name: "password", natsURL: "nats://alice:s3cret@h:4222", env: "nats://alice:s3cret@h:4222", window: defaultBatchWindow, input: "in.jsonl",
			wantArgs: []string{"--nats-url", "nats://alice:s3cret@h:4222", "--tenant", "acme", "--id", "b1", "--input", "in.jsonl"},
			wantNote: "@h:4222 ", secretGone: "s3cret"},
		{name: "token", natsURL: "tls://tok3n@h1:4222,nats://h2:4222", env: "x", window: defaultBatchWindow, input: "-",
			wantArgs: []string{"--nats-url", "x", "--tenant", "acme", "--id", "b1", "--input", "-"},
			wantNote: "@h1:4222,nats://h2:4222 ", secretGone: "tok3n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd, note := resumeCommand(tc.natsURL, "acme", "b1", tc.window, tc.input, tc.output, tc.quiet)
			t.Logf("%s (note %q)", cmd, note)
			if tc.secretGone != "" && strings.Contains(cmd+note, tc.secretGone) {
				t.Errorf("the credentials are shown: %s%s", cmd, note)
			}
			if !strings.Contains(note, tc.wantNote) {
				t.Errorf("note %q, want it to name %q", note, tc.wantNote)
			}
			prefix, ok := strings.CutPrefix(cmd, "zerolayer batch ")
			if !ok {
				t.Fatalf("command %q", cmd)
			}
			// The shell's words of the command, as the command would get them.
			sh := exec.Command("sh", "-c", `for a in `+prefix+`; do printf '%s\0' "$a"; done`)
			sh.Env = append(os.Environ(), "NATS_URL="+tc.env)
			got, err := sh.Output()
			if err != nil {
				t.Fatalf("sh: %v", err)
			}
			if args := strings.Split(strings.TrimSuffix(string(got), "\x00"), "\x00"); strings.Join(args, "|") != strings.Join(tc.wantArgs, "|") {
				t.Errorf("the shell reads\n%q\nwant\n%q", args, tc.wantArgs)
			}
		})
	}
}
