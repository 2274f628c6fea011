package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/device"
	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/chat"
	modelprompt "github.com/zerolayer/zerolayer/worker/model/prompt"
	"github.com/zerolayer/zerolayer/worker/model/store"
	"github.com/zerolayer/zerolayer/worker/sample"
	"github.com/zerolayer/zerolayer/worker/tools"
)

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// genOutput is the --format json document.
type genOutput struct {
	PromptIDs []int32 `json:"prompt_ids"`
	OutputIDs []int32 `json:"output_ids"`
	Text      string  `json:"text"`
	// Reasoning is a thinking model's <think> text (with --chat and
	// thinking on), apart from Text, the answer.
	Reasoning   string           `json:"reasoning,omitempty"`
	StopReason  string           `json:"stop_reason"`
	Usage       engine.Usage     `json:"usage"`
	TopLogprobs [][]logprobEntry `json:"top_logprobs,omitempty"`
	// With inline tools: what they did, their time, and a failure.
	ToolReport []contracts.ToolReport `json:"tool_report,omitempty"`
	ToolTimeMs float64                `json:"tool_execution_time_ms,omitempty"`
	Error      *contracts.Error       `json:"error,omitempty"`
	// Incomplete and IncompleteReason: the output stopped at a budget
	// before it was whole (contracts.Result.Incomplete).
	Incomplete       bool   `json:"incomplete,omitempty"`
	IncompleteReason string `json:"incomplete_reason,omitempty"`
	// Attempts counts the generations (1 + the tools' retries) when
	// there were retries; usage counts every attempt's tokens.
	Attempts int `json:"attempts,omitempty"`
}

type logprobEntry struct {
	ID      int32   `json:"id"`
	Logprob float32 `json:"logprob"`
}

func runGen(ctx context.Context, args []string) error {
	fs := newFlags("gen")
	modelName := fs.String("model", "", "model file path, or a name looked up in ZEROLAYER_MODEL_PATH and ~/.cache/zerolayer/models")
	prompt := fs.String("prompt", "", "prompt text")
	promptIDs := fs.String("prompt-ids", "", "prompt as comma-separated token ids, used as given")
	system := fs.String("system", "", "system prompt (needs --chat); <tool> blocks in it declare inline tools, as in a job's system prompt")
	useChat := fs.Bool("chat", false, "render the prompt through the model's chat template")
	thinking := fs.String("thinking", "", "with --chat: the template's thinking switch, on or off (default: the template's; qwen3 thinks); --format json gives the <think> text apart, as reasoning")
	tmplName := fs.String("chat-template", "", "chat template by name instead of the model's ("+strings.Join(chat.Names(), ", ")+")")
	maxTokens := fs.Int("max-tokens", 0, "maximum tokens to generate (0: the preset's, else up to the context)")
	var sf samplingFlags
	sf.register(fs)
	topLogprobs := fs.Int("top-logprobs", 0, "record the K most likely tokens per step (json output)")
	format := fs.String("format", "text", "output format: text or json")
	ignoreEOS := fs.Bool("ignore-eos", false, "keep generating past end-of-generation tokens")
	threads := fs.Int("threads", 0, "CPU threads (default: all)")
	var stops stringList
	fs.Var(&stops, "stop", "stop sequence (repeatable)")
	schemaFile := fs.String("schema", "", "constrain the output to the JSON Schema in this file")
	regex := fs.String("regex", "", "constrain the output to this RE2 pattern")
	toolsJSON := fs.String("tools", "", `inline tools as a JSON array, e.g. '[{"name":"suffix","params":{"text":" END"}}]'`)
	embed := fs.Bool("embed", false, "instead of generating, print the prompt's embedding as JSON: the final hidden states pooled as the model says (or --pooling), L2-normalised")
	pooling := fs.String("pooling", "", "with --embed: mean, cls or last (default: the model's <arch>.pooling_type, else mean)")
	dimensions := fs.Int("dimensions", 0, "with --embed: keep the first N components (Matryoshka-trained models), renormalised")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *format != "text" && *format != "json" {
		return usagef("--format %q: want text or json", *format)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["prompt"] == set["prompt-ids"] {
		return usagef("give exactly one of --prompt and --prompt-ids")
	}
	params, maxTok, err := sf.params(*maxTokens)
	if err != nil {
		return err
	}
	path, err := store.Resolve(*modelName, modelDirs())
	if err != nil {
		return err
	}
	be, err := device.Open(device.CPU, *threads, nil)
	if err != nil {
		return err
	}
	defer be.Close()
	l, err := engine.Load(path, be)
	if err != nil {
		return err
	}
	defer l.Close()
	var ids []int32
	var inline []contracts.Tool
	var split bool
	if set["prompt-ids"] {
		if *useChat || *system != "" {
			return usagef("--prompt-ids are used as given: drop --chat and --system")
		}
		ids, err = parseTokenIDs(*promptIDs)
	} else {
		sys := *system
		if sys != "" && *useChat {
			// The <tool> blocks are tools, not prompt text: the worker's
			// rule (contracts.ParseSystem), so gen runs what a job runs.
			if sys, inline, err = contracts.ParseSystem(sys); err != nil {
				return err
			}
		}
		var on *bool
		if on, err = thinkingFlag(*thinking, *useChat); err != nil {
			return err
		}
		po := modelprompt.Options{Chat: *useChat, System: sys, Thinking: on}
		if *tmplName != "" {
			t, err := chat.Named(*tmplName)
			if err != nil {
				return usagef("%v", err)
			}
			po.Template = &t
		}
		if ids, err = l.Prompt(*prompt, po); err == nil && *useChat {
			if split, err = l.Thinks(po.Template, on); errors.Is(err, modelprompt.ErrNoThinkingSwitch) {
				return usagef("--thinking on: %v", err)
			}
		}
	}
	if err != nil {
		return err
	}
	if *embed {
		return embedPrompt(ctx, l, ids, *pooling, *dimensions)
	}
	req := engine.Request{PromptIDs: ids, MaxTokens: maxTok, Sampling: params, Stop: stops, TopLogprobs: *topLogprobs, IgnoreEOS: *ignoreEOS}
	if req.Tools, err = genTools(*schemaFile, *regex, *toolsJSON, inline, l); err != nil {
		return err
	}
	return generate(ctx, l, req, *format == "json", split)
}

// thinkingFlag reads --thinking: "" (the template's default), on or off;
// it needs --chat.
func thinkingFlag(s string, useChat bool) (*bool, error) {
	switch s {
	case "":
		return nil, nil
	case "on", "off":
		if !useChat {
			return nil, usagef("--thinking switches a chat template's thinking: add --chat")
		}
		on := s == "on"
		return &on, nil
	}
	return nil, usagef("--thinking %q: want on or off", s)
}

// samplingFlags are gen's sampling flags; a negative value is one not
// given.
type samplingFlags struct {
	preset                   string
	temp, topP, minP, repPen float64
	topK                     int
	seed                     uint64
}

func (f *samplingFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.preset, "preset", "", "sampling preset: "+strings.Join(sample.PresetNames(), ", "))
	fs.Float64Var(&f.temp, "temperature", -1, "temperature (0: greedy; default greedy unless a preset sets it)")
	fs.IntVar(&f.topK, "top-k", -1, "top-k (0: off)")
	fs.Float64Var(&f.topP, "top-p", -1, "top-p (1: off)")
	fs.Float64Var(&f.minP, "min-p", -1, "min-p (0: off)")
	fs.Float64Var(&f.repPen, "repetition-penalty", -1, "repetition penalty (1: off)")
	fs.Uint64Var(&f.seed, "seed", 0, "random seed")
}

