package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/tokenizer"
	"github.com/zerolayer/zerolayer/worker/sample"
	"github.com/zerolayer/zerolayer/worker/tools"
)

// Stop reasons reported in Result.StopReason.
const (
	StopEndTurn      = "end_turn"       // the model produced an end-of-generation token
	StopMaxTokens    = "max_tokens"     // MaxTokens were generated
	StopSequence     = "stop_sequence"  // a stop sequence matched
	StopContextLimit = "context_length" // the context window is full
	StopCanceled     = "canceled"       // the context was canceled
	StopMemoryLimit  = "memory_limit"   // the request reached its KV memory cap
	StopConstraint   = "constraint"     // an output constraint admits nothing longer
	StopToolError    = "tool_error"     // an inline tool failed (Result.Err says why)
)

// Config configures an Engine.
type Config struct {
	// KVBlocks is the number of KV blocks in the arena. Defaults to enough
	// for DefaultKVContexts (2) sequences of the full context
	// (DefaultKVBlocks).
	KVBlocks int
	// BlockTokens is the number of positions per KV block. Defaults to
	// gpu.DefaultBlockTokens (16).
	BlockTokens int
}

// Engine runs generation requests on one model. It decodes the requests of
// one Generate call together, one token per sequence per step, in a single
// batched forward pass. It is the in-order executor the scheduler replaces:
// calls are serialised.
type Engine struct {
	m   *model.Model
	tok *tokenizer.Tokenizer
	cfg Config
	kv  *kvPool
}

// New returns an engine for m, tokenizing with tok.
func New(m *model.Model, tok *tokenizer.Tokenizer, cfg Config) (*Engine, error) {
	if cfg.BlockTokens <= 0 {
		cfg.BlockTokens = gpu.DefaultBlockTokens
	}
	if cfg.KVBlocks <= 0 {
		cfg.KVBlocks = DefaultKVBlocks(m.Context, cfg.BlockTokens)
	}
	kv, err := m.NewKV(cfg.KVBlocks, cfg.BlockTokens)
	if err != nil {
		return nil, err
	}
	return &Engine{m: m, tok: tok, cfg: cfg, kv: newKVPool(kv)}, nil
}

// Model returns the engine's model.
func (e *Engine) Model() *model.Model { return e.m }

// Tokenizer returns the engine's tokenizer.
func (e *Engine) Tokenizer() *tokenizer.Tokenizer { return e.tok }

// Request is one generation.
type Request struct {
	// PromptIDs are the prompt tokens, BOS included if wanted. Required.
	PromptIDs []int32
	// MaxTokens caps the generated tokens. Defaults to the rest of the
	// context.
	MaxTokens int
	// Sampling chooses tokens; the zero value is greedy.
	Sampling sample.Params
	// Stop ends generation when the output text contains one of them; the
	// stop sequence is not part of the output.
	Stop []string
	// TopLogprobs > 0 records that many alternatives per step.
	TopLogprobs int
	// IgnoreEOS keeps generating past end-of-generation tokens.
	IgnoreEOS bool
	// OnToken, if set, is called with each token as it is produced;
	// returning an error cancels this request. Text the inline tools add
	// at the end (a suffix, released hold-back) comes as a Token with ID
	// -1.
	OnToken func(Token) error
	// Tools, if set, are the request's inline tools: they mask the logits,
	// filter the streamed text, validate the output and may ask for a
	// retry.
	Tools *tools.Run
	// RetryWithoutFailedTools implements on_tool_failure
	// retry_without_tool: a failing tool is dropped and the output
	// generated again without it.
	RetryWithoutFailedTools bool
	// OnToolEvent, if set, receives the tools' actions (redacted, masked,
	// retried, appended, violated, failed).
	OnToolEvent func(tools.ToolEvent)
}

// Token is one generated token.
type Token struct {
	ID      int32
	Text    string // text that became complete with this token (may be empty)
	Logprob float32
	Top     []sample.TokenLogprob
}

// Usage is what one generation consumed.
type Usage struct {
	InputTokens        int     `json:"input_tokens"`
	OutputTokens       int     `json:"output_tokens"`
	TimeToFirstTokenMs float64 `json:"time_to_first_token_ms"`
	TimePerTokenMs     float64 `json:"time_per_token_ms"`
	// GapsMs are the times between consecutive sampled tokens, for
	// percentiles.
	GapsMs []float64 `json:"-"`
	// TotalMs is the time from the start of the call to the end of this
	// request.
	TotalMs float64 `json:"-"`
	// KVBytes is the peak KV cache memory the request held of its own
	// (blocks it computed).
	KVBytes int64 `json:"-"`
	// SharedKVBytes is the peak KV cache memory it held that another
	// request computed and counts (prefix-cache blocks), apart from
	// KVBytes.
	SharedKVBytes int64 `json:"-"`
	// ToolBytes is the memory its inline tools held at the end
	// (tools.Run.MemoryBytes).
	ToolBytes int64 `json:"-"`
	// Confidence is the mean probability of the chosen tokens.
	Confidence float64 `json:"-"`
	// ToolMs is the time spent in inline tools.
	ToolMs float64 `json:"tool_execution_time_ms,omitempty"`
}

