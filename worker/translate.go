package worker

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/model/chat"
	"github.com/zerolayer/zerolayer/worker/model/prompt"
	"github.com/zerolayer/zerolayer/worker/model/tokenizer"
	"github.com/zerolayer/zerolayer/worker/sample"
	"github.com/zerolayer/zerolayer/worker/tools"
)

// The translation between the wire and the engine, shared by both
// executors: a job request becomes an engine request (buildRequest), an
// engine result an Outcome (outcomeFrom), an engine error a contract error
// (engineError).

// tokenSink streams generated tokens to the sink, with logprobs when asked:
// each token, and each alternative, with its vocabulary bytes and, when
// they are UTF-8 on their own, its text.
func tokenSink(r *contracts.JobRequest, sink Sink, tok *tokenizer.Tokenizer) func(engine.Token) error {
	return func(t engine.Token) error {
		var lps []contracts.TokenLogprob
		if r.Logprobs {
			b := tok.Piece(t.ID)
			lp := contracts.TokenLogprob{TokenID: t.ID, Token: validText(b), Bytes: b, Logprob: float64(t.Logprob)}
			for _, alt := range t.Top {
				if math.IsInf(float64(alt.Logprob), 0) || alt.Logprob != alt.Logprob {
					continue // masked: not an alternative (and not JSON)
				}
				ab := tok.Piece(alt.ID)
				lp.TopLogprobs = append(lp.TopLogprobs, contracts.TopLogprob{TokenID: alt.ID, Token: validText(ab), Bytes: ab, Logprob: float64(alt.Logprob)})
			}
			lps = []contracts.TokenLogprob{lp}
		}
		var ids []int32
		if t.ID >= 0 {
			ids = []int32{t.ID}
		}
		sink.Delta(t.Text, ids, lps)
		return nil
	}
}

// validText is b as text when it is UTF-8, else "".
func validText(b []byte) string {
	if !utf8.Valid(b) {
		return ""
	}
	return string(b)
}

// toolSink forwards tool actions as tool events.
func toolSink(sink Sink) func(tools.ToolEvent) {
	return func(ev tools.ToolEvent) { sink.Tool(ev.Tool, ev.Action, ev.Detail) }
}

// outcomeFrom maps an engine result to an outcome with the usage the
// engine measured.
func outcomeFrom(res *engine.Result, run *tools.Run) *Outcome {
	out := &Outcome{Text: res.Text, TokenIDs: res.OutputIDs, Attempts: res.Retries + 1,
		Incomplete: res.Incomplete, IncompleteReason: res.IncompleteReason}
	if run != nil {
		out.ToolReport = run.Report()
	}
	if res.Err != nil {
		out.Err = contracts.ErrorFrom(res.Err)
	}
	switch res.StopReason {
	case engine.StopEndTurn:
		out.StopReason = contracts.StopEndTurn
	case engine.StopSequence:
		out.StopReason, out.StopSequence = contracts.StopSequence, res.StopSequence
	case engine.StopMaxTokens, engine.StopContextLimit:
		out.StopReason = contracts.StopMaxTokens
	case engine.StopMemoryLimit:
		out.StopReason = contracts.StopMemoryLimit
	case engine.StopConstraint:
		out.StopReason = contracts.StopConstraint
	case engine.StopCanceled:
		out.Canceled = true
	}
	u := &out.Usage
	u.InputTokens = res.Usage.InputTokens
	u.OutputTokens = res.Usage.OutputTokens
	u.RetriedOutputTokens = res.Usage.RetriedOutputTokens
	u.TimeToFirstTokenMs = res.Usage.TimeToFirstTokenMs
	u.TimePerTokenMs = res.Usage.TimePerTokenMs
	u.InterTokenMsP50 = percentile(res.Usage.GapsMs, 0.50)
	u.InterTokenMsP99 = percentile(res.Usage.GapsMs, 0.99)
	u.TotalMs = res.Usage.TotalMs
	u.MemoryAllocatedMB = float64(res.Usage.KVBytes+res.Usage.ToolBytes) / (1 << 20)
	u.SharedMemoryMB = float64(res.Usage.SharedKVBytes) / (1 << 20)
	u.Confidence = res.Usage.Confidence
	u.ToolExecutionTimeMs = res.Usage.ToolMs
	return out
}

