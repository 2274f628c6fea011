package engine

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/tokenizer"
	"github.com/zerolayer/zerolayer/worker/sample"
)

// Generation is the decoding state of one request: sampling, streaming
// text, stop conditions and usage. It does not run the model: the Engine,
// or the scheduler, feeds it the logits of the request's last row after
// each forward pass. A Generation is used by one goroutine at a time.
type Generation struct {
	req     *Request
	res     *Result
	sampler *sample.Sampler
	dec     *tokenizer.StreamDecoder
	stop    *sample.StopMatcher
	tok     *tokenizer.Tokenizer
	history []int32         // prompt and generated tokens
	text    strings.Builder // output text so far; Result().Text at the end
	max     int             // generated tokens allowed
	context int
	done    bool
	start   time.Time
	first   time.Time
	last    time.Time
	probSum float64 // sum of the chosen tokens' probabilities
	mask    []uint64
	// A mask computed ahead by PrefetchMask, while the forward pass ran.
	maskReady       bool
	maskConstrained bool
	maskErr         error
	// retried counts the tokens of discarded attempts (restart): they
	// ran, and usage counts them.
	retried int
	// decoded is this attempt's output as the decoder gave it, before
	// the tools, and decEnd[i] its length after output token i: where a
	// retry marker began, in tokens. Kept only when a retry_on_fail tool
	// is declared (tools.Run.Markers).
	decoded []byte
	decEnd  []int
	// bans are the tokens a retry may not take at a position while it
	// follows a failed attempt (retry_on_fail).
	bans []retryBan
	// incomplete says why the output is incomplete (a budget stop).
	incomplete []string
}

// retryBan bans token after exactly prefix in a retry: the failed
// attempt began its marker there.
type retryBan struct {
	prefix []int32
	token  int32
}

// Admitted restarts g's clock at t, when a scheduler admits the job after
// it waited in a queue: its time to first token and total time count from
// admission (the usage contract), not from when g was made, so that the
// wait is counted once, in the queue time.
func (g *Generation) Admitted(t time.Time) { g.start = t }

