package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/model/tokenizer"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/tools"
)

// DraftsConfig configures Drafts.
type DraftsConfig struct {
	// Model is the GGUF file. Defaults to "": the generated 134M Q8_0
	// model, written to a temporary folder.
	Model string
	// Threads is the CPU thread count. Defaults to 1.
	Threads int
	// Schemas is a folder of JSON Schemas (*.json, searched below it):
	// plain schemas, or JSONSchemaBench files whose "schema" member is
	// one. Defaults to "": a few extraction schemas of the benchmark's own.
	Schemas string
	// Limit bounds the schemas taken from Schemas, spread evenly over
	// them in path order. Defaults to 40.
	Limit int
	// MaxTokens is each job's max_tokens. Defaults to 128.
	MaxTokens int
	// Concurrency is the numbers of jobs in flight, one level each.
	// Defaults to 1, 16.
	Concurrency []int
	// Workloads are the workloads to run: schemas, copy, chat. Defaults
	// to all three.
	Workloads []string
	// Threshold, when above 0, is sched.Config.DraftThreshold: drafts fed
	// at that acceptance instead of where the measured step times say
	// they pay.
	Threshold float64
	// Progress receives a line when the generated model is written.
	Progress io.Writer
}

// WithDefaults returns c with zero fields set to their defaults.
func (c DraftsConfig) WithDefaults() DraftsConfig {
	if c.Threads == 0 {
		c.Threads = 1
	}
	if c.Limit == 0 {
		c.Limit = 40
	}
	if c.MaxTokens == 0 {
		c.MaxTokens = 128
	}
	if len(c.Concurrency) == 0 {
		c.Concurrency = []int{1, 16}
	}
	if len(c.Workloads) == 0 {
		c.Workloads = []string{"schemas", "copy", "chat"}
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c
}

// DraftsRow is one workload at one concurrency, with drafts off or on.
type DraftsRow struct {
	Workload    string  `json:"workload"`
	Concurrency int     `json:"concurrency"`
	Drafts      bool    `json:"drafts"`
	Jobs        int     `json:"jobs"`
	Tokens      int     `json:"output_tokens"`
	Passes      int     `json:"sampling_passes"`
	Drafted     int     `json:"drafted_tokens"`
	Accepted    int     `json:"accepted_draft_tokens"`
	Seconds     float64 `json:"seconds"`
	TokensPerS  float64 `json:"output_tokens_per_s"`
	PassesPerT  float64 `json:"passes_per_token"`
	Speedup     float64 `json:"speedup,omitempty"`      // tokens/s over the same level without drafts
	SameOutputs bool    `json:"same_outputs,omitempty"` // with drafts: every output equals the one without
	Failed      int     `json:"failed_jobs,omitempty"`  // jobs that ended with an error (same with and without)
	BySource    string  `json:"accepted_by_source,omitempty"`
}

// DraftsResults is what Drafts measured.
type DraftsResults struct {
	Model string      `json:"model"`
	Rows  []DraftsRow `json:"rows"`
}

// draftsJob is one job of a drafts workload.
type draftsJob struct {
	prompt []int32
	format *contracts.ResponseFormat
}

// Drafts measures drafting (sched's draft-and-verify decoding) on
// workloads where it should pay (JSON Schemas whose keys and punctuation
// the grammar forces; documents whose answer copies their values) and
// one where it should not (plain chat), each at every concurrency level
// without drafts and then with them, in the same process on the same
// model: output tokens per second, forward passes that sampled per
// output token, drafted and accepted tokens, and whether every output
// was the same (it must be: drafts change the passes, not the tokens).
func Drafts(ctx context.Context, cfg DraftsConfig, w io.Writer) (*DraftsResults, error) {
	cfg = cfg.WithDefaults()
	l, path, closeAll, err := loadCPUModel(cfg.Model, "134m", cfg.Threads, cfg.Progress)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	res := &DraftsResults{Model: filepath.Base(path)}
	th := "measured"
	if cfg.Threshold > 0 {
		th = fmt.Sprint(cfg.Threshold)
	}
	fmt.Fprintf(w, "drafts: %s, %d thread(s), max_tokens %d, temperature 0, draft threshold %s\n", res.Model, cfg.Threads, cfg.MaxTokens, th)
	tw := tabwriter.NewWriter(w, 2, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tclients\tdrafts\tjobs\ttokens\tpasses/token\tdrafted\taccepted\ttok/s\tvs off\tsame outputs\t")
	for _, wl := range cfg.Workloads {
		jobs, err := draftsWorkload(wl, cfg, l.Tokenizer)
		if err != nil {
			return nil, err
		}
		for _, c := range cfg.Concurrency {
			var off *DraftsRow
			var offOut [][]int32
			for _, on := range []bool{false, true} {
				row, outs, err := runDrafts(ctx, l, jobs, c, on, cfg)
				if err != nil {
					return nil, err
				}
				row.Workload = wl
				if !on {
					off, offOut = &row, outs
				} else {
					row.Speedup = row.TokensPerS / off.TokensPerS
					row.SameOutputs = true
					for i := range outs {
						row.SameOutputs = row.SameOutputs && slices.Equal(outs[i], offOut[i])
					}
				}
				res.Rows = append(res.Rows, row)
				same, vs := "", ""
				if on {
					same, vs = fmt.Sprint(row.SameOutputs), fmt.Sprintf("%.2f×", row.Speedup)
				}
				fmt.Fprintf(tw, "%s\t%d\t%v\t%d\t%d\t%.3f\t%d\t%d %s\t%.1f\t%s\t%s\t\n", wl, c, on, row.Jobs, row.Tokens, row.PassesPerT,
					row.Drafted, row.Accepted, row.BySource, row.TokensPerS, vs, same)
				tw.Flush()
			}
		}
	}
	return res, tw.Flush()
}

// runDrafts runs jobs with at most c in flight on a fresh scheduler, with
// drafts or without, and returns the row and each job's output ids.
func runDrafts(ctx context.Context, l *engine.Loaded, jobs []draftsJob, c int, drafts bool, cfg DraftsConfig) (DraftsRow, [][]int32, error) {
	met := sched.NewMetrics()
	s, err := sched.New(l.Model, l.Tokenizer, sched.Config{NoDrafts: !drafts, DraftThreshold: cfg.Threshold, Metrics: met, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return DraftsRow{}, nil, err
	}
	if err := s.Start(ctx); err != nil {
		return DraftsRow{}, nil, err
	}
	defer s.Stop(context.Background())
	row := DraftsRow{Concurrency: c, Drafts: drafts, Jobs: len(jobs)}
	outs := make([][]int32, len(jobs))
	stats := make([]sched.Stats, len(jobs))
	errs := make([]error, len(jobs))
	failed := make([]bool, len(jobs)) // a tool failure: the same ids with and without drafts
	next := make(chan int)
	var wg sync.WaitGroup
	began := time.Now()
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				req := &engine.Request{PromptIDs: jobs[i].prompt, MaxTokens: cfg.MaxTokens}
				if f := jobs[i].format; f != nil {
					set, err := tools.Compile(nil, f, l.Tokenizer, tools.Budget{})
					if err != nil {
						errs[i] = err
						continue
					}
					req.Tools = set.NewRun()
				}
				r, st, err := s.Generate(ctx, req, sched.JobOpts{Tenant: "bench"})
				if err == nil {
					outs[i], stats[i], failed[i] = r.OutputIDs, st, r.Err != nil
				}
				errs[i] = err
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	row.Seconds = time.Since(began).Seconds()
	for i, err := range errs {
		if err != nil {
			return row, nil, fmt.Errorf("bench: drafts job %d: %w", i, err)
		}
		if failed[i] {
			row.Failed++
		}
		row.Tokens += len(outs[i])
		row.Passes += stats[i].SampleSteps
		row.Drafted += stats[i].DraftedTokens
		row.Accepted += stats[i].AcceptedDraftTokens
	}
	row.TokensPerS = float64(row.Tokens) / row.Seconds
	if row.Tokens > 0 {
		row.PassesPerT = float64(row.Passes) / float64(row.Tokens)
	}
	if drafts {
		var by []string
		for _, src := range []string{"grammar", "context"} {
			by = append(by, fmt.Sprintf("%s %.0f/%.0f", src, met.DraftAccepted(src), met.Drafted(src)))
		}
		row.BySource = "(" + strings.Join(by, ", ") + ")"
	}
	return row, outs, nil
}

// draftsWorkload builds the jobs of workload name.
func draftsWorkload(name string, cfg DraftsConfig, tok *tokenizer.Tokenizer) ([]draftsJob, error) {
	enc := func(s string) []int32 { return tok.Encode(s, tokenizer.EncodeOptions{AddSpecial: true}) }
	switch name {
	case "schemas":
		schemas, err := draftSchemas(cfg.Schemas, cfg.Limit, tok)
		if err != nil {
			return nil, err
		}
		var jobs []draftsJob
		for _, sc := range schemas {
			jobs = append(jobs, draftsJob{prompt: enc("Answer with a JSON document for this schema.\n" + sc.desc + "\n"),
				format: &contracts.ResponseFormat{Type: contracts.FormatJSONSchema, Schema: sc.schema}})
		}
		return jobs, nil
	case "copy":
		return copyJobs(enc), nil
	case "chat":
		var jobs []draftsJob
		r := rand.New(rand.NewPCG(7, 7))
		for i := 0; i < 16; i++ {
			words := make([]string, 24)
			for j := range words {
				words[j] = lexicon[r.IntN(len(lexicon))]
			}
			jobs = append(jobs, draftsJob{prompt: enc(strings.Join(words, " "))})
		}
		return jobs, nil
	}
	return nil, fmt.Errorf("bench: drafts workload %q: want schemas, copy or chat", name)
}

type draftSchema struct {
	desc   string
	schema json.RawMessage
}

// draftSchemas reads up to limit schemas from dir, spread over them in
// path order, that compile for tok; without dir, the benchmark's own.
func draftSchemas(dir string, limit int, tok *tokenizer.Tokenizer) ([]draftSchema, error) {
	if dir == "" {
		var out []draftSchema
		for _, s := range []string{DocumentSchema, copySchema,
			`{"type":"object","properties":{"currency":{"enum":["GBP","USD","EUR"]},"paid_at":{"type":"string","format":"date"},"payment_id":{"type":"string","pattern":"^pay_[a-z0-9]{8}$"},"amount":{"type":"string","pattern":"^[0-9]{1,4}\\.[0-9]{2}$"},"method":{"type":"object","properties":{"last4":{"type":"string","pattern":"^[0-9]{4}$"},"type":{"enum":["card","bank"]}},"required":["last4","type"],"additionalProperties":false}},"required":["currency","paid_at","payment_id","amount","method"],"additionalProperties":false}`,
		} {
			out = append(out, draftSchema{desc: "Extract the fields.", schema: json.RawMessage(s)})
		}
		return out, nil
	}
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".json") {
			paths = append(paths, p)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var out []draftSchema
	step := max(1, len(paths)/limit)
	for i := 0; i < len(paths) && len(out) < limit; i += step {
		b, err := os.ReadFile(paths[i])
		if err != nil {
			return nil, err
		}
		var f struct {
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
		}
		sc := json.RawMessage(b)
		if json.Unmarshal(b, &f) == nil && len(f.Schema) > 0 && f.Schema[0] == '{' {
			sc = f.Schema
		}
		rf := &contracts.ResponseFormat{Type: contracts.FormatJSONSchema, Schema: sc}
		if _, err := tools.Compile(nil, rf, tok, tools.Budget{}); err != nil {
			continue // not every schema compiles (unsupported keywords)
		}
		out = append(out, draftSchema{desc: f.Description, schema: sc})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("bench: no schema under %s compiles", dir)
	}
	return out, nil
}

// copySchema is the copy workload's extraction schema: every value is in
// the document.
const copySchema = `{"type":"object","properties":{"invoice":{"type":"string","maxLength":24},"customer":{"type":"string","maxLength":40},"city":{"type":"string","maxLength":24},"total":{"type":"string","maxLength":12},"items":{"type":"array","items":{"type":"string","maxLength":32},"maxItems":3}},"required":["invoice","customer","city","total","items"],"additionalProperties":false}`

// copyJobs are documents whose answer quotes them: an invoice's number,
// customer, city, total and items, each stated in the text, to extract
// under copySchema.
func copyJobs(enc func(string) []int32) []draftsJob {
	r := rand.New(rand.NewPCG(11, 11))
	names := []string{"Acme Widgets Limited", "Northwind Traders", "Blue Harbour Shipping", "Green Valley Farms", "Oak and Iron Works", "Silver Line Travel"}
	cities := []string{"Manchester", "Rotterdam", "Glasgow", "Lyon", "Porto", "Bremen"}
	goods := []string{"steel brackets", "oak planks", "copper wire", "glass panels", "rubber seals", "paper rolls", "brass hinges", "cotton sheets"}
	var jobs []draftsJob
	for i := 0; i < 16; i++ {
		inv := fmt.Sprintf("INV-%04d-%c%c", r.IntN(10000), 'A'+rune(r.IntN(26)), 'A'+rune(r.IntN(26)))
		cust, city := names[r.IntN(len(names))], cities[r.IntN(len(cities))]
		total := fmt.Sprintf("%d.%02d", 100+r.IntN(9000), r.IntN(100))
		items := []string{goods[r.IntN(len(goods))], goods[r.IntN(len(goods))], goods[r.IntN(len(goods))]}
		doc := fmt.Sprintf("Invoice %s was issued to %s of %s. The order held %s, %s and %s. "+
			"The total due is %s. %s will pay the invoice %s within thirty days. Delivery of the %s to %s is arranged.",
			inv, cust, city, items[0], items[1], items[2], total, cust, inv, items[0], city)
		prompt := "Document:\n" + doc + "\nExtract invoice, customer, city, total and items as JSON.\n"
		jobs = append(jobs, draftsJob{prompt: enc(prompt), format: &contracts.ResponseFormat{Type: contracts.FormatJSONSchema, Schema: json.RawMessage(copySchema)}})
	}
	return jobs
}
