package bench

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/fleet"
	"github.com/zerolayer/zerolayer/migrations"
	"github.com/zerolayer/zerolayer/ops/devstack"
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
	// Documents are a batch submitted with the conversations, one job
	// each, behind one shared instruction of about 300 words: a batch's
	// prefix, which every worker that runs one of them holds. Defaults to
	// 64; negative: none.
	Documents int
	// KillWorker, with more than one worker, kills one worker (SIGKILL)
	// once half the turns are done and reports the longest time without a
	// finished turn after it.
	KillWorker bool
	// Node, when set, returns the command that runs one NATS server with
	// a configuration file (zerolayer nats-server): the fleet then runs on
	// a cluster of three such processes, streams of three replicas, and
	// NodeLoss kills the ZL_JOBS stream leader's node (SIGKILL) once a
	// third of the turns are done, restarting it 10 s later. Without it,
	// one NATS server runs in this process.
	Node     func(config string) *exec.Cmd
	NodeLoss bool
	// DatabaseURL, with Billing and Gateway, runs billing and the HTTP
	// gateway as processes beside the workers at each level: billing on
	// a schema of its own in that database (made and migrated per level,
	// dropped after), the gateway taking the tenant from the
	// X-Zerolayer-Tenant header. The document batch then goes through the
	// gateway's /v1/chat/completions, and each level reports how many of
	// its completed jobs billing charged once, not at all, or more than
	// once. Billing returns the command of a billing process on natsURL
	// and dbURL, Gateway that of a gateway on natsURL listening on addr.
	DatabaseURL string
	Billing     func(natsURL, dbURL string) *exec.Cmd
	Gateway     func(natsURL, addr string) *exec.Cmd
	// Dir holds the NATS servers' state and the processes' logs. Required.
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
	// Documents counts the batch's jobs completed, DocHitRate their
	// cached ÷ input tokens, and DocWorkers the workers that ran them.
	Documents  int     `json:"documents"`
	DocHitRate float64 `json:"doc_hit_rate"`
	DocWorkers int     `json:"doc_workers"`
	// ViaGateway counts the documents sent through the gateway (with
	// DatabaseURL; their workers are not known, so DocWorkers is 0).
	ViaGateway int `json:"via_gateway,omitempty"`
	// Completed counts the level's completed jobs (turns and documents);
	// with DatabaseURL, Billed counts those billing charged exactly once,
	// Unbilled those it had not charged 30 s after the last charge it
	// made, BilledTwice those charged more than once.
	Completed   int  `json:"completed"`
	Billing     bool `json:"billing"`
	Billed      int  `json:"billed,omitempty"`
	Unbilled    int  `json:"unbilled,omitempty"`
	BilledTwice int  `json:"billed_twice,omitempty"`
	// Failed counts turns that did not complete, by code.
	Failed map[string]int `json:"failed,omitempty"`
	// KilledAtS is when a worker was killed (seconds from the start), and
	// LongestGapS the longest time after it without a finished turn.
	KilledAtS   float64 `json:"killed_at_s,omitempty"`
	LongestGapS float64 `json:"longest_gap_s,omitempty"`
	// NodeDownS is when the ZL_JOBS leader's node was killed (seconds
	// from the start), NodeDown its name, and NodeGapS the longest time
	// without a finished turn from then until 5 s after its restart.
	NodeDownS float64 `json:"node_down_s,omitempty"`
	NodeDown  string  `json:"node_down,omitempty"`
	NodeGapS  float64 `json:"node_gap_s,omitempty"`
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
	cfg.Workers = cmp.Or(cfg.Workers, 4)
	cfg.Conversations = cmp.Or(cfg.Conversations, 64)
	cfg.Turns = cmp.Or(cfg.Turns, 6)
	cfg.MaxTokens = cmp.Or(cfg.MaxTokens, 32)
	if cfg.Documents == 0 {
		cfg.Documents = 64
	}
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
	fmt.Fprintf(w, "%8s %6s %8s %8s %9s %11s %22s %22s %15s %s\n", "workers", "turns", "seconds", "jobs/s", "hit rate", "same worker", "later TTFT p50/p99 ms", "later queue p50/p99 ms", "docs hit/workers", "failed")
	for _, l := range res.Levels {
		fmt.Fprintf(w, "%8d %6d %8.1f %8.1f %8.1f%% %10.1f%% %11.0f / %-8.0f %11.0f / %-8.0f %8.1f%% / %-4d %v\n", l.Workers, l.Turns, l.Seconds, l.JobsPerS,
			100*l.HitRate, 100*l.SameWorker, l.LaterTTFT.P50, l.LaterTTFT.P99, l.LaterQueue.P50, l.LaterQueue.P99, 100*l.DocHitRate, l.DocWorkers, failedText(l.Failed))
	}
	fmt.Fprintf(w, "%d workers ÷ 1: hit rate %.2f×, later turns' TTFT p50 %.2f×; output tokens by tenant %v\n", many.Workers, res.HitRateRatio, res.TTFTRatio, many.TenantTokens)
	if many.KilledAtS > 0 {
		fmt.Fprintf(w, "a worker killed (SIGKILL) %.1f s in: longest time without a finished turn after it %.2f s\n", many.KilledAtS, many.LongestGapS)
	}
	for _, l := range res.Levels {
		if l.Billing {
			fmt.Fprintf(w, "%d worker(s), billing and the gateway as processes: %d documents through the gateway; of %d completed jobs billing charged %d once, %d not at all, %d more than once\n",
				l.Workers, l.ViaGateway, l.Completed, l.Billed, l.Unbilled, l.BilledTwice)
		}
	}
	for _, l := range res.Levels {
		if l.NodeDown != "" {
			fmt.Fprintf(w, "%d worker(s): NATS node %s (the ZL_JOBS leader) killed %.1f s in, restarted 10 s later: longest time without a finished turn %.2f s\n", l.Workers, l.NodeDown, l.NodeDownS, l.NodeGapS)
		}
	}
	return res, nil
}

