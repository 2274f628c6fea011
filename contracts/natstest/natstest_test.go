package natstest_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/zerolayer/zerolayer/contracts/natstest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestRun(t *testing.T) {
	t.Parallel()
	ns := natstest.Run(t)
	if !ns.Server.JetStreamEnabled() {
		t.Fatal("JetStream is not enabled")
	}
	ctx := t.Context()
	if _, err := ns.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ns.JS.Publish(ctx, "t.1", []byte("hello")); err != nil {
		t.Fatal(err)
	}

	// A second connection sees what the first stored.
	nc2, js2 := ns.Connect(t)
	if nc2.ConnectedUrl() == "" {
		t.Fatal("second connection not connected")
	}
	s, err := js2.Stream(ctx, "T")
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMsg(ctx, 1)
	if err != nil || string(m.Data) != "hello" {
		t.Fatalf("GetMsg = %v, %v", m, err)
	}

	// Core NATS works too.
	sub, err := nc2.SubscribeSync("core")
	if err != nil {
		t.Fatal(err)
	}
	// The server must know the subscription before the publish.
	if err := nc2.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := ns.Conn.Publish("core", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.NextMsg(5 * time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestServersAreIndependent(t *testing.T) {
	t.Parallel()
	a, b := natstest.Run(t), natstest.RunWithOptions(t, &natstest.Options{MaxPayload: 2048})
	if a.URL == b.URL {
		t.Fatalf("both servers at %s", a.URL)
	}
	if _, err := a.JS.CreateStream(t.Context(), jetstream.StreamConfig{Name: "ONLY_A", Subjects: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.JS.Stream(t.Context(), "ONLY_A"); err == nil {
		t.Error("stream of server a visible on server b")
	}
	if got := b.Conn.MaxPayload(); got != 2048 {
		t.Errorf("MaxPayload = %d, want 2048", got)
	}
	if err := b.Conn.Publish("big", make([]byte, 4096)); err != nats.ErrMaxPayload {
		t.Errorf("publish over max payload = %v", err)
	}
}