// Result is a finished generation.
type Result struct {
	PromptIDs  []int32
	OutputIDs  []int32
	Text       string
	StopReason string
	// StopSequence is the stop sequence that ended the text
	// (StopSequence).
	StopSequence string
	Usage        Usage
	Logprobs     []float32
	TopLogprobs  [][]sample.TokenLogprob
	// Err is set when an inline tool failed (StopToolError): a
	// *contracts.Error naming the tool.
	Err error
	// Retries counts regenerations asked for by the tools.
	Retries int
}

// Generate runs one request.
func (e *Engine) Generate(ctx context.Context, req Request) (*Result, error) {
	res, err := e.GenerateBatch(ctx, []Request{req})
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// GenerateBatch runs the requests together and returns their results in
// order. A request that fails validation fails the call before anything
// runs; a canceled context ends every request with StopCanceled.
func (e *Engine) GenerateBatch(ctx context.Context, reqs []Request) ([]*Result, error) {
	type run struct {
		g        *Generation
		computed int // tokens whose K/V is in the cache; the rest run next step
		blocks   []int32
	}
	runs := make([]*run, len(reqs))
	needBlocks := 0
	for i := range reqs {
		g, err := NewGeneration(e.m, e.tok, &reqs[i])
		if err != nil {
			return nil, fmt.Errorf("request %d: %w", i, err)
		}
		runs[i] = &run{g: g}
		needBlocks += e.blocksFor(len(reqs[i].PromptIDs) + g.MaxNew())
	}
	if needBlocks > e.kv.capacity() {
		return nil, fmt.Errorf("%w: the batch needs up to %d blocks of %d tokens, the arena has %d", ErrNoMemory, needBlocks, e.cfg.BlockTokens, e.kv.capacity())
	}
	defer func() {
		for _, r := range runs {
			e.kv.release(r.blocks)
		}
	}()
	vocab := e.m.Vocab
	var toks, pos, seqIdx, rows []int32
	var tables [][]int32
	var logits []float32
	var live []*run
	var batch gpu.Batch
	for {
		toks, pos, seqIdx, rows, tables, live = toks[:0], pos[:0], seqIdx[:0], rows[:0], tables[:0], live[:0]
		for _, r := range runs {
			if r.g.Done() {
				continue
			}
			if err := ctx.Err(); err != nil {
				r.g.Finish(StopCanceled)
				continue
			}
			all := r.g.Tokens()
			for len(r.blocks) < e.blocksFor(len(all)) {
				r.blocks = append(r.blocks, e.kv.take())
			}
			r.g.NoteKVBytes(int64(len(r.blocks)) * e.blockBytes())
			for j := r.computed; j < len(all); j++ {
				toks = append(toks, all[j])
				pos = append(pos, int32(j))
				seqIdx = append(seqIdx, int32(len(live)))
			}
			rows = append(rows, int32(len(toks)-1))
			tables = append(tables, r.blocks)
			live = append(live, r)
		}
		if len(live) == 0 {
			break
		}
		if cap(logits) < len(rows)*vocab {
			logits = make([]float32, len(rows)*vocab)
		}
		logits = logits[:len(rows)*vocab]
		batch = gpu.Batch{Pos: pos, Seq: seqIdx, Tables: tables}
		if err := e.m.Forward(e.kv.arena, toks, &batch, rows, logits); err != nil {
			return nil, err
		}
		now := time.Now()
		for i, r := range live {
			r.computed = len(r.g.Tokens())
			if _, ok := r.g.Observe(logits[i*vocab:(i+1)*vocab], now); !ok && !r.g.Done() {
				// The tools asked for a retry (the output is gone): run the
				// last prompt token again (its K/V is rewritten identically).
				r.computed = len(r.g.Request().PromptIDs) - 1
			}
		}
	}
	out := make([]*Result, len(runs))
	for i, r := range runs {
		out[i] = r.g.Result()
	}
	return out, nil
}

// blockBytes is the size of one KV block.
func (e *Engine) blockBytes() int64 { return int64(e.kv.arena.Config().BlockFloats()) * 4 }

func (e *Engine) blocksFor(tokens int) int {
	return (tokens + e.cfg.BlockTokens - 1) / e.cfg.BlockTokens
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
