// Package devstack runs the whole zerolayer system in one process, for
// development, demos, benchmarks and tests: an embedded NATS server with
// JetStream and the zerolayer streams, a PostgreSQL with the migrations
// applied (the one given, else the local server, else a private cluster
// started with the machine's initdb and pg_ctl), a worker serving models
// (worker.OpenModels), the billing service and, optionally, the HTTP
// gateway. It is what `zerolayer dev` runs; production runs each part as
// its own service (docker-compose.yml). RunDemo is `zerolayer dev --demo`:
// two tenants' mixed batch through a started stack, streamed, waited for
// and billed, with the reports printed.
//
// Data flows as in production: a producer on Conn submits to ZL_JOBS, the
// worker runs the job and publishes its events, result and usage, billing
// ingests the usage into Pool and rates it with River.
//
//	st, err := devstack.New(devstack.Config{Dir: dir, Models: worker.ModelsConfig{ModelDirs: dirs}})
//	if err != nil {
//		return err
//	}
//	if err := st.Start(ctx); err != nil {
//		return err
//	}
//	defer st.Stop(stopCtx)
//	c, _ := producer.New(st.Conn(), producer.Config{Tenant: "acme", Models: st.Models().Paths()})
//
// It takes everything as Config (environment variables are the command
// line's business) and may import every zerolayer package that runs in a
// process: contracts, worker, billing, migrations, producer (the demo's
// client) and producer/gateway; nothing imports it but cmd, ops/bench and
// tests.
package devstack
