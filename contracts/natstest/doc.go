// Package natstest runs a real NATS server with JetStream inside a test
// process, so that tests of the producer, the worker and billing exercise
// real subjects, streams, consumers, dedupe and acks instead of mocks.
//
// Each call to Run starts its own server on a random loopback port with its
// store in t.TempDir(), connects one client, and registers a cleanup that
// closes the connections and shuts the server down. Servers are
// independent, so tests using them can run in parallel.
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
