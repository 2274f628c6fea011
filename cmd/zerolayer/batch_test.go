package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// TestBatchCommand runs `zerolayer batch` on a file with a line the
// contract rejects: every line gets its record, the summary names the
// failure, and the status is 1 (a script sees the batch did not all
// succeed); the same batch without that line exits 0.
func TestBatchCommand(t *testing.T) {
	b := workertest.Setup(t, contracts.StreamsConfig{})
	b.StartWorker(t, workertest.NewSchedExecutor(t, sched.Config{}), "w1")
	t.Setenv("NATS_URL", b.Srv.URL)
	t.Setenv("ZEROLAYER_DEV_FILE", filepath.Join(t.TempDir(), "dev.json"))
	dir := t.TempDir()
	write := func(name string, bad bool) string {
		var lines []string
		for i := range 20 {
			raw, _ := json.Marshal(map[string]any{"custom_id": fmt.Sprintf("d%d", i), "request": map[string]any{
				"model": workertest.ModelName, "max_tokens": 3, "messages": []any{map[string]string{"role": "user", "content": "Once upon a time"}}}})
			lines = append(lines, string(raw))
		}
		if bad {
			lines = append(lines, `{"custom_id": "bad", "request": {"model": "`+workertest.ModelName+`", "messages": []}}`)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		bad  bool
		code int
	}{{false, 0}, {true, 1}} {
		in := write(fmt.Sprintf("in-%v.jsonl", tc.bad), tc.bad)
		out := in + ".out"
		code, _, errOut := runCLI("batch", "--tenant", "acme", "--id", fmt.Sprintf("b-%v", tc.bad), "--input", in, "--output", out)
		recs, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		n := strings.Count(string(recs), "\n")
		t.Logf("bad line %v: status %d, %d records\n%s", tc.bad, code, n, errOut)
		want := 20
		if tc.bad {
			want = 21
		}
		if code != tc.code || n != want || tc.bad && !strings.Contains(errOut, "1 of 21 lines failed or were invalid") {
			t.Errorf("bad line %v: status %d (want %d), %d records (want %d); stderr:\n%s", tc.bad, code, tc.code, n, want, errOut)
		}
	}
}