// applyToolFailure runs the worker's rungs of the on_tool_failure ladder
// on an outcome: the engine has already failed the job (fail, fallback) or
// dropped the failed tools and generated again (retry_without_tool). When a
// tool failure still ends the job and the request has a fallback_response
// (on_tool_failure fallback, or retry_without_tool whose new attempt
// failed too), the outcome becomes that response: completed, end_turn,
// marked Fallback, no token ids, its usage what ran before (the failed
// attempts' tokens and tool time are billed; the fallback text is not
// generated). Whatever the rung, the job's first tool failure is kept in
// ToolFailureReason and the usage.
func applyToolFailure(out *Outcome, r *contracts.JobRequest, run *tools.Run) {
	if run != nil {
		degrade(out, r, run.Failure())
	}
}

// degrade is applyToolFailure with the run's first failure, if any.
func degrade(out *Outcome, r *contracts.JobRequest, failure *contracts.Error) {
	reason := toolFailureReason(failure)
	out.ToolFailureReason, out.Usage.ToolFailureReason = reason, reason
	if out.Err == nil || out.Err.Code != contracts.CodeToolExecutionFailed || out.Canceled || r.FallbackResponse == "" {
		return
	}
	switch r.OnToolFailure {
	case contracts.OnToolFailureFallback, contracts.OnToolFailureRetryWithoutTool:
	default:
		return
	}
	if reason == "" {
		reason = toolFailureReason(out.Err)
		out.ToolFailureReason, out.Usage.ToolFailureReason = reason, reason
	}
	out.Text, out.TokenIDs, out.Err = r.FallbackResponse, nil, nil
	out.StopReason, out.StopSequence = contracts.StopEndTurn, ""
	out.Fallback, out.Usage.Fallback = true, true
}