// NewGeneration validates r against the model and starts its clock.
func NewGeneration(m *model.Model, tok *tokenizer.Tokenizer, r *Request) (*Generation, error) {
	if m.Encoder {
		return nil, fmt.Errorf("%w: %w: %s is an embedding model and does not generate text", ErrBadRequest, model.ErrEncoderOnly, m.Arch)
	}
	if len(r.PromptIDs) == 0 {
		return nil, ErrEmptyPrompt
	}
	for _, id := range r.PromptIDs {
		if id < 0 || int(id) >= m.Vocab {
			return nil, fmt.Errorf("%w: prompt token id %d is outside the vocabulary [0,%d)", ErrBadRequest, id, m.Vocab)
		}
	}
	if len(r.PromptIDs) >= m.Context {
		return nil, fmt.Errorf("%w: %d prompt tokens, the context holds %d (with room for at least one generated token)", ErrPromptTooLong, len(r.PromptIDs), m.Context)
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
	room := m.Context - len(r.PromptIDs)
	mx := r.MaxTokens
	if mx == 0 || mx > room {
		mx = room
	}
	g := &Generation{
		req:     r,
		res:     &Result{PromptIDs: r.PromptIDs},
		sampler: sm,
		dec:     tok.NewDecoderAfter(r.PromptIDs[len(r.PromptIDs)-1]),
		stop:    sample.NewStopMatcher(r.Stop),
		tok:     tok,
		history: append([]int32(nil), r.PromptIDs...),
		max:     mx,
		context: m.Context,
		start:   time.Now(),
	}
	g.res.Usage.InputTokens = len(r.PromptIDs)
	return g, nil
}

// MaxNew is the most tokens the generation may still produce in all.
func (g *Generation) MaxNew() int { return g.max }

// Tokens returns the prompt and the tokens generated so far (not to be
// modified).
func (g *Generation) Tokens() []int32 { return g.history }

// Done reports whether the generation has finished.
func (g *Generation) Done() bool { return g.done }

// Request returns the request.
func (g *Generation) Request() *Request { return g.req }

// NoteKVBytes records the KV memory the request holds now; usage reports
// the peak.
func (g *Generation) NoteKVBytes(n int64) {
	g.res.Usage.KVBytes = max(g.res.Usage.KVBytes, n)
}

// NoteSharedKVBytes records the KV memory the request holds now that it
// shares, computed by another request (a prefix cache's blocks): it is
// not in NoteKVBytes's count. Usage reports the peak.
func (g *Generation) NoteSharedKVBytes(n int64) {
	g.res.Usage.SharedKVBytes = max(g.res.Usage.SharedKVBytes, n)
}

// Observe consumes the logits of the request's last row: it samples the
// next token, streams its text, and checks the stop conditions. It returns
// the token to feed next and true, or false when the generation finished.
func (g *Generation) Observe(logits []float32, now time.Time) (int32, bool) {
	if g.done {
		return 0, false
	}
	t := g.req.Tools
	if t != nil {
		if !g.maskReady {
			g.PrefetchMask(len(logits))
		}
		constrained, err := g.maskConstrained, g.maskErr
		g.maskReady = false
		if err != nil {
			return g.toolFailed(err)
		}
		if constrained {
			applyMask(logits, g.mask)
		}
	}
	if len(g.bans) > 0 {
		g.applyBans(logits)
	}
	maskPadding(logits, g.tok.VocabSize())
	ch := g.sampler.Sample(logits, g.history, g.req.TopLogprobs)
	if g.first.IsZero() {
		g.first = now
	} else {
		g.res.Usage.GapsMs = append(g.res.Usage.GapsMs, ms(now.Sub(g.last)))
	}
	g.last = now
	g.probSum += float64(ch.Prob)
	if !g.req.IgnoreEOS && g.tok.IsEOG(ch.ID) {
		g.Finish(StopEndTurn)
		return 0, false
	}
	if t != nil {
		if err := t.Accept(ch.ID); err != nil {
			return g.toolFailed(err)
		}
	}
	r := g.res
	r.OutputIDs = append(r.OutputIDs, ch.ID)
	r.Logprobs = append(r.Logprobs, ch.Logprob)
	if g.req.TopLogprobs > 0 {
		r.TopLogprobs = append(r.TopLogprobs, ch.Top)
	}
	g.history = append(g.history, ch.ID)
	piece := g.dec.Add(ch.ID)
	if t != nil {
		if t.Markers() {
			g.decoded = append(g.decoded, piece...)
			g.decEnd = append(g.decEnd, len(g.decoded))
		}
		var err error
		if piece, err = t.Text(piece); err != nil {
			return g.toolFailed(err)
		}
		g.toolEvents()
	}
	text, stopped := g.stop.Push(piece)
	g.text.WriteString(text)
	if g.req.OnToken != nil {
		if err := g.req.OnToken(Token{ID: ch.ID, Text: text, Logprob: ch.Logprob, Top: ch.Top}); err != nil {
			g.Finish(StopCanceled)
			return 0, false
		}
	}
	switch {
	case stopped:
		g.Finish(StopSequence)
	case t != nil && t.Complete():
		g.Finish(StopConstraint)
	case len(r.OutputIDs) >= g.max:
		if len(g.history) >= g.context && (g.req.MaxTokens == 0 || g.max < g.req.MaxTokens) {
			g.Finish(StopContextLimit)
		} else {
			g.Finish(StopMaxTokens)
		}
	default:
		return ch.ID, true
	}
	// Done, or restarting after a retry (Done false): the runner feeds the
	// last prompt token again.
	return 0, false
}

// PrefetchMask computes the token mask for the next sampling step of a
// request with tools (vocab entries). The tools' state depends only on the
// tokens already accepted, so a runner may call it on another goroutine
// while the forward pass that produces the logits runs; Observe then uses
// it. It does nothing without tools.
func (g *Generation) PrefetchMask(vocab int) {
	t := g.req.Tools
	if t == nil || g.done || g.maskReady {
		return // a mask still unused (its step was interrupted) stays valid
	}
	if g.mask == nil {
		g.mask = make([]uint64, (vocab+63)/64)
	}
	g.maskConstrained, g.maskErr = t.Mask(g.mask)
	g.maskReady = true
}

// applyBans sets to -Inf the logits of the tokens banned at this position
// of a retry that has followed a failed attempt token for token, unless
// that would leave no token to choose.
func (g *Generation) applyBans(logits []float32) {
	out := g.res.OutputIDs
	var banned []int32
	for _, b := range g.bans {
		if len(b.prefix) == len(out) && slices.Equal(b.prefix, out) && int(b.token) < len(logits) {
			banned = append(banned, b.token)
		}
	}
	if len(banned) == 0 {
		return
	}
	inf := float32(math.Inf(-1))
	left := false
	for id, l := range logits {
		if l > inf && !slices.Contains(banned, int32(id)) {
			left = true
			break
		}
	}
	if !left {
		return // the constraints allow nothing else: better a repeat than no token
	}
	for _, id := range banned {
		logits[id] = inf
	}
}

// banRetry records where the failed attempt began marker, so that the
// retry, while it follows that attempt, takes another token there: the
// token whose text began the marker, or the attempt's first token when the
// marker is not in the decoded text (a redactor made it).
func (g *Generation) banRetry(marker string) {
	out := g.res.OutputIDs
	if len(out) == 0 {
		return
	}
	at := 0
	if i := strings.Index(string(g.decoded), marker); i >= 0 && marker != "" {
		at = len(out) - 1
		for j, end := range g.decEnd {
			if end > i {
				at = j
				break
			}
		}
	}
	g.bans = append(g.bans, retryBan{prefix: slices.Clone(out[:at]), token: out[at]})
}

// HasTools reports whether the request has inline tools.
func (g *Generation) HasTools() bool { return g.req.Tools != nil }

// applyMask sets the logits of tokens not in the packed bitset to -Inf.
func applyMask(logits []float32, mask []uint64) {
	inf := float32(math.Inf(-1))
	for w, bits := range mask {
		if bits == ^uint64(0) {
			continue
		}
		base := w * 64
		for b := 0; b < 64 && base+b < len(logits); b++ {
			if bits&(1<<b) == 0 {
				logits[base+b] = inf
			}
		}
	}
}

// toolFailed handles a tool error: with on_tool_failure
// retry_without_tool the failed tools are dropped and generation restarts;
// otherwise the request ends with StopToolError.
func (g *Generation) toolFailed(err error) (int32, bool) {
	t := g.req.Tools
	g.toolEvents()
	if g.req.RetryWithoutFailedTools && len(t.DropFailed()) > 0 {
		g.restart()
		return 0, false
	}
	g.res.Err = err
	g.Finish(StopToolError)
	return 0, false
}

// toolEvents forwards the tools' actions.
func (g *Generation) toolEvents() {
	if g.req.Tools == nil || g.req.OnToolEvent == nil {
		return
	}
	for _, ev := range g.req.Tools.Events() {
		g.req.OnToolEvent(ev)
	}
}

// restart discards the output and starts again from the prompt (a retry
// asked for by the tools). The runner feeds the last prompt token again.
func (g *Generation) restart() {
	r := g.res
	g.retried += len(r.OutputIDs)
	r.OutputIDs, r.Logprobs, r.TopLogprobs = nil, nil, nil
	g.decoded, g.decEnd = g.decoded[:0], g.decEnd[:0]
	g.incomplete = nil
	g.text.Reset()
	g.maskReady = false // the tools start over
	r.Retries++
	g.history = g.history[:len(g.req.PromptIDs)]
	g.dec = g.tok.NewDecoderAfter(g.req.PromptIDs[len(g.req.PromptIDs)-1])
	g.stop = sample.NewStopMatcher(g.req.Stop)
	g.req.Tools.Reset()
}

// Finish ends the generation with reason (one of the Stop constants); it
// is a no-op once finished.
func (g *Generation) Finish(reason string) {
	if g.done {
		return
	}
	r := g.res
	t := g.req.Tools
	budget := budgetName(reason)
	if reason != StopSequence && reason != StopCanceled && reason != StopToolError {
		rest := g.dec.Flush()
		if budget != "" && rest != "" {
			// The decoder holds back only a character that more tokens
			// could still complete: the budget ended inside it. Its
			// bytes are left out, so the text stays valid UTF-8.
			g.incomplete = append(g.incomplete, fmt.Sprintf("the output ended at %s inside a UTF-8 character; its %d byte(s) are left out of the text", budget, len(rest)))
			rest = ""
		}
		if t != nil {
			if t.Markers() {
				g.decoded = append(g.decoded, rest...)
			}
			var err error
			if rest, err = t.Text(rest); err != nil {
				g.toolFailed(err)
				return
			}
		}
		tail, _ := g.stop.Push(rest)
		g.emitTail(tail + g.stop.Flush())
	}
	natural := reason == StopEndTurn || reason == StopMaxTokens || reason == StopSequence || reason == StopConstraint
	if t != nil && reason != StopCanceled && reason != StopToolError {
		if natural && t.Retry(g.text.String()) {
			g.toolEvents()
			g.banRetry(t.RetryMarker())
			g.restart()
			return
		}
		if budget != "" {
			if why := t.Truncate(budget); why != "" {
				g.incomplete = append([]string{why}, g.incomplete...)
			}
		}
		suffix, err := t.Finish()
		g.toolEvents()
		if err != nil {
			if natural {
				g.toolFailed(err)
			} else {
				g.res.Err = err
				g.Finish(StopToolError)
			}
			return
		}
		g.emitTail(suffix)
	}
	g.done = true
	r.Text = g.text.String()
	r.StopReason = reason
	if budget != "" && len(g.incomplete) > 0 {
		r.Incomplete, r.IncompleteReason = true, strings.Join(g.incomplete, "; ")
	}
	if reason == StopSequence {
		r.StopSequence = g.stop.Matched()
	}
	if t != nil {
		r.Usage.ToolMs = t.TimeMs()
		r.Usage.ToolBytes = t.MemoryBytes()
	}
	u := &r.Usage
	u.OutputTokens = len(r.OutputIDs) + g.retried
	u.RetriedOutputTokens = g.retried
	u.TotalMs = ms(time.Since(g.start))
	if n := len(u.GapsMs) + 1; !g.first.IsZero() {
		u.Confidence = g.probSum / float64(n)
		u.TimeToFirstTokenMs = ms(g.first.Sub(g.start))
		if u.OutputTokens > 1 {
			u.TimePerTokenMs = ms(g.last.Sub(g.first)) / float64(u.OutputTokens-1)
		}
	}
}

// budgetName names the budget a stop reason ran into ("max_tokens",
// "context_length", "memory_limit"), or "" for the other reasons.
func budgetName(reason string) string {
	switch reason {
	case StopMaxTokens, StopContextLimit, StopMemoryLimit:
		return reason
	}
	return ""
}

// emitTail adds text produced at the end (flushed hold-back, a suffix).
func (g *Generation) emitTail(s string) {
	if s == "" {
		return
	}
	g.text.WriteString(s)
	if g.req.OnToken != nil {
		g.req.OnToken(Token{ID: -1, Text: s})
	}
}

// Result returns the result; complete once Done.
func (g *Generation) Result() *Result { return g.res }

// Forced returns the text the request's constraints force its output to
// take next, at most max bytes (tools.Run.Forced), or nil: a draft for a
// runner that verifies drafts. The slice is reused by the next call.
func (g *Generation) Forced(max int) []byte {
	if g.req.Tools == nil || g.done {
		return nil
	}
	return g.req.Tools.Forced(max)
}
