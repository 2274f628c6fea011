// Package workertest is test support for the packages that run a real
// worker: an embedded JetStream server (or, with SetupCluster, a real
// three-node cluster) with the streams, producers for two tenants, workers
// serving stories260K on the CPU backend (in order or through a
// scheduler), and the helpers to read back what they published. The
// worker's own tests and the gateway's use it; only tests import it.
//
//	b := workertest.Setup(t, contracts.StreamsConfig{})
//	b.StartWorker(t, workertest.NewExecutor(t), "w1")
//	id, _ := b.Client.Submit(ctx, req, nil)
package workertest