// fleetTurn is one finished turn.
type fleetTurn struct {
	conv, turn int
	res        *contracts.Result
	err        error
	at         time.Time
}

func fleetLevel(ctx context.Context, cfg FleetConfig, workers int, dir string) (*FleetLevel, error) {
	nodes, err := startNATS(cfg, dir)
	if err != nil {
		return nil, err
	}
	defer nodes.stop()
	nc, err := nats.Connect(nodes.url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	streams := contracts.StreamsConfig{Replicas: nodes.replicas()}
	// A new cluster elects its JetStream meta leader first.
	for deadline := time.Now().Add(time.Minute); ; {
		err = contracts.EnsureStreams(ctx, js, streams)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		return nil, err
	}
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			p.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range procs {
			stopProc(p)
		}
	}()
	for i := range workers {
		id := fmt.Sprintf("fleet-w%d", i)
		c := cfg.Worker(nodes.url, cfg.Models[i%len(cfg.Models)], id)
		c.Args = append(c.Args, "--replicas", fmt.Sprint(streams.Replicas))
		if err := startLogged(c, filepath.Join(dir, id+".log")); err != nil {
			return nil, fmt.Errorf("bench: start worker %s: %w", id, err)
		}
		procs = append(procs, c)
	}
	var svc *fleetServices
	if cfg.DatabaseURL != "" && cfg.Billing != nil && cfg.Gateway != nil {
		if svc, err = startServices(ctx, cfg, nodes.url, streams.Replicas, dir); err != nil {
			return nil, err
		}
		defer svc.stop(ctx)
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
	var nodeDown, nodeBack time.Time
	var nodeName string
	lossDone := make(chan struct{})
	if cfg.NodeLoss && len(nodes.procs) > 1 {
		go func() {
			defer close(lossDone)
			for {
				mu.Lock()
				n := len(turns)
				mu.Unlock()
				if n >= cfg.Conversations*cfg.Turns/3 {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			s, err := js.Stream(ctx, contracts.StreamJobs)
			if err != nil {
				return
			}
			info, err := s.Info(ctx)
			if err != nil || info.Cluster == nil {
				return
			}
			var i int
			if _, err := fmt.Sscanf(info.Cluster.Leader, "n%d", &i); err != nil || i >= len(nodes.procs) {
				return
			}
			mu.Lock()
			nodeName, nodeDown = info.Cluster.Leader, time.Now()
			mu.Unlock()
			nodes.kill(i)
			time.Sleep(10 * time.Second)
			if err := nodes.start(i); err == nil {
				mu.Lock()
				nodeBack = time.Now()
				mu.Unlock()
			}
		}()
	} else {
		close(lossDone)
	}
	var wg sync.WaitGroup
	// The document batch: submitted at once, waited for beside the
	// conversations.
	var docs []*contracts.Result
	if cfg.Documents > 0 {
		instruction := strings.Repeat("Read the story below and answer in one short sentence who the story is about and where it happens. ", 20)
		var reqs []*contracts.JobRequest
		for d := range cfg.Documents {
			zero := 0.0
			reqs = append(reqs, &contracts.JobRequest{Model: names[d%len(names)], MaxTokens: cfg.MaxTokens, Temperature: &zero, System: instruction,
				Messages: []contracts.Message{{Role: contracts.RoleUser, Content: fmt.Sprintf("Story %d: a cat named Tom found a red ball in the garden.", d)}}})
		}
		docs = make([]*contracts.Result, len(reqs))
		if svc != nil {
			// Through the gateway: the answers carry usage, not the
			// worker.
			for d, req := range reqs {
				wg.Go(func() { docs[d] = svc.chat(ctx, tenants[0], req) })
			}
		} else {
			ids, errs := clients[tenants[0]].SubmitMany(ctx, reqs, nil)
			for d, id := range ids {
				if errs[d] != nil {
					continue
				}
				wg.Go(func() {
					wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
					defer cancel()
					if r, err := clients[tenants[0]].Wait(wctx, id); err == nil {
						docs[d] = r
					}
				})
			}
		}
	}
	for c := range cfg.Conversations {
		wg.Go(func() {
			tenant := tenants[c%len(tenants)]
			zero := 0.0
			req := &contracts.JobRequest{Model: names[c%len(names)], MaxTokens: cfg.MaxTokens, Temperature: &zero,
				System: fmt.Sprintf("You tell story %d of %d about a cat named Tom who lived in a big red house with a garden.", c, cfg.Conversations)}
			for k := range cfg.Turns {
				// An id of its own, so that a submit sent again (as a
				// client does on unavailable) is the same job.
				req.ID = fmt.Sprintf("fleet-%d-%d-%d-%d", workers, start.UnixNano()%1e9, c, k)
				req.Messages = append(req.Messages, contracts.Message{Role: contracts.RoleUser, Content: questions[k%len(questions)]})
				t := fleetTurn{conv: c, turn: k}
				id, err := clients[tenant].Submit(ctx, req, nil)
				for retry := time.Now().Add(time.Minute); err != nil && contracts.ErrorFrom(err).Code == contracts.CodeUnavailable && time.Now().Before(retry); {
					time.Sleep(200 * time.Millisecond)
					id, err = clients[tenant].Submit(ctx, req, nil)
				}
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
	<-lossDone
	l := &FleetLevel{Workers: workers, Turns: len(turns), Seconds: time.Since(start).Seconds(), TenantTokens: map[string]int{}, Failed: map[string]int{}}
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
	docWorkers := map[string]bool{}
	var dc, di int
	for _, r := range docs {
		if r == nil || r.Status != contracts.StatusCompleted || r.Usage == nil {
			l.Failed["document"]++
			continue
		}
		l.Documents++
		dc += r.Usage.CachedInputTokens
		di += r.Usage.InputTokens
		docWorkers[r.Usage.WorkerID] = true
	}
	l.DocHitRate, l.DocWorkers = ratio(float64(dc), float64(di)), len(docWorkers)
	if svc != nil {
		l.ViaGateway, l.DocWorkers = len(docs), 0
	}
	l.Completed = l.Documents
	for _, t := range turns {
		if t.err == nil && t.res.Status == contracts.StatusCompleted {
			l.Completed++
		}
	}
	if svc != nil {
		l.Billing = true
		l.Billed, l.Unbilled, l.BilledTwice = svc.charged(ctx, l.Completed)
	}
	l.JobsPerS = float64(len(turns)+l.Documents) / l.Seconds
	l.SameWorker = ratio(float64(same), float64(later))
	l.LaterTTFT, l.LaterQueue = dist(ttft), dist(queue)
	if !killedAt.IsZero() {
		l.KilledAtS = killedAt.Sub(start).Seconds()
		l.LongestGapS = longestGap(turns, killedAt, time.Now()).Seconds()
	}
	if !nodeDown.IsZero() {
		l.NodeDown, l.NodeDownS = nodeName, nodeDown.Sub(start).Seconds()
		end := nodeBack.Add(5 * time.Second)
		if nodeBack.IsZero() {
			end = nodeDown.Add(15 * time.Second)
		}
		l.NodeGapS = longestGap(turns, nodeDown, end).Seconds()
	}
	if len(l.Failed) == 0 {
		l.Failed = nil
	}
	return l, nil
}

// fleetServices are the billing and gateway processes of a level and
// billing's schema.
type fleetServices struct {
	schema, base, dbURL string
	gateway             string // host:port
	procs               []*exec.Cmd
	hc                  *http.Client
}

// startServices makes and migrates a schema of cfg.DatabaseURL and starts
// billing and the gateway on natsURL, their logs in dir.
func startServices(ctx context.Context, cfg FleetConfig, natsURL string, replicas int, dir string) (*fleetServices, error) {
	u, err := url.Parse(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("bench: --database-url: %w", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	svc := &fleetServices{schema: "zl_fleet_" + hex.EncodeToString(b[:]), base: cfg.DatabaseURL, hc: &http.Client{Timeout: 5 * time.Minute}}
	conn, err := pgx.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("bench: billing's database: %w", err)
	}
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+svc.schema)
	conn.Close(ctx)
	if err != nil {
		return nil, fmt.Errorf("bench: billing's database: %w", err)
	}
	q := u.Query()
	q.Set("search_path", svc.schema)
	u.RawQuery = q.Encode()
	svc.dbURL = u.String()
	pool, err := pgxpool.New(ctx, svc.dbURL)
	if err != nil {
		svc.stop(ctx)
		return nil, err
	}
	_, err = migrations.Up(ctx, pool)
	pool.Close()
	if err != nil {
		svc.stop(ctx)
		return nil, fmt.Errorf("bench: migrating billing's schema: %w", err)
	}
	ports, err := freePorts(1)
	if err != nil {
		svc.stop(ctx)
		return nil, err
	}
	svc.gateway = fmt.Sprintf("127.0.0.1:%d", ports[0])
	for name, c := range map[string]*exec.Cmd{"billing": cfg.Billing(natsURL, svc.dbURL), "gateway": cfg.Gateway(natsURL, svc.gateway)} {
		c.Args = append(c.Args, "--replicas", fmt.Sprint(replicas))
		if err := startLogged(c, filepath.Join(dir, name+".log")); err != nil {
			svc.stop(ctx)
			return nil, fmt.Errorf("bench: start %s: %w", name, err)
		}
		svc.procs = append(svc.procs, c)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		r, err := svc.hc.Get("http://" + svc.gateway + "/healthz")
		if err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return svc, nil
			}
		}
		if time.Now().After(deadline) {
			svc.stop(ctx)
			return nil, fmt.Errorf("bench: the gateway did not serve within a minute (log in %s)", dir)
		}
	}
}

// chat sends req through the gateway's /v1/chat/completions as tenant
// (streamed, with usage: streamDocument) and returns it as a result with
// that usage (nil when it failed).
func (svc *fleetServices) chat(ctx context.Context, tenant string, req *contracts.JobRequest) *contracts.Result {
	msgs := []map[string]string{{"role": "system", "content": req.System}}
	for _, m := range req.Messages {
		msgs = append(msgs, map[string]string{"role": string(m.Role), "content": m.Content})
	}
	body, _ := json.Marshal(map[string]any{"model": req.Model, "messages": msgs, "max_tokens": req.MaxTokens, "temperature": 0,
		"stream": true, "stream_options": map[string]bool{"include_usage": true}})
	r := streamDocument(ctx, svc.hc, svc.gateway, tenant, body)
	if r.err != nil {
		return nil
	}
	return &contracts.Result{Status: contracts.StatusCompleted, Usage: &contracts.Usage{Tenant: tenant,
		InputTokens: r.prompt, CachedInputTokens: r.cached, OutputTokens: r.output}}
}

// charged counts billing's charges per job once it has charged completed
// jobs or made no new charge for 30 s: jobs charged once, completed jobs
// not charged, jobs charged more than once.
func (svc *fleetServices) charged(ctx context.Context, completed int) (once, none, twice int) {
	last, since := -1, time.Now()
	for {
		once, twice = 0, 0
		conn, err := pgx.Connect(ctx, svc.dbURL)
		if err == nil {
			rows, qerr := conn.Query(ctx, "SELECT count(*) FROM charges GROUP BY tenant_id, job_id")
			if qerr == nil {
				for rows.Next() {
					var n int
					if rows.Scan(&n) == nil {
						if n == 1 {
							once++
						} else {
							twice++
						}
					}
				}
				rows.Close()
			}
			conn.Close(ctx)
		}
		if n := once + twice; n != last {
			last, since = n, time.Now()
		}
		if once+twice >= completed || time.Since(since) > 30*time.Second || ctx.Err() != nil {
			return once, max(0, completed-once-twice), twice
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// stop ends the processes and drops the schema.
func (svc *fleetServices) stop(ctx context.Context) {
	for _, p := range svc.procs {
		p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range svc.procs {
		stopProc(p)
	}
	if conn, err := pgx.Connect(ctx, svc.base); err == nil {
		conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+svc.schema+" CASCADE")
		conn.Close(ctx)
	}
}

// longestGap is the longest time in [from, to] without a finished turn.
func longestGap(turns []fleetTurn, from, to time.Time) time.Duration {
	var ends []time.Time
	for _, t := range turns {
		if t.at.After(from) && t.at.Before(to) {
			ends = append(ends, t.at)
		}
	}
	sort.Slice(ends, func(i, j int) bool { return ends[i].Before(ends[j]) })
	prev, gap := from, time.Duration(0)
	for _, e := range ends {
		gap = max(gap, e.Sub(prev))
		prev = e
	}
	last := to
	if len(turns) > 0 {
		// (the load may end before to)
		latest := from
		for _, t := range turns {
			if t.at.After(latest) {
				latest = t.at
			}
		}
		last = minTime(to, latest)
	}
	return max(gap, last.Sub(prev))
}

func failedText(m map[string]int) string {
	if len(m) == 0 {
		return "0"
	}
	return fmt.Sprint(m)
}

// natsNodes are the fleet's NATS servers: one in this process, or
// cfg.Node processes clustered.
type natsNodes struct {
	url     string
	srv     *server.Server
	cfg     FleetConfig
	configs []string
	procs   []*exec.Cmd
	logs    []*os.File
}

func (n *natsNodes) replicas() int {
	if len(n.procs) > 1 {
		return 3
	}
	return 1
}

// startNATS starts the fleet's NATS: three cfg.Node processes clustered,
// or one server in this process.
func startNATS(cfg FleetConfig, dir string) (*natsNodes, error) {
	n := &natsNodes{cfg: cfg}
	if cfg.Node == nil {
		srv, err := devstack.StartNATS(dir, 0)
		if err != nil {
			return nil, err
		}
		n.srv, n.url = srv, srv.ClientURL()
		return n, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ports, err := freePorts(6)
	if err != nil {
		return nil, err
	}
	var urls, routes []string
	for i := range 3 {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", ports[i]))
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[3+i]))
	}
	for i := range 3 {
		conf := filepath.Join(dir, fmt.Sprintf("n%d.conf", i))
		text := fmt.Sprintf("server_name: n%d\nlisten: 127.0.0.1:%d\njetstream { store_dir: %q }\ncluster { name: zl-fleet, listen: 127.0.0.1:%d, routes: [%s] }\n",
			i, ports[i], filepath.Join(dir, fmt.Sprintf("n%d", i)), ports[3+i], strings.Join(routes, ", "))
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			return nil, err
		}
		n.configs = append(n.configs, conf)
		n.procs = append(n.procs, nil)
		n.logs = append(n.logs, nil)
	}
	for i := range 3 {
		if err := n.start(i); err != nil {
			n.stop()
			return nil, err
		}
	}
	n.url = strings.Join(urls, ",")
	return n, nil
}

// start starts node i (again).
func (n *natsNodes) start(i int) error {
	c := n.cfg.Node(n.configs[i])
	log, err := os.OpenFile(strings.TrimSuffix(n.configs[i], ".conf")+".log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	c.Stdout, c.Stderr = log, log
	if err := c.Start(); err != nil {
		log.Close()
		return fmt.Errorf("bench: start NATS node %d: %w", i, err)
	}
	n.procs[i], n.logs[i] = c, log
	return nil
}

// startLogged starts c with its output in a new file at path (the child
// keeps it open; this process closes its copy).
func startLogged(c *exec.Cmd, path string) error {
	log, err := os.Create(path)
	if err != nil {
		return err
	}
	defer log.Close()
	c.Stdout, c.Stderr = log, log
	return c.Start()
}

// kill kills node i (SIGKILL), as a crash would.
func (n *natsNodes) kill(i int) {
	if c := n.procs[i]; c != nil {
		c.Process.Kill()
		c.Wait()
		n.logs[i].Close()
		n.procs[i] = nil
	}
}

func (n *natsNodes) stop() {
	if n.srv != nil {
		n.srv.Shutdown()
	}
	for i, c := range n.procs {
		if c != nil {
			c.Process.Signal(syscall.SIGTERM)
			stopProc(c)
			n.logs[i].Close()
		}
	}
}

// stopProc waits up to 10 s for c (signalled to end) to exit, then kills
// it.
func stopProc(c *exec.Cmd) {
	done := make(chan struct{})
	go func() { c.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		c.Process.Kill()
		<-done
	}
}

// freePorts returns k ports free on 127.0.0.1 now.
func freePorts(k int) ([]int, error) {
	var ports []int
	for range k {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
		defer l.Close()
	}
	return ports, nil
}
