package fleet_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/fleet"
	"github.com/zerolayer/zerolayer/contracts/natstest"
)

// TestHolderNow: a holder the watch has not applied yet (here: written
// after the watch stopped following) is found by HolderNow's look-up, not
// by Holder; a key nobody holds, or held by a worker that is not live, has
// no holder.
func TestHolderNow(t *testing.T) {
	s := natstest.Run(t)
	_, js := s.Connect(t)
	ctx := context.Background()
	cfg := contracts.StreamsConfig{}
	workers, err := js.CreateKeyValue(ctx, cfg.WorkersBucketConfig())
	if err != nil {
		t.Fatal(err)
	}
	prefixes, err := js.CreateKeyValue(ctx, cfg.PrefixesBucketConfig())
	if err != nil {
		t.Fatal(err)
	}
	info, _ := json.Marshal(contracts.WorkerInfo{WorkerID: "w1", Models: []contracts.WorkerModel{{Name: "m"}}})
	if _, err := workers.Put(ctx, contracts.ModelToken("w1"), info); err != nil {
		t.Fatal(err)
	}
	w := fleet.New(js).WithPrefixes()
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	w.Stop() // nothing written from here on reaches the watch by itself
	const key, other, stale = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210", "00000000000000000000000000000000"
	if _, err := prefixes.Put(ctx, key, []byte(contracts.ModelToken("w1"))); err != nil {
		t.Fatal(err)
	}
	if h := w.Holder(key); h != "" {
		t.Fatalf("Holder %q before any look-up: the watch was stopped", h)
	}
	if h := w.HolderNow(ctx, key); h != contracts.ModelToken("w1") {
		t.Fatalf("HolderNow = %q, want %q", h, contracts.ModelToken("w1"))
	}
	if h := w.Holder(key); h != contracts.ModelToken("w1") {
		t.Errorf("Holder after HolderNow = %q: the look-up was not kept", h)
	}
	if h := w.HolderNow(ctx, other); h != "" {
		t.Errorf("HolderNow of a key nobody holds = %q", h)
	}
	if _, err := prefixes.Put(ctx, stale, []byte(contracts.ModelToken("gone"))); err != nil {
		t.Fatal(err)
	}
	if h := w.HolderNow(ctx, stale); h != "" {
		t.Errorf("HolderNow of a key held by a worker that is not live = %q", h)
	}
}