// toolFailureReason renders a tool failure as "tool: TOOL_CODE: message",
// at most contracts.MaxToolFailureReasonBytes bytes; "" for nil.
func toolFailureReason(e *contracts.Error) string {
	if e == nil {
		return ""
	}
	s := e.Message
	if e.ToolCode != "" {
		s = string(e.ToolCode) + ": " + s
	}
	if e.Tool != "" {
		s = e.Tool + ": " + s
	}
	if len(s) > contracts.MaxToolFailureReasonBytes {
		s = s[:contracts.MaxToolFailureReasonBytes]
		for len(s) > 0 && !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return s
}

// thoughts is a thinking job's split of its output into reasoning and
// answer (see SplitThinking); nil for a job whose model does not think.
type thoughts struct{ finish func() }

// apply, once the job has run, passes on what the streaming split held
// back, and splits the outcome's text.
func (th *thoughts) apply(out *Outcome) {
	if th == nil {
		return
	}
	th.finish()
	if !out.Fallback {
		out.Reasoning, out.Text = chat.SplitReasoning(out.Text)
	}
}

// thinkingOf decides whether the job's model thinks (prompt.Prompter.Thinks): its chat template has
// a thinking switch (qwen3) and the request does not turn it off. A
// response_format constrains the whole output, so it turns thinking off
// unless the request asks for it, which is refused, as is thinking asked
// of a model whose template has no switch. It returns the switch to render
// the prompt with.
func thinkingOf(l *engine.Loaded, name string, r *contracts.JobRequest) (on bool, enable *bool, err *contracts.Error) {
	asked := r.Thinking.Enabled()
	if r.ResponseFormat != nil {
		if asked != nil && *asked {
			return false, nil, &contracts.Error{Code: contracts.CodeInvalidRequest, Field: "thinking.type",
				Message: "thinking cannot be enabled with a response_format, which constrains the whole output; disable it or leave it out"}
		}
		off := false
		asked = &off
	}
	thinks, e := l.Thinks(nil, asked)
	if e != nil {
		return false, nil, &contracts.Error{Code: contracts.CodeInvalidRequest, Field: "thinking.type",
			Message: fmt.Sprintf("model %s has no thinking switch in its chat template; leave thinking out, or set it to disabled", name)}
	}
	return thinks, asked, nil
}

// buildRequest turns a job request into an engine request whose tokens and
// tool actions stream to sink. For a thinking job the reasoning streams
// apart from the answer, and th splits the outcome (nil otherwise).
func buildRequest(l *engine.Loaded, name string, r *contracts.JobRequest, sink Sink) (req engine.Request, th *thoughts, err error) {
	thinks, enable, e := thinkingOf(l, name, r)
	if e != nil {
		return engine.Request{}, nil, e
	}
	if thinks {
		var finish func()
		sink, finish = SplitThinking(sink)
		th = &thoughts{finish: finish}
	}
	req, err = buildEngineRequest(l, name, r, sink, enable)
	return req, th, err
}

// buildEngineRequest is buildRequest's engine request, the prompt rendered
// with the thinking switch enable.
func buildEngineRequest(l *engine.Loaded, name string, r *contracts.JobRequest, sink Sink, enable *bool) (engine.Request, error) {
	// Inline tool blocks in the system prompt are tools, not prompt text.
	system, inline, err := contracts.ParseSystem(r.System)
	if err != nil {
		return engine.Request{}, contracts.ErrorFrom(err)
	}
	specs := append(append([]contracts.Tool(nil), r.Tools...), inline...)
	var run *tools.Run
	if len(specs) > 0 || r.ResponseFormat != nil {
		set, err := tools.Compile(specs, r.ResponseFormat, l.Tokenizer, tools.Budget{})
		if err != nil {
			return engine.Request{}, inlineToolError(contracts.ErrorFrom(err), len(r.Tools))
		}
		run = set.NewRun()
	}
	ids, err := l.ConversationWith(system, prompt.Messages(r.Messages), nil, chat.RenderOptions{EnableThinking: enable})
	if err != nil {
		return engine.Request{}, prompt.ContractError(err)
	}
	var p sample.Params
	if r.Preset != "" {
		pp, _, err := sample.Preset(string(r.Preset))
		if err != nil {
			return engine.Request{}, contracts.NewError(contracts.CodeUnknownPreset, "%v", err)
		}
		p = pp
	}
	setF32(&p.Temperature, r.Temperature)
	setF32(&p.TopP, r.TopP)
	setF32(&p.MinP, r.MinP)
	setF32(&p.RepetitionPenalty, r.RepetitionPenalty)
	if r.TopK != nil {
		p.TopK = *r.TopK
	}
	if r.Seed != nil {
		p.Seed = *r.Seed
	}
	if err := p.Validate(); err != nil {
		return engine.Request{}, contracts.NewError(contracts.CodeInvalidSampling, "%v", err)
	}
	if ctxLen := l.Model.Context; len(ids) >= ctxLen {
		return engine.Request{}, contracts.NewError(contracts.CodePromptTooLong, "the prompt is %d tokens; model %s has a context of %d", len(ids), name, ctxLen)
	}
	top := 0
	if r.Logprobs {
		top = r.TopLogprobs
	}
	return engine.Request{PromptIDs: ids, MaxTokens: r.MaxTokens, Sampling: p, Stop: r.StopSequences, TopLogprobs: top,
		Tools: run, RetryWithoutFailedTools: r.OnToolFailure == contracts.OnToolFailureRetryWithoutTool,
		OnToken: tokenSink(r, sink, l.Tokenizer), OnToolEvent: toolSink(sink), NoDrafts: r.Speculation == contracts.SpeculationOff}, nil
}

// inlineToolError points an error of a tool declared in the system prompt
// there: Compile numbers those tools after tools[] (tools[n+k]), and the
// request has no such field; it becomes system.tools[k] (the k-th <tool>
// block), with the rest of the path kept (system.tools[0].params.mode).
func inlineToolError(e *contracts.Error, n int) *contracts.Error {
	var i int
	if _, err := fmt.Sscanf(e.Field, "tools[%d]", &i); err != nil || i < n {
		return e
	}
	rest := e.Field[strings.IndexByte(e.Field, ']')+1:]
	out := *e
	out.Field = fmt.Sprintf("system.tools[%d]%s", i-n, rest)
	return &out
}

// setF32 sets *dst to *v when the request gives v.
func setF32(dst *float32, v *float64) {
	if v != nil {
		*dst = float32(*v)
	}
}

// engineError maps an engine error to a contract error.
func engineError(err error) error {
	switch {
	case errors.Is(err, engine.ErrPromptTooLong):
		return contracts.NewError(contracts.CodePromptTooLong, "%v", err)
	case errors.Is(err, engine.ErrEmptyPrompt), errors.Is(err, engine.ErrBadRequest):
		return contracts.NewError(contracts.CodeInvalidRequest, "%v", err)
	case errors.Is(err, sample.ErrInvalidParams):
		return contracts.NewError(contracts.CodeInvalidSampling, "%v", err)
	case errors.Is(err, engine.ErrNoMemory):
		return contracts.NewError(contracts.CodeMemoryLimit, "%v", err)
	}
	return fmt.Errorf("worker: engine: %w", err)
}

// percentile returns the q-quantile of xs (nearest rank), 0 for none.
func percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}
