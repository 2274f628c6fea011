package natstest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts/natstest"
)

// TestRunCluster: three nodes form one JetStream cluster; an R3 stream
// keeps every message through the loss of its leader, takes new ones
// while the node is down, and the node rejoins on its ports and catches
// up.
func TestRunCluster(t *testing.T) {
	t.Parallel()
	c := natstest.RunCluster(t, 3)
	ctx := t.Context()
	if c.Size() != 3 {
		t.Fatalf("Size = %d", c.Size())
	}
	for i := range 3 {
		srv := c.Node(i)
		if srv == nil || !srv.JetStreamEnabled() {
			t.Fatalf("node %d: not running with JetStream", i)
		}
		if got := srv.NumRoutes(); got < 2 {
			t.Errorf("node %d has %d routes, want ≥ 2", i, got)
		}
	}
	if c.MetaLeader() == "" {
		t.Fatal("no meta leader")
	}
	s, err := c.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	publish := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			// A publish during a leader election may time out; the
			// message id makes its retry safe.
			natstest.Until(t, 20*time.Second, fmt.Sprintf("message %d stored", i), func() bool {
				pctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				_, err := c.JS.Publish(pctx, "t.x", []byte("m"), jetstream.WithMsgID(fmt.Sprint(i)))
				return err == nil
			})
		}
	}
	publish(0, 10)

	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream cluster info = %+v, want a leader and two replicas", info.Cluster)
	}
	leader := c.NodeIndex(info.Cluster.Leader)
	if leader < 0 {
		t.Fatalf("leader %q is no node", info.Cluster.Leader)
	}
	c.Shutdown(t, leader)
	if c.Node(leader) != nil {
		t.Fatal("Node of a shut down node is not nil")
	}
	publish(10, 20)
	natstest.Until(t, 20*time.Second, "a new stream leader", func() bool {
		info, err := s.Info(ctx)
		return err == nil && info.Cluster != nil && info.Cluster.Leader != "" && c.NodeIndex(info.Cluster.Leader) != leader
	})

	c.Restart(t, leader)
	if got := c.Node(leader).NumRoutes(); got < 2 {
		t.Errorf("restarted node has %d routes, want ≥ 2", got)
	}
	// The restarted node catches up: every replica is current.
	natstest.Until(t, 20*time.Second, "every replica current", func() bool {
		info, err := s.Info(ctx)
		if err != nil || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
			return false
		}
		for _, r := range info.Cluster.Replicas {
			if !r.Current {
				return false
			}
		}
		return info.State.Msgs == 20
	})
	// A connection to the restarted node alone reads the stream.
	nc, err := nats.Connect(c.Node(leader).ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := js.Stream(ctx, "T")
	if err != nil {
		t.Fatal(err)
	}
	if got := s2.CachedInfo().State.Msgs; got != 20 {
		t.Errorf("stream holds %d messages, want 20", got)
	}
}
