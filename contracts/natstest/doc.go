// Package natstest runs a real NATS server with JetStream inside a test
// process, so that tests of the producer, the worker and billing exercise
// real subjects, streams, consumers, dedupe and acks instead of mocks.
//
// Each call to Run starts its own server on a random loopback port with its
// store in t.TempDir(), connects one client, and registers a cleanup that
// closes the connections and shuts the server down. Servers are
// independent, so tests using them can run in parallel.
//
// RunCluster starts a real JetStream cluster instead (three nodes for the
// production layout) in the same process: nodes routed to each other on
// loopback, each with its own store, and a client that knows them all and
// reconnects. A test can shut a node down and restart it on its ports and
// store, to see what the loss of a stream's leader does:
//
//	c := natstest.RunCluster(t, 3)
//	contracts.EnsureStreams(ctx, c.JS, contracts.StreamsConfig{Replicas: 3})
//	info, _ := stream.Info(ctx)
//	i := c.NodeIndex(info.Cluster.Leader)
//	c.Shutdown(t, i)
//	// ... the others elect a leader; the client reconnects to them
//	c.Restart(t, i)
//
// Until is the module's way for a test to wait for something to happen
// (a result stored, a batch ended, a record billed): poll a condition
// against a deadline, never sleep.
//
// Example:
//
//	func TestSubmit(t *testing.T) {
//		t.Parallel()
//		ns := natstest.Run(t)
//		if err := contracts.EnsureStreams(t.Context(), ns.JS, contracts.StreamsConfig{}); err != nil {
//			t.Fatal(err)
//		}
//		// publish with ns.JS, or hand ns.URL to the code under test
//	}
//
// It imports nothing of ours (the nats-server module from outside); only
// tests import it.
package natstest
