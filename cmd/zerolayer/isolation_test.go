package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/producer/gateway"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// TestTenantsCannotTouchEachOther runs the shipped NATS config with a real
// worker (stories260K) and the gateway. Tenant globex submits jobs from its
// own NATS account and a batch through the gateway; meanwhile tenant acme,
// which knows globex's job and batch ids, tries to cancel, read and stall
// them through every interface: raw NATS from its account, the Go client,
// the gateway with its own key, and a batch of its own under the same batch
// id. globex's jobs all complete with its own output; acme's cancels stop
// only acme's jobs of those ids; acme's same-id batch runs as acme's.
func TestTenantsCannotTouchEachOther(t *testing.T) {
	storiesPath := modeltest.StoriesPath(t) // skips without ../shared
	_, connect := shippedNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	w, err := worker.New(connect("worker"), workertest.NewSchedExecutor(t, sched.Config{}),
		worker.Config{ID: "w1", Provision: true, Concurrency: 8, IdlePoll: 50 * time.Millisecond, Logger: workertest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(context.Background())

	keys, err := gateway.NewKeyring(gateway.KeyringConfig{Keys: map[string]string{"k-acme": "acme", "k-globex": "globex"}})
	if err != nil {
		t.Fatal(err)
	}
	models := map[string]string{workertest.ModelName: storiesPath}
	gw, err := gateway.New(connect("gateway"), gateway.Config{Keys: keys, Models: models})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	hs := httptest.NewServer(gw)
	defer hs.Close()
	call := func(key, method, path, body string) (int, []byte) {
		req, _ := http.NewRequestWithContext(ctx, method, hs.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}

	const jobs = 12
	request := func(id string, tokens int) *contracts.JobRequest {
		return &contracts.JobRequest{ID: id, Model: workertest.ModelName, MaxTokens: tokens, Seed: ptr(uint64(7)),
			Messages: []contracts.Message{{Role: "user", Content: "Once upon a time"}}}
	}
	var batch bytes.Buffer
	for i := range 6 {
		line, _ := json.Marshal(map[string]any{"custom_id": fmt.Sprint("l", i), "request": request("", 16)})
		batch.Write(append(line, '\n'))
	}

	// acme cancels globex's ids before globex submits them, through its
	// own client (naming acme's jobs of those ids) and raw NATS (on
	// globex's subjects, which its account cannot reach).
	acmeNC := connect("acme")
	acme := producerFor(t, acmeNC, "acme")
	ajs, _ := jetstream.New(acmeNC)
	for i := range jobs {
		id := fmt.Sprint("job-", i)
		if err := acme.Cancel(ctx, id); err != nil {
			t.Fatalf("acme cancels its own %s: %v", id, err)
		}
		pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		if _, err := ajs.Publish(pctx, contracts.CancelSubject("globex", id), nil); err == nil {
			t.Errorf("acme's cancel on globex's subject for %s was stored", id)
		}
		pcancel()
	}

	globex := producerFor(t, connect("globex"), "globex")
	for i := range jobs {
		if _, err := globex.Submit(ctx, request(fmt.Sprint("job-", i), 24), nil); err != nil {
			t.Fatal(err)
		}
	}
	if code, body := call("k-globex", "POST", "/v1/batches?id=nightly", batch.String()); code != 202 {
		t.Fatalf("globex's batch: %d %s", code, body)
	}

	// While globex's jobs run: acme submits its own jobs of the same ids
	// (its cancels stop them), asks for globex's ids through the gateway
	// and the client, cancels through the gateway, and runs a batch of
	// its own under globex's batch id.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range jobs {
			id := fmt.Sprint("job-", i)
			if _, err := acme.Submit(ctx, request(id, 24), nil); err != nil {
				t.Errorf("acme submits its own %s: %v", id, err)
			}
			if code, body := call("k-acme", "POST", "/v1/jobs/"+id+"/cancel", ""); code != 202 && code != 200 {
				t.Errorf("acme's gateway cancel of its own %s: %d %s", id, code, body)
			}
			if code, body := call("k-acme", "GET", "/v1/jobs/"+id, ""); strings.Contains(string(body), "globex") {
				t.Errorf("acme's gateway read of %s shows globex's job: %d %s", id, code, body)
			}
			if res, err := acme.Result(ctx, id); err != nil && !errors.Is(err, producer.ErrPending) || res != nil && res.Tenant != "acme" {
				t.Errorf("acme's Result(%s) = %+v, %v", id, res, err)
			}
		}
		if code, body := call("k-acme", "POST", "/v1/batches?id=nightly", batch.String()); code != 202 {
			t.Errorf("acme's batch under globex's batch id: %d %s", code, body)
		}
		for i := range 6 {
			call("k-acme", "POST", "/v1/jobs/nightly-l"+fmt.Sprint(i)+"/cancel", "") // acme's own batch lines
		}
	}()

	// globex's jobs all complete, as globex's.
	for i := range jobs {
		id := fmt.Sprint("job-", i)
		res, err := globex.Wait(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != contracts.StatusCompleted || res.Tenant != "globex" || res.Text == "" {
			t.Errorf("globex's %s: %+v", id, res)
		}
	}
	wg.Wait()
	batchDone := func(key string) map[string]any {
		var st map[string]any
		natstest.Until(t, 2*time.Minute, key+"'s batch nightly to end", func() bool {
			_, body := call(key, "GET", "/v1/zl/batches/nightly", "")
			json.Unmarshal(body, &st)
			return st["status"] == "ended"
		})
		return st
	}
	if st := batchDone("k-globex"); fmt.Sprint(st["request_counts"]) != fmt.Sprint(map[string]any{"total": 6.0, "completed": 6.0, "failed": 0.0, "canceled": 0.0, "invalid": 0.0}) {
		t.Errorf("globex's batch: %v", st)
	}
	_, out := call("k-globex", "GET", "/v1/zl/batches/nightly/output", "")
	if n := strings.Count(string(out), `"tenant":"globex","status":"completed","text"`); n != 6 || strings.Contains(string(out), `"tenant":"acme"`) {
		t.Errorf("globex's batch output has %d completed lines: %s", n, out)
	}
	batchDone("k-acme") // acme's own batch of the same id ends too, whatever acme canceled of it

	// acme's cancels stopped acme's jobs of those ids, and only those.
	for i := range jobs {
		id := fmt.Sprint("job-", i)
		res, err := acme.Wait(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != contracts.StatusCanceled || res.Tenant != "acme" {
			t.Errorf("acme's own %s after acme canceled it: %+v", id, res)
		}
	}
}

func ptr[T any](v T) *T { return &v }
