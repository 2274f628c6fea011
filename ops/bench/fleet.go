package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/fleet"
	"github.com/zerolayer/zerolayer/producer"
)

// FleetConfig configures Fleet: multi-turn conversations from two tenants
// through one NATS server to a fleet of worker processes, once with one
// worker and once with Workers, so that what a fleet costs a conversation
// (its earlier turns recomputed on another worker) shows against one
// worker holding every conversation.
type FleetConfig struct {
	// Worker returns the command that runs one worker on natsURL serving
	// model (a path), named id. Required (zerolayer bench runs its own
	// binary's worker command).
	Worker func(natsURL, model, id string) *exec.Cmd
	// Models are the model files the workers serve, one per worker in
	// turn; conversations alternate between them. Required.
	Models []string
	// Workers is the fleet's size at the second level. Defaults to 4.
	Workers int
	// Conversations and Turns are the load: each conversation's turns run
	// one after another (the reply appended, then the next question),
	// all conversations at once. Default to 64 and 6.
	Conversations, Turns int
	// MaxTokens is each turn's max_tokens. Defaults to 32.
	MaxTokens int
	// KillWorker, with more than one worker, kills one worker (SIGKILL)
	// once half the turns are done and reports the longest time without a
	// finished turn after it.
	KillWorker bool
	// Dir holds the NATS servers' state and the workers' logs. Required.
	Dir string
	// Progress receives a line per level. Defaults to io.Discard.
	Progress io.Writer
}

// FleetLevel is one fleet size's run.
type FleetLevel struct {
	Workers  int     `json:"workers"`
	Turns    int     `json:"turns"`
	Seconds  float64 `json:"seconds"`
	JobsPerS float64 `json:"jobs_per_s"`
	// HitRate is cached ÷ input tokens of every turn after the first.
	HitRate float64 `json:"hit_rate"`
	// SameWorker is the share of later turns run by the worker that ran
	// the turn before.
	SameWorker float64 `json:"same_worker"`
	// LaterTTFT and LaterQueue are the later turns' times to first token
	// and queue times (usage records), in ms.
	LaterTTFT  Dist `json:"later_ttft_ms"`
	LaterQueue Dist `json:"later_queue_ms"`
	// TenantTokens are the output tokens per tenant.
	TenantTokens map[string]int `json:"tenant_tokens"`
	// Failed counts turns that did not complete, by code.
	Failed map[string]int `json:"failed,omitempty"`
	// KilledAtS is when a worker was killed (seconds from the start), and
	// LongestGapS the longest time after it without a finished turn.
	KilledAtS   float64 `json:"killed_at_s,omitempty"`
	LongestGapS float64 `json:"longest_gap_s,omitempty"`
}

// FleetResults are both levels and the fleet's ratios to one worker.
type FleetResults struct {
	Levels []FleetLevel `json:"levels"`
	// HitRateRatio is the fleet's hit rate ÷ one worker's; TTFTRatio its
	// later turns' TTFT p50 ÷ one worker's.
	HitRateRatio float64 `json:"hit_rate_ratio"`
	TTFTRatio    float64 `json:"ttft_p50_ratio"`
}

