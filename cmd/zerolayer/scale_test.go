package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/producer/gateway"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
)

// asBinary is the environment variable that makes the test binary run as
// the zerolayer binary (TestMain): the tests start workers and gateways
// as processes of their own, which they can kill -9.
const asBinary = "ZEROLAYER_TEST_AS_BINARY"

// process is a zerolayer command running as a process of its own, its
// output in a log file.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// startProcess runs the test binary as `zerolayer args...` with env added
// to this process's environment; it is killed when the test ends (or the
// test process dies).
func startProcess(t *testing.T, dir, name string, env []string, args ...string) *process {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &process{name: name, log: filepath.Join(dir, fmt.Sprintf("%s-%d.log", name, time.Now().UnixNano())), done: make(chan struct{})}
	f, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(self, args...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.Env = append(append(os.Environ(), asBinary+"=1"), env...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			b, _ := os.ReadFile(p.log)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("---- %s (%s), its log's end:\n%s", p.name, p.log, b)
		}
	})
	return p
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *process) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// TestBatchesAtUserScaleAcrossGatewayKill runs what a bulk user brings
// through the shipped NATS config (ops/nats/nats.conf; the gateway, the
// worker and the tenant each with their own user, the tenant in its own
// account): an OpenAI batch of 5,000 lines (5.4 MB of output) and an
// Anthropic message batch of 5,000 requests (5.5 MB) at once, on a worker
// process and a gateway process that is killed with SIGKILL while they
// run and started again. (The gateway's reads of more than 2 MiB stalled
// on the shipped config before it granted flow control.) Both batches end; their request counts never
// go backwards as a client polls them; the downloaded outputs hold every
// line once (compared line by line against the inputs), every one a
// success; and no role needed a subject its permissions do not grant.
func TestBatchesAtUserScaleAcrossGatewayKill(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 jobs through processes: not in -short")
	}
	const lines = 5000
	model := modeltest.StoriesPath(t)
	ns := natstest.RunShipped(t, filepath.Join("..", "..", "ops", "nats", "nats.conf"), "worker", "billing", "gateway")
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	keysFile := filepath.Join(dir, "api-keys")
	key, entry, err := gateway.NewKey("acme", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := gateway.AppendKeyFile(keysFile, entry); err != nil {
		t.Fatal(err)
	}
	env := []string{"ZEROLAYER_MODEL_PATH=" + filepath.Dir(model), "ZEROLAYER_DEV_FILE=" + filepath.Join(dir, "nodev.json")}
	startProcess(t, dir, "worker", env, "worker", "--nats-url", ns.URL("worker"), "--model", model, "--id", "scale-w1", "--limits=false")
	op := ns.Connect(t, "operator")
	ojs, _ := jetstream.New(op)
	natstest.Until(t, 60*time.Second, "the worker provisions the streams", func() bool {
		_, err := ojs.Stream(ctx, contracts.StreamJobs)
		return err == nil
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	base := "http://" + addr
	startGateway := func() *process {
		p := startProcess(t, dir, "gateway", env, "gateway", "--nats-url", ns.URL("gateway"), "--listen", addr, "--keys", keysFile,
			"--batch-lease", "3s", "--limits=false")
		natstest.Until(t, 60*time.Second, "the gateway serves", func() bool {
			resp, err := http.Get(base + "/healthz")
			if err == nil {
				resp.Body.Close()
			}
			return err == nil && resp.StatusCode == 200
		})
		return p
	}
	gw := startGateway()
	oc := openai.NewClient(ooption.WithBaseURL(base+"/v1"), ooption.WithAPIKey(key), ooption.WithMaxRetries(0))
	ac := anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))

	// The inputs: short documents, each asking for a short answer.
	prompt := func(i int) string {
		return fmt.Sprintf("Document %d. Once upon a time there was a %s who lived in a %s.", i,
			[]string{"cat", "dog", "girl", "boy", "bird"}[i%5], []string{"house", "forest", "town", "boat"}[i%4])
	}
	var in bytes.Buffer
	for i := range lines {
		fmt.Fprintf(&in, `{"custom_id":"oa-%05d","method":"POST","url":"/v1/chat/completions","body":{"model":"stories260k","max_tokens":256,"messages":[{"role":"user","content":%q}]}}`+"\n", i, prompt(i))
	}
	file, err := oc.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(in.Bytes()), "docs.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	ob, err := oc.Batches.New(ctx, openai.BatchNewParams{InputFileID: file.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatal(err)
	}
	var reqs []anthropic.MessageBatchNewParamsRequest
	for i := range lines {
		reqs = append(reqs, anthropic.MessageBatchNewParamsRequest{CustomID: fmt.Sprintf("an-%05d", i), Params: anthropic.MessageBatchNewParamsRequestParams{
			Model: "stories260k", MaxTokens: 300, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt(i)))}}})
	}
	mb, err := ac.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{Requests: reqs})
	if err != nil {
		t.Fatal(err)
	}

	// Poll both as a client would; kill the gateway once a fifth of the
	// lines are answered, and start another.
	var mu sync.Mutex
	var backwards []string
	var lastOA, lastAN int64
	var oDone, aDone bool
	var outputFile string
	killed := false
	start := time.Now()
	for !(oDone && aDone) {
		if ctx.Err() != nil {
			t.Fatalf("the batches did not end in time: OpenAI %d, Anthropic %d of %d answered", lastOA, lastAN, lines)
		}
		time.Sleep(250 * time.Millisecond)
		if !oDone {
			if b, err := oc.Batches.Get(ctx, ob.ID); err == nil {
				n := b.RequestCounts.Completed + b.RequestCounts.Failed
				mu.Lock()
				if n < lastOA {
					backwards = append(backwards, fmt.Sprintf("OpenAI %d → %d", lastOA, n))
				}
				lastOA = max(lastOA, n)
				mu.Unlock()
				switch b.Status {
				case openai.BatchStatusCompleted:
					oDone, outputFile = true, b.OutputFileID
				case openai.BatchStatusFailed, openai.BatchStatusExpired, openai.BatchStatusCancelled:
					t.Fatalf("OpenAI batch %s: %s", b.Status, b.RawJSON())
				}
			}
		}
		if !aDone {
			if b, err := ac.Messages.Batches.Get(ctx, mb.ID, anthropic.MessageBatchGetParams{}); err == nil {
				c := b.RequestCounts
				n := c.Succeeded + c.Errored + c.Canceled + c.Expired
				if n < lastAN {
					backwards = append(backwards, fmt.Sprintf("Anthropic %d → %d", lastAN, n))
				}
				lastAN = max(lastAN, n)
				aDone = b.ProcessingStatus == anthropic.MessageBatchProcessingStatusEnded
			}
		}
		if !killed && lastOA+lastAN >= 2*lines/5 {
			t.Logf("%v: kill -9 the gateway at %d + %d answered lines", time.Since(start).Round(time.Millisecond), lastOA, lastAN)
			gw.kill()
			killed = true
			gw = startGateway()
		}
	}
	t.Logf("%v: both batches ended", time.Since(start).Round(time.Millisecond))
	if !killed {
		t.Fatal("the batches ended before the gateway was killed")
	}
	if len(backwards) > 0 {
		t.Errorf("request counts went backwards: %v", backwards)
	}

	// The OpenAI output through the SDK, line by line.
	resp, err := oc.Files.Content(ctx, outputFile)
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("downloading the output: %v after %d bytes", err, len(out))
	}
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec struct {
			CustomID string `json:"custom_id"`
			Response struct {
				StatusCode int `json:"status_code"`
				Body       struct {
					Choices []struct {
						Message struct{ Content string }
					}
				}
			}
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("output line %d: %v", len(seen)+1, err)
		}
		if rec.Response.StatusCode != 200 || len(rec.Response.Body.Choices) != 1 || rec.Response.Body.Choices[0].Message.Content == "" {
			t.Errorf("output line %s: %s", rec.CustomID, sc.Bytes())
		}
		seen[rec.CustomID]++
	}
	t.Logf("OpenAI output: %d lines, %d bytes", len(seen), len(out))
	checkEveryLineOnce(t, "OpenAI", "oa-", seen, lines)
	if len(out) < 5e6 {
		t.Errorf("the OpenAI output is %d bytes; the test is meant for ≥ 5 MB", len(out))
	}

	// The Anthropic results through the SDK's stream.
	stream := ac.Messages.Batches.ResultsStreaming(ctx, mb.ID, anthropic.MessageBatchResultsParams{})
	seen = map[string]int{}
	resultBytes := 0
	for stream.Next() {
		r := stream.Current()
		resultBytes += len(r.RawJSON()) + 1
		if r.Result.Type != "succeeded" || len(r.Result.Message.Content) != 1 {
			t.Errorf("result %s: %s", r.CustomID, r.RawJSON())
		}
		seen[r.CustomID]++
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("the results: %v", err)
	}
	stream.Close()
	t.Logf("Anthropic results: %d lines, %d bytes", len(seen), resultBytes)
	if resultBytes < 5e6 {
		t.Errorf("the Anthropic results are %d bytes; the test is meant for ≥ 5 MB", resultBytes)
	}
	checkEveryLineOnce(t, "Anthropic", "an-", seen, lines)

	// A download cut short by the gateway's death is an error to the
	// SDK, never a short file: read a part, kill -9, read on.
	resp, err = oc.Files.Content(ctx, outputFile)
	if err != nil {
		t.Fatal(err)
	}
	part := make([]byte, 64<<10)
	if _, err := io.ReadFull(resp.Body, part); err != nil {
		t.Fatal(err)
	}
	gw.kill()
	rest, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := append(part, rest...); err == nil && !bytes.Equal(got, out) {
		t.Errorf("a download cut short by the gateway's death read as complete: %d of %d bytes, no error", len(got), len(out))
	} else {
		t.Logf("the download cut short: %d of %d bytes, then %v", len(got), len(out), err)
	}
	if v := ns.Violations(); len(v) > 0 {
		t.Errorf("permission violations: %q", v)
	}
}

// checkEveryLineOnce checks that seen counts each of the ids prefix00000
// … once and nothing else.
func checkEveryLineOnce(t *testing.T, what, prefix string, seen map[string]int, lines int) {
	t.Helper()
	var missing, twice []string
	for i := range lines {
		id := fmt.Sprintf("%s%05d", prefix, i)
		switch seen[id] {
		case 0:
			missing = append(missing, id)
		case 1:
		default:
			twice = append(twice, id)
		}
		delete(seen, id)
	}
	if len(missing) > 0 || len(twice) > 0 || len(seen) > 0 {
		t.Errorf("%s output: %d lines missing (%s), %d more than once (%s), %d not asked for", what,
			len(missing), strings.Join(missing[:min(5, len(missing))], " "), len(twice), strings.Join(twice[:min(5, len(twice))], " "), len(seen))
	}
}
