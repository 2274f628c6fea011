package main

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/zerolayer/zerolayer/contracts/natstest"
)

func TestRedactNATS(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://alice:s3cret@nats:4222", "nats://alice:xxxxx@nats:4222"},
		{"nats://s3cret@nats:4222", "nats://xxxxx@nats:4222"},
		{"tls://alice:s3cret@a:4222, nats://s3cret@b:4222,nats://c:4222", "tls://alice:xxxxx@a:4222,nats://xxxxx@b:4222,nats://c:4222"},
		{"alice:s3cret@nats:4222", "nats://alice:xxxxx@nats:4222"},
		{"nats://al%ice:s3%zz@nats:4222", "xxxxx@nats:4222"},
		{"", ""},
	} {
		if got := redactNATS(tc.in); got != tc.want || strings.Contains(got, "s3") {
			t.Errorf("redactNATS(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestConnEventsLogged: a connection that loses its server and gets it
// back logs both, and an asynchronous error (here a slow consumer); no
// line shows the password of its URL.
func TestConnEventsLogged(t *testing.T) {
	t.Parallel()
	srv := natstest.RunWithOptions(t, &natstest.Options{Restartable: true})
	var buf natstest.LogBuffer
	ev := &connEvents{log: slog.New(slog.NewTextHandler(&buf, nil))}
	u := strings.Replace(srv.URL, "nats://", "nats://alice:s3cret@", 1)
	nc, err := nats.Connect(u, append(ev.options(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ev.connected(nc)
	srv.Restart(t, 0)
	natstest.Until(t, 30*time.Second, "the reconnect logged", func() bool { return strings.Contains(buf.String(), "NATS reconnected") })

	block := make(chan struct{})
	defer close(block)
	sub, err := nc.Subscribe("slow", func(*nats.Msg) { <-block })
	if err != nil {
		t.Fatal(err)
	}
	sub.SetPendingLimits(1, 1<<20)
	for i := range 5 {
		nc.Publish("slow", fmt.Appendf(nil, "%d", i))
	}
	nc.Flush()
	natstest.Until(t, 30*time.Second, "the slow consumer logged", func() bool { return strings.Contains(buf.String(), "NATS asynchronous error") })

	logs := buf.String()
	for _, want := range []string{"NATS disconnected; reconnecting", "server=nats://alice:xxxxx@127.0.0.1:", "NATS reconnected", "subject=slow"} {
		if !strings.Contains(logs, want) {
			t.Errorf("no %q in the log:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "s3cret") {
		t.Errorf("the password is in the log:\n%s", logs)
	}
}
