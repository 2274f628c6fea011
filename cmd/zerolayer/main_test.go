package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/migrations/dbtest"
	"github.com/zerolayer/zerolayer/worker/engine"
	modelprompt "github.com/zerolayer/zerolayer/worker/model/prompt"
	"github.com/zerolayer/zerolayer/worker/model/store"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

func storiesPath(t *testing.T) string {
	t.Helper()
	p := filepath.Join("..", "..", "..", "shared", "models", "stories260K", "stories260K.gguf")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared model not present: %v", err)
	}
	return p
}

// capture runs a command with stdout redirected (tests using it are not
// parallel).
func capture(t *testing.T, run func(context.Context, []string) error, args ...string) (string, error) {
	t.Helper()
	var buf bytes.Buffer
	old := stdout
	stdout = &buf
	defer func() { stdout = old }()
	err := run(context.Background(), args)
	return buf.String(), err
}

func TestGenJSON(t *testing.T) {
	path := storiesPath(t)
	out, err := capture(t, runGen, "--model", path, "--prompt", "Once upon a time", "--max-tokens", "8", "--top-logprobs", "3", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got genOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	// The reference's first 8 greedy tokens for this prompt.
	if !slices.Equal(got.PromptIDs, []int32{1, 403, 407, 261, 378}) || !slices.Equal(got.OutputIDs, []int32{432, 383, 286, 261, 376, 298, 315, 421}) {
		t.Fatalf("ids: prompt %v output %v", got.PromptIDs, got.OutputIDs)
	}
	if got.Text != ", there was a little girl" || got.StopReason != engine.StopMaxTokens {
		t.Fatalf("text %q stop %q", got.Text, got.StopReason)
	}
	if got.Usage.InputTokens != 5 || got.Usage.OutputTokens != 8 || got.Usage.TimeToFirstTokenMs <= 0 {
		t.Fatalf("usage %+v", got.Usage)
	}
	if len(got.TopLogprobs) != 8 || len(got.TopLogprobs[0]) != 3 || got.TopLogprobs[0][0].ID != 432 || got.TopLogprobs[0][0].Logprob > 0 {
		t.Fatalf("top logprobs %+v", got.TopLogprobs)
	}
	// --prompt-ids take the same ids as given, and the JSON keys are stable.
	out2, err := capture(t, runGen, "--model", path, "--prompt-ids", "1,403,407,261,378", "--max-tokens", "8", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	json.Unmarshal([]byte(out2), &raw)
	for _, k := range []string{"prompt_ids", "output_ids", "text", "stop_reason", "usage"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("json output lacks %q", k)
		}
	}
	if !strings.Contains(out2, `"time_per_token_ms"`) || !strings.Contains(out2, ", there was a little girl") {
		t.Errorf("prompt-ids output: %s", out2)
	}
}

func TestGenText(t *testing.T) {
	path := storiesPath(t)
	out, err := capture(t, runGen, "--model", path, "--prompt", "Once upon a time", "--max-tokens", "8")
	if err != nil || out != ", there was a little girl\n" {
		t.Fatalf("%q %v", out, err)
	}
}

func TestGenErrors(t *testing.T) {
	path := storiesPath(t)
	var ue usageError
	tests := []struct {
		name  string
		args  []string
		check func(error) bool
	}{
		{"no prompt", []string{"--model", path}, func(err error) bool { return errors.As(err, &ue) }},
		{"both prompts", []string{"--model", path, "--prompt", "a", "--prompt-ids", "1"}, func(err error) bool { return errors.As(err, &ue) }},
		{"bad ids", []string{"--model", path, "--prompt-ids", "1,x"}, func(err error) bool { return errors.As(err, &ue) }},
		{"unknown model", []string{"--model", "no-such-model", "--prompt", "a"}, func(err error) bool { return errors.Is(err, store.ErrNotFound) }},
		{"prompt over the context", []string{"--model", path, "--prompt", strings.Repeat("dog ", 3000)}, func(err error) bool { return errors.Is(err, engine.ErrPromptTooLong) }},
		{"system without chat", []string{"--model", path, "--prompt", "a", "--system", "be nice"}, func(err error) bool { return errors.Is(err, modelprompt.ErrSystemWithoutChat) }},
		{"unknown preset", []string{"--model", path, "--prompt", "a", "--preset", "wild"}, func(err error) bool { return errors.As(err, &ue) }},
		{"bad format", []string{"--model", path, "--prompt", "a", "--format", "xml"}, func(err error) bool { return errors.As(err, &ue) }},
	}
	for _, tt := range tests {
		if _, err := capture(t, runGen, tt.args...); err == nil || !tt.check(err) {
			t.Errorf("%s: err %v", tt.name, err)
		}
	}
}

func TestGenChatPlainTemplate(t *testing.T) {
	path := storiesPath(t)
	// stories260K has no chat template, so the plain one renders the turn.
	out, err := capture(t, runGen, "--model", path, "--chat", "--system", "Be brief.", "--prompt", "Tell a story", "--max-tokens", "4", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got genOutput
	json.Unmarshal([]byte(out), &got)
	if len(got.PromptIDs) < 10 || got.PromptIDs[0] != 1 || len(got.OutputIDs) == 0 {
		t.Fatalf("chat prompt ids %v output %v", got.PromptIDs, got.OutputIDs)
	}
}

// TestGenConstrainedTopLogprobs: --top-logprobs with a constraint writes
// JSON (masked alternatives, -Inf, are left out, never written), and
// max_tokens inside the schema ends with max_tokens and an incomplete
// output, not a tool error.
func TestGenConstrainedTopLogprobs(t *testing.T) {
	path := storiesPath(t)
	schema := filepath.Join(t.TempDir(), "schema.json")
	if err := os.WriteFile(schema, []byte(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := capture(t, runGen, "--model", path, "--prompt", "Once upon a time", "--schema", schema, "--max-tokens", "10", "--top-logprobs", "5", "--format", "json")
	if err != nil {
		t.Fatalf("%v (output %q)", err, out)
	}
	var got genOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if got.StopReason != engine.StopMaxTokens || got.Error != nil || !got.Incomplete || !strings.Contains(got.IncompleteReason, "json_validator") {
		t.Fatalf("stop %q, error %v, incomplete %v %q", got.StopReason, got.Error, got.Incomplete, got.IncompleteReason)
	}
	if len(got.TopLogprobs) != 10 {
		t.Fatalf("%d steps of top logprobs, want 10", len(got.TopLogprobs))
	}
	short := false
	for _, step := range got.TopLogprobs {
		if len(step) == 0 || len(step) > 5 {
			t.Fatalf("a step with %d alternatives", len(step))
		}
		short = short || len(step) < 5
	}
	if !short {
		t.Errorf("no step left out a masked alternative: %v", got.TopLogprobs)
	}
}

// TestGenChatSystemTools: gen --chat --system applies the <tool> blocks as
// the worker does: they are tools, and not prompt text.
func TestGenChatSystemTools(t *testing.T) {
	path := storiesPath(t)
	plain, err := capture(t, runGen, "--model", path, "--chat", "--system", "Be brief.", "--prompt", "Tell a story", "--max-tokens", "6", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	system := "<tool name=\"suffix\"><param name=\"text\"> THE END</param></tool>\nBe brief."
	out, err := capture(t, runGen, "--model", path, "--chat", "--system", system, "--prompt", "Tell a story", "--max-tokens", "6", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var a, b genOutput
	json.Unmarshal([]byte(plain), &a)
	json.Unmarshal([]byte(out), &b)
	if !slices.Equal(a.PromptIDs, b.PromptIDs) {
		t.Errorf("the tool block reached the prompt: %v, without it %v", b.PromptIDs, a.PromptIDs)
	}
	if b.Text != a.Text+" THE END" || len(b.ToolReport) != 1 || b.ToolReport[0].Tool != "suffix" {
		t.Errorf("text %q (without the block %q), report %+v", b.Text, a.Text, b.ToolReport)
	}
	// A malformed block is refused like the worker refuses it.
	_, err = capture(t, runGen, "--model", path, "--chat", "--system", "<tool name=\"suffix\">", "--prompt", "a", "--max-tokens", "2")
	var ce *contracts.Error
	if !errors.As(err, &ce) || ce.Code != contracts.CodeInvalidRequest || ce.Field != "system" {
		t.Errorf("unclosed block: %v", err)
	}
	// An unknown parameter is refused with its path.
	_, err = capture(t, runGen, "--model", path, "--prompt", "a", "--max-tokens", "2", "--tools", `[{"name":"suffix","params":{"text":"!","foo":1}}]`)
	if !errors.As(err, &ce) || ce.Code != contracts.CodeInvalidRequest || ce.Field != "tools[0].params.foo" {
		t.Errorf("unknown param: %v", err)
	}
}

func TestModelsList(t *testing.T) {
	dir := filepath.Dir(storiesPath(t))
	t.Setenv("ZEROLAYER_MODEL_PATH", dir)
	out, err := capture(t, runModels, "list")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "stories260K") || !strings.Contains(out, "llama (5 layers, dim 64)") || !strings.Contains(out, "F32×48") {
		t.Fatalf("models list:\n%s", out)
	}
}

// runCLI runs a command line through run, as main does.
func runCLI(args ...string) (code int, out, errOut string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

// TestCLIConventions: every command, sub-subcommands included, answers -h
// with its help on stdout and status 0, and an unknown flag with the error
// and a hint on stderr and status 2.
func TestCLIConventions(t *testing.T) {
	var names []string
	for _, c := range commandTable() {
		names = append(names, c.name)
	}
	for _, name := range names {
		cmd := strings.Fields(name)
		for _, help := range []string{"-h", "--help", "help"} {
			code, out, errOut := runCLI(append(cmd, help)...)
			if code != 0 || !strings.HasPrefix(out, "usage: zerolayer "+name) || errOut != "" {
				t.Errorf("%s %s: status %d, stdout %q, stderr %q", name, help, code, out, errOut)
			}
		}
		code, out, errOut := runCLI(append(cmd, "--no-such-flag")...)
		if code != 2 || out != "" || !strings.Contains(errOut, "flag provided but not defined: -no-such-flag") ||
			!strings.Contains(errOut, "Run 'zerolayer "+name+" -h' for usage.") {
			t.Errorf("%s --no-such-flag: status %d, stdout %q, stderr %q", name, code, out, errOut)
		}
	}
	// `zerolayer help CMD` is `zerolayer CMD -h`.
	if code, out, _ := runCLI("help", "report"); code != 0 || !strings.Contains(out, "--batches") {
		t.Errorf("help report: status %d, %q", code, out)
	}
}

func TestCLIUsageErrors(t *testing.T) {
	tests := []struct {
		args     []string
		wantCode int
		want     string // in stderr
	}{
		{nil, 2, "usage: zerolayer COMMAND"},
		{[]string{"nope"}, 2, `unknown command "nope"`},
		{[]string{"models"}, 2, "zerolayer models: missing command"},
		{[]string{"models", "frob"}, 2, `zerolayer models: unknown command "frob"`},
		{[]string{"models", "pull"}, 2, "Run 'zerolayer models pull -h'"},
		{[]string{"migrate", "sideways"}, 2, `unknown command "sideways"`},
		{[]string{"keys", "add", "--tenant", "acme", "--file", ""}, 2, "give --file and --tenant"},
		{[]string{"keys", "revoke", "--file", "k"}, 2, "give --file and one key id"},
		{[]string{"gateway"}, 2, "zerolayer keys add"},
		{[]string{"batch", "--window", "many"}, 2, `invalid value "many" for flag -window`},
		{[]string{"report", "--tenant", "acme", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"report", "--tenant", "acme", "--batch", "b", "--from", "2026-11-01"}, 2, "give one of --from/--to, --month, --batch or --batches"},
		{[]string{"report", "--tenant", "acme"}, 2, "give a period"},
		{[]string{"gen", "--model", "x"}, 2, "give exactly one of --prompt and --prompt-ids"},
		{[]string{"version", "now"}, 2, `unexpected argument "now"`},
		{[]string{"worker", "--delta-tokens", "0"}, 2, "--delta-tokens 0: want 1 or more"},
		{[]string{"worker", "--model", "stories260k", "--cpu-kernels", "sse"}, 2, `--cpu-kernels "sse": want best or avx2`},
	}
	for _, tt := range tests {
		code, _, errOut := runCLI(tt.args...)
		if code != tt.wantCode || !strings.Contains(errOut, tt.want) {
			t.Errorf("%q: status %d, stderr %q; want %d and %q", tt.args, code, errOut, tt.wantCode, tt.want)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		code, out, _ := runCLI(args...)
		if code != 0 || !strings.HasPrefix(out, "zerolayer ") || !strings.Contains(out, runtime.Version()) {
			t.Errorf("%v: status %d, %q", args, code, out)
		}
	}
	bi := &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
		{Key: "vcs.modified", Value: "true"}, {Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "amd64"}}}
	if got, want := versionLine(bi), "zerolayer v1.2.3, git revision abc123 (2026-01-02T03:04:05Z) with uncommitted changes, go1.99 linux/amd64"; got != want {
		t.Errorf("versionLine = %q, want %q", got, want)
	}
}

// TestNATSSource: a command that connects to NATS says which server it
// uses and where that came from, without the password.
func TestNATSSource(t *testing.T) {
	t.Setenv("ZEROLAYER_DEV_FILE", filepath.Join(t.TempDir(), "dev.json"))
	tests := []struct {
		env, flag  string
		wantURL    string
		wantSource string
	}{
		{"", "", nats.DefaultURL, "default; set --nats-url or NATS_URL, or start zerolayer dev"},
		{"nats://u:secret@127.0.0.1:1", "", "nats://u:secret@127.0.0.1:1", "NATS_URL"},
		{"nats://127.0.0.1:2", "nats://127.0.0.1:1", "nats://127.0.0.1:1", "--nats-url"},
	}
	for _, tt := range tests {
		t.Setenv("NATS_URL", tt.env)
		nf := addNATSFlag(newFlags("submit"))
		nf.url = tt.flag
		if u, source := nf.resolve(); u != tt.wantURL || source != tt.wantSource {
			t.Errorf("env %q flag %q: %s (%s), want %s (%s)", tt.env, tt.flag, u, source, tt.wantURL, tt.wantSource)
		}
	}
	// A running zerolayer dev (its announce file names a live process)
	// comes after the flag and NATS_URL, before the default; a stale file
	// is ignored.
	t.Setenv("NATS_URL", "")
	announce := os.Getenv("ZEROLAYER_DEV_FILE")
	for _, pid := range []int{os.Getpid(), 1 << 30} {
		b := fmt.Sprintf(`{"pid": %d, "nats_url": "nats://127.0.0.1:3", "database_url": "postgres://x"}`, pid)
		if err := os.WriteFile(announce, []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
		u, source := addNATSFlag(newFlags("submit")).resolve()
		if live := pid == os.Getpid(); live && (u != "nats://127.0.0.1:3" || !strings.Contains(source, "the running zerolayer dev, pid")) ||
			!live && u != nats.DefaultURL {
			t.Errorf("announce file of pid %d: %s (%s)", pid, u, source)
		}
	}
	os.Remove(announce)
	// Nothing listens on port 1: the line comes first, then the failure.
	t.Setenv("NATS_URL", "nats://u:secret@127.0.0.1:1")
	code, _, errOut := runCLI("submit", "--tenant", "acme", "--model", "m", "--prompt", "hi")
	if want := "zerolayer submit: NATS nats://u:xxxxx@127.0.0.1:1 (NATS_URL)\n"; code != 1 || !strings.HasPrefix(errOut, want) || strings.Contains(errOut, "secret") {
		t.Errorf("submit: status %d, stderr %q", code, errOut)
	}
}

// schemaURL is the database URL of pool's schema, for --database-url.
func schemaURL(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	u, err := url.Parse(dbtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", pool.Config().ConnConfig.RuntimeParams["search_path"])
	u.RawQuery = q.Encode()
	return u.String()
}

// TestReportUnknownTenant: a report of a tenant billing has never heard of
// is a runtime error (status 1), not an empty report; a database never
// migrated gets a hint.
func TestReportUnknownTenant(t *testing.T) {
	migrated, empty := schemaURL(t, dbtest.Pool(t)), schemaURL(t, dbtest.EmptyPool(t))
	for _, args := range [][]string{
		{"--from", "2026-11-01", "--to", "2026-12-01"},
		{"--batches"},
		{"--batch", "b1"},
	} {
		code, out, errOut := runCLI(append([]string{"report", "--database-url", migrated, "--tenant", "ghost"}, args...)...)
		if code != 1 || out != "" || !strings.Contains(errOut, `zerolayer report: billing: unknown tenant "ghost"`) {
			t.Errorf("%v: status %d, stdout %q, stderr %q", args, code, out, errOut)
		}
		code, _, errOut = runCLI(append([]string{"report", "--database-url", empty, "--tenant", "ghost"}, args...)...)
		if code != 1 || !strings.Contains(errOut, "run 'zerolayer migrate up'") {
			t.Errorf("%v, not migrated: status %d, stderr %q", args, code, errOut)
		}
	}
}

// TestGenThinking: gen --chat on the hand-set thinking model
// (workertest.ThinkerPath, with the Qwen3 template) gives the <think>
// text apart as reasoning in its JSON; --thinking off renders the empty
// block, and the model answers straight away; --thinking on needs --chat
// and a template with the switch.
func TestGenThinking(t *testing.T) {
	path := workertest.ThinkerPath(t)
	for _, tc := range []struct {
		args      []string
		reasoning string
		ids       int
	}{
		{nil, workertest.ThinkerReasoning, 5},
		{[]string{"--thinking", "on"}, workertest.ThinkerReasoning, 5},
		{[]string{"--thinking", "off"}, "", 1},
	} {
		s, err := capture(t, runGen, append([]string{"--model", path, "--chat", "--prompt", "Is 221 prime?", "--max-tokens", "16", "--format", "json"}, tc.args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var out genOutput
		if err := json.Unmarshal([]byte(s), &out); err != nil {
			t.Fatal(err)
		}
		if out.Reasoning != tc.reasoning || out.Text != workertest.ThinkerAnswer || len(out.OutputIDs) != tc.ids {
			t.Errorf("%v: reasoning %q, text %q, %d ids", tc.args, out.Reasoning, out.Text, len(out.OutputIDs))
		}
	}
	for _, args := range [][]string{
		{"--model", path, "--prompt", "x", "--thinking", "on"},
		{"--model", storiesPath(t), "--chat", "--chat-template", "chatml", "--prompt", "x", "--thinking", "on"},
		{"--model", path, "--chat", "--prompt", "x", "--thinking", "maybe"},
	} {
		var ue usageError
		if _, err := capture(t, runGen, args...); !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}