// Fleet runs the conversations on one worker, then on cfg.Workers, each
// level on a fresh NATS server and fresh worker processes, and writes a
// table to w.
func Fleet(ctx context.Context, cfg FleetConfig, w io.Writer) (*FleetResults, error) {
	if cfg.Worker == nil || len(cfg.Models) == 0 || cfg.Dir == "" {
		return nil, errors.New("bench: FleetConfig needs Worker, Models and Dir")
	}
	cfg.Workers = cmpOr(cfg.Workers, 4)
	cfg.Conversations = cmpOr(cfg.Conversations, 64)
	cfg.Turns = cmpOr(cfg.Turns, 6)
	cfg.MaxTokens = cmpOr(cfg.MaxTokens, 32)
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	res := &FleetResults{}
	for i, n := range []int{1, cfg.Workers} {
		fmt.Fprintf(cfg.Progress, "fleet: %d worker(s), %d conversations of %d turns ...\n", n, cfg.Conversations, cfg.Turns)
		l, err := fleetLevel(ctx, cfg, n, filepath.Join(cfg.Dir, fmt.Sprint("level", i)))
		if err != nil {
			return nil, err
		}
		res.Levels = append(res.Levels, *l)
	}
	one, many := res.Levels[0], res.Levels[1]
	res.HitRateRatio = ratio(many.HitRate, one.HitRate)
	res.TTFTRatio = ratio(many.LaterTTFT.P50, one.LaterTTFT.P50)
	fmt.Fprintf(w, "%8s %6s %8s %8s %9s %11s %22s %22s %s\n", "workers", "turns", "seconds", "jobs/s", "hit rate", "same worker", "later TTFT p50/p99 ms", "later queue p50/p99 ms", "failed")
	for _, l := range res.Levels {
		fmt.Fprintf(w, "%8d %6d %8.1f %8.1f %8.1f%% %10.1f%% %11.0f / %-8.0f %11.0f / %-8.0f %v\n", l.Workers, l.Turns, l.Seconds, l.JobsPerS,
			100*l.HitRate, 100*l.SameWorker, l.LaterTTFT.P50, l.LaterTTFT.P99, l.LaterQueue.P50, l.LaterQueue.P99, failedText(l.Failed))
	}
	fmt.Fprintf(w, "%d workers ÷ 1: hit rate %.2f×, later turns' TTFT p50 %.2f×; output tokens by tenant %v\n", many.Workers, res.HitRateRatio, res.TTFTRatio, many.TenantTokens)
	if many.KilledAtS > 0 {
		fmt.Fprintf(w, "a worker killed (SIGKILL) %.1f s in: longest time without a finished turn after it %.2f s\n", many.KilledAtS, many.LongestGapS)
	}
	return res, nil
}

