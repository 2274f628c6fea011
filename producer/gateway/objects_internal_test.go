package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// downloadSize is the size of the batch files the download tests serve:
// several times the object store reader's flow-control window (a stalled
// read stopped at 2 MiB), as users' files are.
const downloadSize = 6 << 20

// objectsFixture is a gateway, without a worker, whose batch files the
// test writes itself (seedDownloads).
type objectsFixture struct {
	t   *testing.T
	g   *Gateway
	url string
}

// serveObjects serves a gateway on nc with cfg, and keys for tenant acme
// (key-acme), until the test ends.
func serveObjects(t *testing.T, nc *nats.Conn, cfg Config) *objectsFixture {
	t.Helper()
	keys, err := NewKeyring(KeyringConfig{Keys: map[string]string{"key-acme": "acme"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Keys, cfg.Logger = keys, workertest.Logger(t)
	g, err := New(nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(func() { srv.Close(); g.Close() })
	return &objectsFixture{t: t, g: g, url: srv.URL}
}

// download is a download of a batch file the test wrote.
type download struct {
	name string // the endpoint
	path string
	// want is the body; nil for the Anthropic results, mapped from the
	// native output (checkResults checks them).
	want []byte
}

// seededText is the text of line i of the Anthropic batch seedDownloads
// writes: 64 KiB.
func seededText(i int) string {
	s := fmt.Sprintf("Line %d, once upon a time. ", i)
	return strings.Repeat(s, (64<<10)/len(s)+1)[:64<<10]
}

// seededLines is JSONL of about size bytes, random, different for each
// seed.
func seededLines(size int, seed uint64) []byte {
	var b [32]byte
	b[0] = byte(seed)
	r := rand.NewChaCha8(b)
	pad := make([]byte, 1024)
	var out bytes.Buffer
	for i := 0; out.Len() < size; i++ {
		r.Read(pad)
		fmt.Fprintf(&out, `{"custom_id":"line-%d","pad":"%x"}`+"\n", i, pad[:512+int(pad[0])*2])
	}
	return out.Bytes()
}

// seedDownloads writes, as tenant acme's, an OpenAI file, an ended native
// batch with its output, and an ended Anthropic message batch with its
// native output, each of about downloadSize bytes, and returns their
// downloads: the file's content, the native output, the Anthropic results.
func (f *objectsFixture) seedDownloads() []download {
	f.t.Helper()
	ctx := context.Background()
	g := f.g
	fileID := newOpenAIID("file-")
	content := seededLines(downloadSize, 1)
	if _, err := g.putFile(ctx, "acme", fileID, "big.jsonl", purposeBatch, bytes.NewReader(content)); err != nil {
		f.t.Fatal(err)
	}
	native := seededLines(downloadSize, 2)
	f.seedBatch(&BatchState{ID: "big-native"}, map[string][]byte{"output": native})

	// An Anthropic batch of 100 requests with 64 KiB answers.
	id := newMessageBatchID()
	var in, out bytes.Buffer
	for i := range 100 {
		cid := fmt.Sprintf("req-%03d", i)
		fmt.Fprintf(&in, `{"custom_id":%q,"request":{"model":"stories260k"}}`+"\n", cid)
		json.NewEncoder(&out).Encode(producer.BatchRecord{CustomID: cid, JobID: producer.BatchJobID(id, cid),
			Result: &contracts.Result{Status: contracts.StatusCompleted, Text: seededText(i), StopReason: contracts.StopEndTurn}})
	}
	st := &BatchState{ID: id, API: "anthropic"}
	(&anthropicBatchExt{Requests: 100, ExpiresAt: time.Now().Add(time.Hour)}).setExt(st)
	f.seedBatch(st, map[string][]byte{"input": in.Bytes(), "output": out.Bytes()})

	return []download{
		{name: "openai file content", path: "/v1/files/" + fileID + "/content", want: content},
		{name: "native batch output", path: NativeBatches + "/big-native/output", want: native},
		{name: "anthropic batch results", path: AnthropicBatches + "/" + id + "/results"},
	}
}

// seedBatch stores st, ended, as tenant acme's, with its files by kind.
func (f *objectsFixture) seedBatch(st *BatchState, files map[string][]byte) {
	f.t.Helper()
	ctx := context.Background()
	for kind, b := range files {
		if _, err := f.g.batches.files.Put(ctx, jetstream.ObjectMeta{Name: batchFile("acme", st.ID, kind)}, bytes.NewReader(b)); err != nil {
			f.t.Fatal(err)
		}
	}
	now := time.Now().UTC()
	st.Tenant, st.Status, st.CreatedAt, st.UpdatedAt, st.EndedAt = "acme", "ended", now, now, now
	b, _ := json.Marshal(st)
	if _, err := f.g.batches.states.Create(ctx, batchKey("acme", st.ID), b); err != nil {
		f.t.Fatal(err)
	}
}

// get downloads path as acme with Go's HTTP client, reading the body to
// its end: the response, the bytes read, and the read's error. pause, if
// set, is called once the first MiB of the body is read.
func (f *objectsFixture) get(t *testing.T, path string, pause func()) (*http.Response, []byte, error) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, f.url+path, nil)
	req.Header.Set("Authorization", "Bearer key-acme")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	if pause != nil {
		if _, err := io.CopyN(&body, resp.Body, 1<<20); err != nil {
			return resp, body.Bytes(), err
		}
		pause()
	}
	_, err = io.Copy(&body, resp.Body)
	return resp, body.Bytes(), err
}

// checkWhole checks a download that succeeded: status 200, Content-Length
// and Repr-Digest the body's, and the body d's (or, for the Anthropic
// results, each request's result in order).
func checkWhole(t *testing.T, d download, resp *http.Response, body []byte, err error) {
	t.Helper()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d, %d bytes, %v", d.name, resp.StatusCode, len(body), err)
	}
	sum := sha256.Sum256(body)
	if got := resp.Header.Get("Content-Length"); got != strconv.Itoa(len(body)) {
		t.Fatalf("%s: Content-Length %s for %d bytes", d.name, got, len(body))
	}
	if got, want := resp.Header.Get("Repr-Digest"), "sha-256=:"+base64.StdEncoding.EncodeToString(sum[:])+":"; got != want {
		t.Fatalf("%s: Repr-Digest %s, want %s", d.name, got, want)
	}
	if d.want != nil {
		if !bytes.Equal(body, d.want) {
			t.Fatalf("%s: %d bytes, not the %d stored", d.name, len(body), len(d.want))
		}
		return
	}
	checkResults(t, body)
}

// checkResults checks the results of the Anthropic batch of seedDownloads.
func checkResults(t *testing.T, body []byte) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if len(lines) != 100 || len(body) < downloadSize {
		t.Fatalf("results: %d lines, %d bytes", len(lines), len(body))
	}
	for i, l := range lines {
		var r struct {
			CustomID string `json:"custom_id"`
			Result   struct {
				Type    string `json:"type"`
				Message struct {
					Content []struct{ Text string } `json:"content"`
				} `json:"message"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.CustomID != fmt.Sprintf("req-%03d", i) || r.Result.Type != "succeeded" ||
			len(r.Result.Message.Content) != 1 || r.Result.Message.Content[0].Text != seededText(i) {
			t.Fatalf("result %d: %.200s (%v)", i, l, err)
		}
	}
}

// checkBroken checks a download cut short: whatever the status, the read
// of the body failed, and what arrived is less than the whole.
func checkBroken(t *testing.T, d download, resp *http.Response, body []byte, err error) {
	t.Helper()
	if resp.StatusCode == http.StatusOK && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("%s: 200 with %d bytes of %s and read error %v; want the read to fail (unexpected EOF)",
			d.name, len(body), resp.Header.Get("Content-Length"), err)
	}
	if resp.StatusCode == http.StatusOK && strconv.Itoa(len(body)) == resp.Header.Get("Content-Length") {
		t.Fatalf("%s: all %d bytes arrived", d.name, len(body))
	}
	t.Logf("%s: %d, %d bytes of %s, %v", d.name, resp.StatusCode, len(body), resp.Header.Get("Content-Length"), err)
}

// sdkClients are the official SDKs on f's gateway as acme, without
// retries.
func (f *objectsFixture) sdkClients() (openai.Client, anthropic.Client) {
	return openai.NewClient(ooption.WithBaseURL(f.url+"/v1"), ooption.WithAPIKey("key-acme"), ooption.WithMaxRetries(0)),
		anthropic.NewClient(aoption.WithBaseURL(f.url), aoption.WithAPIKey("key-acme"), aoption.WithMaxRetries(0))
}

// sdkRead reads download d as the official SDKs do (the whole body; the
// Anthropic results line by line), returning what it read and its error.
func (f *objectsFixture) sdkRead(d download) ([]byte, error) {
	oc, ac := f.sdkClients()
	ctx := context.Background()
	switch {
	case strings.HasPrefix(d.path, "/v1/files/"):
		resp, err := oc.Files.Content(ctx, strings.Split(d.path, "/")[3])
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		return io.ReadAll(resp.Body)
	case strings.HasPrefix(d.path, AnthropicBatches):
		stream := ac.Messages.Batches.ResultsStreaming(ctx, strings.Split(d.path, "/")[4], anthropic.MessageBatchResultsParams{})
		defer stream.Close()
		var b bytes.Buffer
		for stream.Next() {
			b.WriteString(stream.Current().RawJSON())
			b.WriteByte('\n')
		}
		return b.Bytes(), stream.Err()
	}
	return nil, nil // no SDK reads the native output
}

// TestDownloadsWhole: a batch file of several MiB, downloaded through each
// endpoint that serves one (an OpenAI file's content, a native batch's
// output, an Anthropic batch's results), arrives whole, with its
// Content-Length and a Repr-Digest that checks, through Go's client and
// the official SDKs; HEAD answers the same headers.
func TestDownloadsWhole(t *testing.T) {
	t.Parallel()
	srv := natstest.Run(t)
	f := serveObjects(t, srv.Conn, Config{})
	for _, d := range f.seedDownloads() {
		resp, body, err := f.get(t, d.path, nil)
		checkWhole(t, d, resp, body, err)
		if got, err := f.sdkRead(d); err != nil || (got != nil && d.want != nil && !bytes.Equal(got, d.want)) {
			t.Fatalf("%s through the SDK: %d bytes, %v", d.name, len(got), err)
		} else if got != nil && d.want == nil && strings.Count(string(got), "\n") != 100 {
			t.Fatalf("%s through the SDK: %d results", d.name, strings.Count(string(got), "\n"))
		}
		req, _ := http.NewRequest(http.MethodHead, f.url+d.path, nil)
		req.Header.Set("Authorization", "Bearer key-acme")
		head, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		head.Body.Close()
		if head.StatusCode != 200 || head.ContentLength != int64(len(body)) || head.Header.Get("Repr-Digest") != resp.Header.Get("Repr-Digest") {
			t.Fatalf("HEAD %s: %d, %d bytes, %s", d.name, head.StatusCode, head.ContentLength, head.Header.Get("Repr-Digest"))
		}
	}
}

// runNoFlowControl starts a JetStream server whose user "gateway" may
// publish anything but flow-control replies ($JS.FC.>), as the shipped
// nats.conf once had it: the object store's reader, an ordered consumer
// with flow control, stalls after its first window. It returns a
// connection as that user.
func runNoFlowControl(t *testing.T) *nats.Conn {
	t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: t.TempDir(), JetStreamMaxMemory: 256 << 20, JetStreamMaxStore: 1 << 30,
		Users: []*server.User{{Username: "gateway", Password: "gateway", Permissions: &server.Permissions{
			Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.FC.>"}}}}}}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("gateway", "gateway"), nats.MaxReconnects(0),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// TestDownloadStalled: the reported failure. The gateway's NATS user
// cannot answer JetStream's flow control, so every read of a batch file
// stalls at its first window (a download was answered 200 with 2 MiB of
// its file). Each download fails visibly: a body already begun is cut
// short of its Content-Length, so that Go's client reads an unexpected
// EOF and the OpenAI SDK's read of the content fails; the Anthropic
// results, mapped before they are sent, are a 503 the SDK raises.
func TestDownloadStalled(t *testing.T) {
	t.Parallel()
	f := serveObjects(t, runNoFlowControl(t), Config{ObjectReadTimeout: 300 * time.Millisecond})
	for _, d := range f.seedDownloads() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			resp, body, err := f.get(t, d.path, nil)
			checkBroken(t, d, resp, body, err)
			if got, err := f.sdkRead(d); err == nil && got != nil {
				t.Fatalf("through the SDK: %d bytes and no error", len(got))
			} else {
				t.Logf("through the SDK: %v", err)
			}
		})
	}
}

// TestDownloadServerDown: the NATS server goes down in the middle of a
// download (its client has read 1 MiB of 24); the gateway's connection
// closes. The client's read of the body fails, short of the
// Content-Length, rather than ending as if the file were whole.
func TestDownloadServerDown(t *testing.T) {
	t.Parallel()
	for _, endpoint := range []string{"file", "native"} {
		t.Run(endpoint, func(t *testing.T) {
			t.Parallel()
			srv := natstest.Run(t)
			nc, _ := srv.Connect(t)
			f := serveObjects(t, nc, Config{ObjectReadTimeout: time.Second})
			d := f.seedBig(endpoint, 24<<20)
			resp, body, err := f.get(t, d.path, func() { srv.Server.Shutdown() })
			checkBroken(t, d, resp, body, err)
		})
	}
}

// TestDownloadRidesOutARestart: the NATS server restarts in the middle of
// a download (its client has read 1 MiB of 24): the gateway reads the
// file again once its connection is back, skipping what it sent, and the
// download arrives whole and checked.
func TestDownloadRidesOutARestart(t *testing.T) {
	t.Parallel()
	srv := natstest.RunWithOptions(t, &natstest.Options{Restartable: true})
	f := serveObjects(t, srv.Conn, Config{ObjectReadTimeout: 2 * time.Second})
	d := f.seedBig("file", 24<<20)
	resp, body, err := f.get(t, d.path, func() { srv.Restart(t, 200*time.Millisecond) })
	checkWhole(t, d, resp, body, err)
}

// seedBig writes a file of about size bytes for endpoint "file" (an
// OpenAI file) or "native" (a native batch's output) and returns its
// download.
func (f *objectsFixture) seedBig(endpoint string, size int) download {
	f.t.Helper()
	b := seededLines(size, 3)
	if endpoint == "native" {
		f.seedBatch(&BatchState{ID: "big"}, map[string][]byte{"output": b})
		return download{name: "native batch output", path: NativeBatches + "/big/output", want: b}
	}
	id := newOpenAIID("file-")
	if _, err := f.g.putFile(context.Background(), "acme", id, "big.jsonl", purposeBatch, bytes.NewReader(b)); err != nil {
		f.t.Fatal(err)
	}
	return download{name: "openai file content", path: "/v1/files/" + id + "/content", want: b}
}

// TestDownloadDigestMismatch: a file whose stored chunks no longer make
// it (its first chunk moved to its end: the same size, other bytes) is
// never served as whole: every read fails the object's SHA-256 check at
// its end, and the download, which held its last byte back until the
// check, is cut short of its Content-Length.
func TestDownloadDigestMismatch(t *testing.T) {
	t.Parallel()
	srv := natstest.Run(t)
	f := serveObjects(t, srv.Conn, Config{ObjectReadTimeout: 2 * time.Second})
	d := f.seedBig("native", downloadSize)
	ctx := context.Background()
	info, err := f.g.batches.files.GetInfo(ctx, batchFile("acme", "big", "output"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := srv.JS.Stream(ctx, "OBJ_"+BatchFiles)
	if err != nil {
		t.Fatal(err)
	}
	chunks := "$O." + BatchFiles + ".C." + info.NUID
	first, err := s.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(chunks))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.JS.Publish(ctx, chunks, first.Data); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMsg(ctx, first.Sequence); err != nil {
		t.Fatal(err)
	}
	resp, body, err := f.get(t, d.path, nil)
	checkBroken(t, d, resp, body, err)
}