// params are the sampling parameters of the flags: the preset's, with
// each flag given in its place; maxTokens 0 becomes the preset's.
func (f *samplingFlags) params(maxTokens int) (sample.Params, int, error) {
	var p sample.Params
	if f.preset != "" {
		pp, mt, err := sample.Preset(f.preset)
		if err != nil {
			return p, 0, usagef("%v", err)
		}
		p = pp
		if maxTokens == 0 {
			maxTokens = mt
		}
	}
	if f.temp >= 0 {
		p.Temperature = float32(f.temp)
	}
	if f.topK >= 0 {
		p.TopK = f.topK
	}
	if f.topP >= 0 {
		p.TopP = float32(f.topP)
	}
	if f.minP >= 0 {
		p.MinP = float32(f.minP)
	}
	if f.repPen >= 0 {
		p.RepetitionPenalty = float32(f.repPen)
	}
	p.Seed = f.seed
	return p, maxTokens, nil
}

// parseTokenIDs parses --prompt-ids: comma-separated token ids.
func parseTokenIDs(s string) ([]int32, error) {
	var ids []int32
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil {
			return nil, usagef("--prompt-ids: %q is not a token id", f)
		}
		ids = append(ids, int32(n))
	}
	return ids, nil
}

// generate runs req on the loaded model and writes the text as it comes
// with a usage line on stderr, or (asJSON) one genOutput document.
//
// With split (a thinking model's output) the JSON document has the
// reasoning apart from the text; the streamed text is the model's, tags
// and all.
func generate(ctx context.Context, l *engine.Loaded, req engine.Request, asJSON, split bool) error {
	eng, err := engine.New(l.Model, l.Tokenizer, engine.Config{})
	if err != nil {
		return err
	}
	if !asJSON {
		req.OnToken = func(t engine.Token) error {
			_, err := io.WriteString(stdout, t.Text)
			return err
		}
	}
	res, err := eng.Generate(ctx, req)
	if err != nil {
		return err
	}
	if asJSON {
		return writeGenJSON(res, req.Tools, split)
	}
	fmt.Fprintln(stdout)
	if res.Err != nil {
		return res.Err
	}
	u := res.Usage
	// Time per token is over the gaps after the first token: none with
	// one token (it read "0.00 ms/token (1000000000000 tok/s)").
	rate := "no time per token with one token"
	if u.OutputTokens > 1 && u.TimePerTokenMs > 0 {
		rate = fmt.Sprintf("%.2f ms/token (%.0f tok/s)", u.TimePerTokenMs, 1000/u.TimePerTokenMs)
	}
	fmt.Fprintf(os.Stderr, "[%s] %d prompt + %d generated tokens, first token %.1f ms (prompt %.0f tok/s), %s\n",
		res.StopReason, u.InputTokens, u.OutputTokens, u.TimeToFirstTokenMs, float64(u.InputTokens)/max(u.TimeToFirstTokenMs, 1e-9)*1000, rate)
	if res.Retries > 0 {
		fmt.Fprintf(os.Stderr, "%d attempts; %d of the generated tokens were discarded by retries\n", res.Retries+1, u.RetriedOutputTokens)
	}
	if res.Incomplete {
		fmt.Fprintf(os.Stderr, "incomplete: %s\n", res.IncompleteReason)
	}
	return nil
}

