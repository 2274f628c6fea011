package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/producer/gateway"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// TestBatchOutputReadBack: a batch whose stored output does not read back
// whole (here a chunk of it deleted once it is stored, as a chunk stored
// twice across a leader change spoils it) is run again, its lines
// answered from their stored results, and ends with an output that
// downloads whole; nothing runs or is billed twice.
func TestBatchOutputReadBack(t *testing.T) {
	b := workertest.Setup(t, contracts.StreamsConfig{})
	b.StartWorker(t, workertest.NewSchedExecutor(t, sched.Config{}), "w1")
	var once sync.Once
	spoiled := make(chan struct{})
	defer gateway.SetAfterOutputStored(func(tenant, id string) {
		once.Do(func() {
			defer close(spoiled)
			ctx := context.Background()
			obs, err := b.Srv.JS.ObjectStore(ctx, gateway.BatchFiles)
			if err != nil {
				t.Error(err)
				return
			}
			info, err := obs.GetInfo(ctx, tenant+"/"+id+"/output.jsonl")
			if err != nil {
				t.Error(err)
				return
			}
			s, err := b.Srv.JS.Stream(ctx, "OBJ_"+gateway.BatchFiles)
			if err != nil {
				t.Error(err)
				return
			}
			m, err := s.GetLastMsgForSubject(ctx, "$O."+gateway.BatchFiles+".C."+info.NUID)
			if err == nil {
				err = s.DeleteMsg(ctx, m.Sequence)
			}
			if err != nil {
				t.Error(err)
			}
		})
	})()
	gw, f := startGateway(t, b, gateway.Config{ObjectReadTimeout: time.Second, BatchLease: time.Second})
	t.Cleanup(func() { gw.Close() })
	ctx := context.Background()
	const lines = 40
	var in strings.Builder
	for i := 0; i < lines; i++ {
		fmt.Fprintf(&in, `{"custom_id":"l-%d","request":{"model":"stories260k","messages":[{"role":"user","content":"Once upon a time %d"}],"max_tokens":4}}`+"\n", i, i)
	}
	if resp, body := f.do(ctx, "POST", "/v1/zl/batches?id=rb", "key-acme", in.String()); resp.StatusCode != 202 {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	<-spoiled
	st := f.waitBatch(ctx, "rb")
	if st.Error != "" || st.Counts.Completed != lines {
		t.Fatalf("ended batch %+v", st)
	}
	resp, body := f.do(ctx, "GET", "/v1/zl/batches/rb/output", "key-acme", "")
	if got := strings.Count(string(body), "\n"); resp.StatusCode != 200 || got != lines {
		t.Fatalf("output: %d, %d lines", resp.StatusCode, got)
	}
	b.WaitDrained(t)
	if n := len(workertest.StreamMsgs(t, b.Srv.JS, contracts.StreamUsage, contracts.UsageSubject("acme"))); n != lines {
		t.Fatalf("%d usage records for %d jobs", n, lines)
	}
}
