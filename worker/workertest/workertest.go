package workertest

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/sched"
)

// ModelName is the name stories260K is served under.
const ModelName = "stories260k"

// NewExecutor serves stories260K one job at a time.
func NewExecutor(t testing.TB) *worker.InOrderExecutor {
	t.Helper()
	l := modeltest.LoadStories(t, 1)
	e, err := engine.New(l.Model, l.Tokenizer, engine.Config{KVBlocks: 256})
	if err != nil {
		t.Fatal(err)
	}
	return worker.NewInOrderExecutor(l.Model.Backend().Name(), &worker.ServedModel{Name: ModelName, Loaded: l, Engine: e})
}

// NewSchedExecutor serves stories260K through a scheduler, stopped at
// cleanup.
func NewSchedExecutor(t testing.TB, cfg sched.Config) *worker.SchedExecutor {
	t.Helper()
	l := modeltest.LoadStories(t, 1)
	s, err := sched.New(l.Model, l.Tokenizer, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	return worker.NewSchedExecutor(l.Model.Backend().Name(), contracts.Buckets{}, &worker.ScheduledModel{Name: ModelName, Loaded: l, Scheduler: s})
}

// Bundle is a JetStream server (or cluster) with the streams and a
// producer for each of two tenants.
type Bundle struct {
	// Srv is the server of a Bundle made by Setup; nil on a cluster.
	Srv *natstest.Server
	// Cluster is the cluster of a Bundle made by SetupCluster; nil on a
	// single server.
	Cluster *natstest.Cluster
	// Conn is the connection the producers use (Srv's or Cluster's), and
	// JS a JetStream context on it.
	Conn *nats.Conn
	JS   jetstream.JetStream
	// Client submits as tenant acme.
	Client *producer.Client
	// Other submits as tenant globex.
	Other *producer.Client
	// Streams is the configuration the streams were made with.
	Streams contracts.StreamsConfig

	connect func(testing.TB) (*nats.Conn, jetstream.JetStream)
}

// Setup starts JetStream with the streams, and producers for two tenants
// (acme and globex) that know stories260K as ModelName.
func Setup(t testing.TB, streams contracts.StreamsConfig) *Bundle {
	t.Helper()
	return SetupOptions(t, streams, nil)
}

// SetupOptions is Setup on a server started with o (nil: the defaults);
// with o.Restartable the test may restart the server (b.Srv.Restart)
// under the workers and clients, whose connections come back.
func SetupOptions(t testing.TB, streams contracts.StreamsConfig, o *natstest.Options) *Bundle {
	t.Helper()
	srv := natstest.RunWithOptions(t, o)
	b := &Bundle{Srv: srv, Conn: srv.Conn, JS: srv.JS, connect: srv.Connect}
	b.setup(t, streams)
	return b
}

// SetupCluster is Setup on a real three-node JetStream cluster
// (natstest.RunCluster), for streams with Replicas up to 3: the producers
// and the workers StartWorker starts connect to every node and reconnect
// to another when theirs goes (Cluster.Shutdown).
//
//	b := workertest.SetupCluster(t, contracts.StreamsConfig{Replicas: 3})
func SetupCluster(t testing.TB, streams contracts.StreamsConfig) *Bundle {
	t.Helper()
	c := natstest.RunCluster(t, 3)
	b := &Bundle{Cluster: c, Conn: c.Conn, JS: c.JS, connect: c.Connect}
	b.setup(t, streams)
	return b
}

// setup makes the streams and the producers on b's connection.
func (b *Bundle) setup(t testing.TB, streams contracts.StreamsConfig) {
	t.Helper()
	if err := contracts.EnsureStreams(context.Background(), b.JS, streams); err != nil {
		t.Fatal(err)
	}
	mk := func(tenant string) *producer.Client {
		c, err := producer.New(b.Conn, producer.Config{Tenant: tenant, Models: map[string]string{ModelName: modeltest.StoriesPath(t)}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	b.Client, b.Other, b.Streams = mk("acme"), mk("globex"), streams
}

// Connect opens another connection to the bundle's server or cluster,
// closed at cleanup.
func (b *Bundle) Connect(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return b.connect(t)
}

// StartWorker starts a worker on its own connection, stopped at cleanup
// (with 10 seconds to finish).
func (b *Bundle) StartWorker(t testing.TB, exec worker.Executor, id string) (*worker.Worker, *nats.Conn) {
	t.Helper()
	return b.StartWorkerConfig(t, exec, worker.Config{ID: id})
}

// StartWorkerConfig is StartWorker with a configuration; its Streams,
// IdlePoll (50 milliseconds) and Logger (Logger(t)) are filled in when
// unset, and its Models (ModelName) when the executor does not describe
// its own (a test's wrapper of one).
func (b *Bundle) StartWorkerConfig(t testing.TB, exec worker.Executor, cfg worker.Config) (*worker.Worker, *nats.Conn) {
	t.Helper()
	if _, ok := exec.(worker.ModelDescriber); !ok && len(cfg.Models) == 0 {
		cfg.Models = []string{ModelName}
	}
	if cfg.Streams.Replicas == 0 && cfg.Streams.AckWait == 0 {
		cfg.Streams = b.Streams
	}
	if cfg.IdlePoll == 0 {
		cfg.IdlePoll = 50 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = Logger(t)
	}
	nc, _ := b.connect(t)
	w, err := worker.New(nc, exec, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		w.Stop(ctx)
	})
	return w, nc
}

// WaitDrained waits until the jobs stream is empty: every job queued so
// far has run to its end and been acknowledged, so its usage record and
// result are published (a worker publishes them before its ack). A test
// that counts what ran calls it first instead of sleeping.
func (b *Bundle) WaitDrained(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	natstest.Until(t, 60*time.Second, "the jobs stream drained", func() bool {
		s, err := b.JS.Stream(ctx, contracts.StreamJobs)
		if err != nil {
			if b.Cluster != nil {
				return false // between two stream leaders: ask again
			}
			t.Fatal(err)
		}
		return s.CachedInfo().State.Msgs == 0
	})
}

// StreamMsgs returns the messages of a stream on a subject: at least as
// many as the stream held on it when StreamMsgs asked (on a cluster,
// reading them can take a moment to start), and any stored after them
// until none comes for 300 milliseconds. It gives up on the ones it has
// not read only after 10 s without a message (a slow machine under -race
// reads a few hundred from a cluster in more than 10 s in all).
func StreamMsgs(t testing.TB, js jetstream.JetStream, stream, subject string) []jetstream.Msg {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	var want uint64
	for _, n := range info.State.Subjects {
		want += n
	}
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	// On a cluster a pull can find the consumer not yet in place (no
	// responders) or its node gone; the ordered consumer resumes after
	// the last message it handed out.
	var out []jetstream.Msg
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := cons.Next(jetstream.FetchMaxWait(300 * time.Millisecond))
		if err != nil {
			// Fewer than asked for: removed meanwhile (a work queue's)
			// once the deadline has passed.
			if uint64(len(out)) >= want || time.Now().After(deadline) {
				return out
			}
			continue
		}
		out = append(out, m)
		deadline = time.Now().Add(10 * time.Second)
	}
}

// Logger sends warnings and errors to the test log.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// StreamInfo returns the info of stream name on b's cluster once the
// stream has a leader (between two leaders the look-up is tried again, for
// up to 20 s).
func (b *Bundle) StreamInfo(t testing.TB, name string) *jetstream.StreamInfo {
	t.Helper()
	var info *jetstream.StreamInfo
	natstest.Until(t, 20*time.Second, name+" info", func() bool {
		s, err := b.JS.Stream(context.Background(), name)
		if err != nil {
			return false
		}
		info = s.CachedInfo()
		return info.Cluster != nil && info.Cluster.Leader != ""
	})
	return info
}

// RequireR3 fails the test unless each named stream has three replicas:
// a leader and two peers.
func (b *Bundle) RequireR3(t testing.TB, names ...string) {
	t.Helper()
	for _, name := range names {
		if info := b.StreamInfo(t, name); info.Config.Replicas != 3 || len(info.Cluster.Replicas) != 2 {
			t.Fatalf("%s: replicas %d, cluster %+v: not R3", name, info.Config.Replicas, info.Cluster)
		}
	}
}
