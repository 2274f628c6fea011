package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/tokenizer"
	"github.com/zerolayer/zerolayer/worker/sample"
)

// Stop reasons reported in Result.StopReason.
const (
	StopEndTurn      = "end_turn"       // the model produced an end-of-generation token
	StopMaxTokens    = "max_tokens"     // MaxTokens were generated
	StopSequence     = "stop_sequence"  // a stop sequence matched
	StopContextLimit = "context_length" // the context window is full
	StopCanceled     = "canceled"       // the context was canceled
)

// Config configures an Engine.
type Config struct {
	// KVBlocks is the number of KV blocks in the arena. Defaults to enough
	// for 4 sequences of the full context.
	KVBlocks int
	// BlockTokens is the number of positions per KV block. Defaults to 16.
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
		cfg.BlockTokens = 16
	}
	if cfg.KVBlocks <= 0 {
		cfg.KVBlocks = 4 * ((m.Context + cfg.BlockTokens - 1) / cfg.BlockTokens)
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
	// returning an error cancels this request.
	OnToken func(Token) error
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
	// KVBytes is the peak KV cache memory the request held.
	KVBytes int64 `json:"-"`
	// Confidence is the mean probability of the chosen tokens.
	Confidence float64 `json:"-"`
}

// Result is a finished generation.
type Result struct {
	PromptIDs   []int32
	OutputIDs   []int32
	Text        string
	StopReason  string
	Usage       Usage
	Logprobs    []float32
	TopLogprobs [][]sample.TokenLogprob
}

// seq is one request in flight.
type seq struct {
	req     *Request
	res     *Result
	sampler *sample.Sampler
	dec     *tokenizer.StreamDecoder
	stop    *sample.StopMatcher
	history []int32
	feed    []int32 // tokens to run next step
	pos     int32   // position of feed[0]
	blocks  []int32
	max     int
	done    bool
	err     error
	start   time.Time
	first   time.Time
	last    time.Time
	probSum float64 // sum of the chosen tokens' probabilities
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
	seqs := make([]*seq, len(reqs))
	needBlocks := 0
	for i := range reqs {
		s, err := e.newSeq(&reqs[i])
		if err != nil {
			return nil, fmt.Errorf("request %d: %w", i, err)
		}
		seqs[i] = s
		needBlocks += e.blocksFor(len(s.feed) + s.max)
	}
	if needBlocks > e.kv.capacity() {
		return nil, fmt.Errorf("%w: the batch needs up to %d blocks of %d tokens, the arena has %d", ErrNoMemory, needBlocks, e.cfg.BlockTokens, e.kv.capacity())
	}
	defer func() {
		for _, s := range seqs {
			e.kv.release(s.blocks)
		}
	}()
	vocab := e.m.Vocab
	var toks, pos, seqIdx, rows []int32
	var tables [][]int32
	var logits []float32
	for {
		toks, pos, seqIdx, rows, tables = toks[:0], pos[:0], seqIdx[:0], rows[:0], tables[:0]
		var live []*seq
		for _, s := range seqs {
			if s.done {
				continue
			}
			if err := ctx.Err(); err != nil {
				s.finish(StopCanceled)
				continue
			}
			need := e.blocksFor(int(s.pos) + len(s.feed))
			for len(s.blocks) < need {
				s.blocks = append(s.blocks, e.kv.take())
			}
			s.res.Usage.KVBytes = max(s.res.Usage.KVBytes, int64(len(s.blocks))*e.blockBytes())
			for j, id := range s.feed {
				toks = append(toks, id)
				pos = append(pos, s.pos+int32(j))
				seqIdx = append(seqIdx, int32(len(live)))
			}
			rows = append(rows, int32(len(toks)-1))
			tables = append(tables, s.blocks)
			live = append(live, s)
		}
		if len(live) == 0 {
			break
		}
		if cap(logits) < len(rows)*vocab {
			logits = make([]float32, len(rows)*vocab)
		}
		logits = logits[:len(rows)*vocab]
		if err := e.m.Forward(e.kv.arena, toks, &gpu.Batch{Pos: pos, Seq: seqIdx, Tables: tables}, rows, logits); err != nil {
			return nil, err
		}
		now := time.Now()
		for i, s := range live {
			s.pos += int32(len(s.feed))
			s.step(logits[i*vocab:(i+1)*vocab], now, e)
		}
	}
	out := make([]*Result, len(seqs))
	for i, s := range seqs {
		out[i] = s.res
		if s.err != nil {
			return nil, s.err
		}
	}
	return out, nil
}