func cmpOr(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// fleetTurn is one finished turn.
type fleetTurn struct {
	conv, turn int
	res        *contracts.Result
	err        error
	at         time.Time
}

func fleetLevel(ctx context.Context, cfg FleetConfig, workers int, dir string) (*FleetLevel, error) {
	srv, err := server.NewServer(&server.Options{ServerName: "zerolayer-fleet", Host: "127.0.0.1", Port: server.RANDOM_PORT,
		JetStream: true, StoreDir: filepath.Join(dir, "nats"), NoSigs: true, NoLog: true})
	if err != nil {
		return nil, err
	}
	go srv.Start()
	defer srv.Shutdown()
	if !srv.ReadyForConnections(10 * time.Second) {
		return nil, errors.New("bench: the fleet's NATS server did not start")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	if err := contracts.EnsureStreams(ctx, js, contracts.StreamsConfig{}); err != nil {
		return nil, err
	}
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			p.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range procs {
			done := make(chan struct{})
			go func() { p.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				p.Process.Kill()
			}
		}
	}()
	for i := range workers {
		id := fmt.Sprintf("fleet-w%d", i)
		c := cfg.Worker(srv.ClientURL(), cfg.Models[i%len(cfg.Models)], id)
		log, err := os.Create(filepath.Join(dir, id+".log"))
		if err != nil {
			return nil, err
		}
		defer log.Close()
		c.Stdout, c.Stderr = log, log
		if err := c.Start(); err != nil {
			return nil, fmt.Errorf("bench: start worker %s: %w", id, err)
		}
		procs = append(procs, c)
	}
	// The served names, from the fleet once every worker has announced.
	fw := fleet.New(js)
	if err := fw.Start(ctx); err != nil {
		return nil, err
	}
	defer fw.Stop()
	deadline := time.Now().Add(2 * time.Minute)
	for len(fw.Workers()) < workers {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("bench: %d of %d workers live after 2 minutes (logs in %s)", len(fw.Workers()), workers, dir)
		}
		time.Sleep(100 * time.Millisecond)
	}
	paths := map[string]string{} // served name → file, for the producers' token counts
	for _, wi := range fw.Workers() {
		var i int
		if _, err := fmt.Sscanf(wi.WorkerID, "fleet-w%d", &i); err != nil {
			continue
		}
		for _, m := range wi.Models {
			paths[m.Name] = cfg.Models[i%len(cfg.Models)]
		}
	}
	names := fw.Served()
	tenants := []string{"acme", "globex"}
	clients := map[string]*producer.Client{}
	for _, t := range tenants {
		c, err := producer.New(nc, producer.Config{Tenant: t, Models: paths})
		if err != nil {
			return nil, err
		}
		defer c.Close()
		clients[t] = c
	}
	questions := []string{"Once upon a time", "What did Tom see?", "Then what happened?", "Who came to help?", "What did they say?", "How did it end?"}
	var mu sync.Mutex
	var turns []fleetTurn
	start := time.Now()
	var killedAt time.Time
	half := cfg.Conversations * cfg.Turns / 2
	var wg sync.WaitGroup
	for c := range cfg.Conversations {
		wg.Go(func() {
			tenant := tenants[c%len(tenants)]
			zero := 0.0
			req := &contracts.JobRequest{Model: names[c%len(names)], MaxTokens: cfg.MaxTokens, Temperature: &zero,
				System: fmt.Sprintf("You tell story %d of %d about a cat named Tom who lived in a big red house with a garden.", c, cfg.Conversations)}
			for k := range cfg.Turns {
				req.ID = ""
				req.Messages = append(req.Messages, contracts.Message{Role: contracts.RoleUser, Content: questions[k%len(questions)]})
				t := fleetTurn{conv: c, turn: k}
				id, err := clients[tenant].Submit(ctx, req, nil)
				if err == nil {
					wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
					t.res, err = clients[tenant].Wait(wctx, id)
					cancel()
				}
				t.err, t.at = err, time.Now()
				mu.Lock()
				turns = append(turns, t)
				kill := cfg.KillWorker && workers > 1 && killedAt.IsZero() && len(turns) >= half
				if kill {
					killedAt = time.Now()
				}
				mu.Unlock()
				if kill {
					procs[len(procs)-1].Process.Kill()
				}
				if err != nil || t.res.Status != contracts.StatusCompleted {
					return
				}
				req.Messages = append(req.Messages, contracts.Message{Role: contracts.RoleAssistant, Content: t.res.Text})
			}
		})
	}
	wg.Wait()
	l := &FleetLevel{Workers: workers, Turns: len(turns), Seconds: time.Since(start).Seconds(), TenantTokens: map[string]int{}, Failed: map[string]int{}}
	l.JobsPerS = float64(len(turns)) / l.Seconds
	workerOf := map[[2]int]string{}
	var cached, input, same, later int
	var ttft, queue []float64
	for _, t := range turns {
		switch {
		case t.err != nil:
			l.Failed[string(contracts.ErrorFrom(t.err).Code)]++
			continue
		case t.res.Status != contracts.StatusCompleted || t.res.Usage == nil:
			code := "no_usage"
			if t.res.Error != nil {
				code = string(t.res.Error.Code)
			}
			l.Failed[code]++
			continue
		}
		u := t.res.Usage
		workerOf[[2]int{t.conv, t.turn}] = u.WorkerID
		l.TenantTokens[u.Tenant] += u.OutputTokens
	}
	for _, t := range turns {
		if t.err != nil || t.res.Usage == nil || t.turn == 0 {
			continue
		}
		u := t.res.Usage
		later++
		cached += u.CachedInputTokens
		input += u.InputTokens
		ttft = append(ttft, u.TimeToFirstTokenMs)
		queue = append(queue, u.QueueMs)
		if workerOf[[2]int{t.conv, t.turn - 1}] == u.WorkerID {
			same++
		}
	}
	l.HitRate = ratio(float64(cached), float64(input))
	l.SameWorker = ratio(float64(same), float64(later))
	l.LaterTTFT, l.LaterQueue = dist(ttft), dist(queue)
	if !killedAt.IsZero() {
		l.KilledAtS = killedAt.Sub(start).Seconds()
		var ends []time.Time
		for _, t := range turns {
			if t.at.After(killedAt) {
				ends = append(ends, t.at)
			}
		}
		sort.Slice(ends, func(i, j int) bool { return ends[i].Before(ends[j]) })
		prev := killedAt
		for _, e := range ends {
			l.LongestGapS = max(l.LongestGapS, e.Sub(prev).Seconds())
			prev = e
		}
	}
	if len(l.Failed) == 0 {
		l.Failed = nil
	}
	return l, nil
}

func failedText(m map[string]int) string {
	if len(m) == 0 {
		return "0"
	}
	return fmt.Sprint(m)
}