// writeGenJSON writes the --format json document of res to stdout; run is
// the request's tool run (nil without one).
func writeGenJSON(res *engine.Result, run *tools.Run, split bool) error {
	out := genOutput{PromptIDs: res.PromptIDs, OutputIDs: res.OutputIDs, Text: res.Text, StopReason: res.StopReason, Usage: res.Usage,
		Incomplete: res.Incomplete, IncompleteReason: res.IncompleteReason}
	if split {
		out.Reasoning, out.Text = chat.SplitReasoning(res.Text)
	}
	if res.Retries > 0 {
		out.Attempts = res.Retries + 1
	}
	if run != nil {
		out.ToolReport, out.ToolTimeMs = run.Report(), run.TimeMs()
	}
	if res.Err != nil {
		out.Error = contracts.ErrorFrom(res.Err)
	}
	if out.OutputIDs == nil {
		out.OutputIDs = []int32{}
	}
	for _, step := range res.TopLogprobs {
		row := make([]logprobEntry, 0, len(step))
		for _, t := range step {
			// A masked token (-Inf) is no alternative, and no JSON number:
			// left out, as on the wire (contracts.TokenLogprob).
			if !math.IsInf(float64(t.Logprob), 0) && t.Logprob == t.Logprob {
				row = append(row, logprobEntry{t.ID, t.Logprob})
			}
		}
		out.TopLogprobs = append(out.TopLogprobs, row)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// genTools compiles the constrained-decoding and tool flags, and the tools
// declared inline in the system prompt (after --tools', as the worker
// puts them after tools[]), into a tool run (nil when none is given).
func genTools(schemaFile, regex, toolsJSON string, inline []contracts.Tool, l *engine.Loaded) (*tools.Run, error) {
	var rf *contracts.ResponseFormat
	switch {
	case schemaFile != "" && regex != "":
		return nil, usagef("give --schema or --regex, not both")
	case schemaFile != "":
		b, err := os.ReadFile(schemaFile)
		if err != nil {
			return nil, err
		}
		rf = &contracts.ResponseFormat{Type: contracts.FormatJSONSchema, Schema: b}
	case regex != "":
		rf = &contracts.ResponseFormat{Type: contracts.FormatRegex, Pattern: regex}
	}
	var specs []contracts.Tool
	if toolsJSON != "" {
		if err := json.Unmarshal([]byte(toolsJSON), &specs); err != nil {
			return nil, usagef("--tools: %v", err)
		}
	}
	specs = append(specs, inline...)
	if rf == nil && len(specs) == 0 {
		return nil, nil
	}
	set, err := tools.Compile(specs, rf, l.Tokenizer, tools.Budget{})
	if err != nil {
		return nil, err
	}
	return set.NewRun(), nil
}

// embedPrompt prints the embedding of ids (gen --embed).
func embedPrompt(ctx context.Context, l *engine.Loaded, ids []int32, pooling string, dimensions int) error {
	var opts engine.EmbedOptions
	if pooling != "" {
		p, err := model.ParsePooling(pooling)
		if err != nil {
			return usagef("--pooling: %v", err)
		}
		opts.Pooling = p
	}
	if dimensions < 0 || dimensions > l.Model.Dim {
		return usagef("--dimensions %d: want 1 to the model's width %d", dimensions, l.Model.Dim)
	}
	opts.Dimensions = dimensions
	e, err := engine.New(l.Model, l.Tokenizer, engine.Config{KVBlocks: max(1, (len(ids)+gpu.DefaultBlockTokens-1)/gpu.DefaultBlockTokens)})
	if err != nil {
		return err
	}
	vs, err := e.Embed(ctx, [][]int32{ids}, opts)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	return enc.Encode(struct {
		Embedding    []float32 `json:"embedding"`
		Dimensions   int       `json:"dimensions"`
		Pooling      string    `json:"pooling"`
		PromptTokens int       `json:"prompt_tokens"`
	}{vs[0], len(vs[0]), engine.ResolvePooling(l.Model, opts.Pooling).String(), len(ids)})
}