// blockBytes is the size of one KV block.
func (e *Engine) blockBytes() int64 { return int64(e.kv.arena.Config().BlockFloats()) * 4 }

func (e *Engine) blocksFor(tokens int) int {
	return (tokens + e.cfg.BlockTokens - 1) / e.cfg.BlockTokens
}

func (e *Engine) newSeq(r *Request) (*seq, error) {
	if len(r.PromptIDs) == 0 {
		return nil, ErrEmptyPrompt
	}
	for _, id := range r.PromptIDs {
		if id < 0 || int(id) >= e.m.Vocab {
			return nil, fmt.Errorf("%w: prompt token id %d is outside the vocabulary [0,%d)", ErrBadRequest, id, e.m.Vocab)
		}
	}
	ctxLen := e.m.Context
	if len(r.PromptIDs) >= ctxLen {
		return nil, fmt.Errorf("%w: %d prompt tokens, the context holds %d (with room for at least one generated token)", ErrPromptTooLong, len(r.PromptIDs), ctxLen)
	}
	if r.MaxTokens < 0 {
		return nil, fmt.Errorf("%w: max_tokens %d is negative", ErrBadRequest, r.MaxTokens)
	}
	if r.TopLogprobs < 0 || r.TopLogprobs > 20 {
		return nil, fmt.Errorf("%w: top_logprobs %d is outside [0, 20]", ErrBadRequest, r.TopLogprobs)
	}
	sm, err := sample.New(r.Sampling)
	if err != nil {
		return nil, err
	}
	room := ctxLen - len(r.PromptIDs)
	mx := r.MaxTokens
	if mx == 0 || mx > room {
		mx = room
	}
	s := &seq{
		req:     r,
		res:     &Result{PromptIDs: r.PromptIDs},
		sampler: sm,
		dec:     e.tok.NewDecoderAfter(r.PromptIDs[len(r.PromptIDs)-1]),
		stop:    sample.NewStopMatcher(r.Stop),
		history: append([]int32(nil), r.PromptIDs...),
		feed:    r.PromptIDs,
		max:     mx,
		start:   time.Now(),
	}
	s.res.Usage.InputTokens = len(r.PromptIDs)
	return s, nil
}

// step consumes the logits of the sequence's last row.
func (s *seq) step(logits []float32, now time.Time, e *Engine) {
	ch := s.sampler.Sample(logits, s.history, s.req.TopLogprobs)
	if s.first.IsZero() {
		s.first = now
	} else {
		s.res.Usage.GapsMs = append(s.res.Usage.GapsMs, ms(now.Sub(s.last)))
	}
	s.last = now
	s.probSum += float64(ch.Prob)
	if !s.req.IgnoreEOS && e.tok.IsEOG(ch.ID) {
		s.finish(StopEndTurn)
		return
	}
	r := s.res
	r.OutputIDs = append(r.OutputIDs, ch.ID)
	r.Logprobs = append(r.Logprobs, ch.Logprob)
	if s.req.TopLogprobs > 0 {
		r.TopLogprobs = append(r.TopLogprobs, ch.Top)
	}
	s.history = append(s.history, ch.ID)
	text, stopped := s.stop.Push(s.dec.Add(ch.ID))
	r.Text += text
	if s.req.OnToken != nil {
		if err := s.req.OnToken(Token{ID: ch.ID, Text: text, Logprob: ch.Logprob, Top: ch.Top}); err != nil {
			s.finish(StopCanceled)
			return
		}
	}
	switch {
	case stopped:
		s.finish(StopSequence)
	case len(r.OutputIDs) >= s.max:
		if int(s.pos)+1 >= e.m.Context && s.max < s.req.MaxTokens {
			s.finish(StopContextLimit)
		} else {
			s.finish(StopMaxTokens)
		}
	default:
		s.feed = []int32{ch.ID}
	}
}

func (s *seq) finish(reason string) {
	if s.done {
		return
	}
	s.done = true
	r := s.res
	if reason != StopSequence && reason != StopCanceled {
		tail, _ := s.stop.Push(s.dec.Flush())
		r.Text += tail + s.stop.Flush()
	}
	r.StopReason = reason
	u := &r.Usage
	u.OutputTokens = len(r.OutputIDs)
	u.TotalMs = ms(time.Since(s.start))
	if n := len(u.GapsMs) + 1; !s.first.IsZero() {
		u.Confidence = s.probSum / float64(n)
	}
	if !s.first.IsZero() {
		u.TimeToFirstTokenMs = ms(s.first.Sub(s.start))
		if u.OutputTokens > 1 {
			u.TimePerTokenMs = ms(s.last.Sub(s.first)) / float64(u.OutputTokens-1)
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
