package tools

import (
	"fmt"
	"strings"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker/tools/internal/grammar"
	"github.com/zerolayer/zerolayer/worker/tools/internal/limit"
	"github.com/zerolayer/zerolayer/worker/tools/internal/schema"
	"github.com/zerolayer/zerolayer/worker/tools/internal/vocab"
)

// Run is one generation's tool state. A Run is used by one goroutine (the
// job's decode loop); its Set may be shared by many.
type Run struct {
	// failure is the first tool failure of the job, kept across
	// DropFailed and Reset (Failure).
	failure *contracts.Error
	// pools are the job's memory pools, one per context_id.
	pools []*pool

	set      *Set
	st       []*toolState
	raw      []byte // bytes of the accepted tokens
	forced   []byte // Forced's buffer
	text     []byte // text passed to Text
	accepted bool
	err      *contracts.Error
	events   []ToolEvent
	tmp      []uint64
	nanos    int64
	// cut is why generation stopped at a budget (Truncate), or "".
	cut string
	// marker is what made the last Retry return true.
	marker string
	// markers: a retry_on_fail tool is declared (Markers).
	markers bool
}

// ToolEvent is one tool action, for a `tool` event on the job's stream.
type ToolEvent struct {
	// Tool names the tool that acted.
	Tool string
	// Action says what it did (redacted, masked, retried, appended,
	// violated, failed).
	Action contracts.ToolAction
	// Detail explains the action.
	Detail string
}

// constraint is a tool that masks tokens.
type constraint interface {
	Mask(dst []uint64, f *limit.Fuel) (eog bool, err error)
	Accept(p []byte, f *limit.Fuel) (bool, error)
	CanEnd() bool
	Complete() bool
	Reset()
}

// forcer is a constraint that can tell the bytes it forces next
// (grammar.Run.Forced).
type forcer interface {
	Forced(max int, dst []byte) []byte
}

// textFilter is a tool that rewrites the decoded text stream.
type textFilter interface {
	write(chunk string, f *limit.Fuel) (string, error)
	flush(f *limit.Fuel) (string, error)
	Reset()
	// redactions returns (and clears) what was redacted since last asked.
	redactions() []string
}

// pool is the tools of one context_id in a run: they spend one step fuel
// per call, and (a named pool) their memory is capped together by
// Budget.MaxMemoryBytes. Tools of different pools are budgeted apart.
type pool struct {
	id    string
	fuel  limit.Fuel
	tools []*toolState
}

type toolState struct {
	t       *compiledTool
	pool    *pool
	c       constraint
	tox     *toxRun // masking toxicity filter
	text    textFilter
	status  contracts.ToolStatus
	detail  string
	actions int
	nanos   int64
	retries int
	// rechecks counts the attempts made again because the final
	// validation of what the mask leaves to it failed (Retry).
	rechecks int
	// checked: Retry has validated this attempt's output and found
	// nothing wrong, so Finish need not validate it again.
	checked  bool
	violated bool
	noted    bool // the masked event was sent
	// incomplete: generation stopped at a budget before the constraint
	// was satisfied (Truncate); its final validation is skipped.
	incomplete bool
}

// off reports whether the tool no longer acts (dropped, or a violated soft
// constraint).
func (s *toolState) off() bool {
	return s.status == contracts.ToolStatusDropped || s.status == contracts.ToolStatusFailed || s.violated
}

// NewRun returns a fresh generation state.
func (s *Set) NewRun() *Run {
	r := &Run{set: s, tmp: make([]uint64, s.vi.Words)}
	for _, t := range s.tools {
		st := &toolState{t: t, status: contracts.ToolStatusOK}
		switch {
		case t.json != nil && t.json.trig != nil:
			st.c = newTriggerRun(t.json.trig, grammar.NewRun(t.json.m))
		case t.json != nil:
			st.c = grammar.NewRun(t.json.m)
		case t.regex != nil:
			st.c = newRegexRun(t.regex.m)
		case t.xml != nil:
			st.c = newXMLRun(t.xml)
		case t.tox != nil && t.tox.mode == toxRedact:
			st.text = newWordRedactor(t.tox, s.budget.MaxHoldBack)
		case t.tox != nil:
			st.tox = newToxRun(t.tox)
		case t.pii != nil:
			st.text = newPIIRun(t.pii, s.budget.MaxHoldBack)
		}
		switch {
		case t.soft && len(t.notes) > 0:
			st.detail = "constraint: soft; unconstrained: " + strings.Join(t.notes, ", ")
		case len(t.notes) > 0:
			// Strict mode: keywords the mask does not enforce, which the
			// final validation checks (a failure fails the job there).
			st.detail = "partly checked after generation: " + strings.Join(t.notes, ", ")
		}
		st.pool = r.poolFor(t.context)
		st.pool.tools = append(st.pool.tools, st)
		r.st = append(r.st, st)
		r.markers = r.markers || t.retry != nil
	}
	return r
}

// poolFor returns the run's pool of context id, made on first use.
func (r *Run) poolFor(id string) *pool {
	for _, p := range r.pools {
		if p.id == id {
			return p
		}
	}
	p := &pool{id: id}
	r.pools = append(r.pools, p)
	return p
}

// refuel gives every pool a full step fuel for a new call.
func (r *Run) refuel() {
	for _, p := range r.pools {
		p.fuel.Refill(r.set.budget.MaxStepFuel)
	}
}

// fuel is the step fuel of tool s's pool for the current call.
func (s *toolState) fuel() *limit.Fuel { return &s.pool.fuel }

// poolOver checks the memory of tool s's pool after s ran: the tools of
// one named pool (a context_id) hold at most Budget.MaxMemoryBytes
// together (each tool's own meter already caps it alone). It returns
// limit.ErrMemory, wrapped with the pool's figures, when they hold more.
// The default pool keeps a cap per tool only: its tools' caches are
// shared with other jobs and stop growing at their own cap, and a job
// that named no pool is not failed for their sum.
func (r *Run) poolOver(s *toolState) error {
	p := s.pool
	if p.id == "" || len(p.tools) < 2 {
		return nil
	}
	var n int64
	for _, o := range p.tools {
		if !o.off() {
			n += o.t.memBytes()
		}
	}
	if n > r.set.budget.MaxMemoryBytes {
		return fmt.Errorf("%w: the tools of context pool %q hold %d bytes together, above the %d allowed", limit.ErrMemory, p.id, n, r.set.budget.MaxMemoryBytes)
	}
	return nil
}

func (r *Run) timed(s *toolState, t0 time.Time) {
	d := time.Since(t0).Nanoseconds()
	s.nanos += d
	r.nanos += d
}

// fail records err from tool s and returns the contract error.
func (r *Run) fail(s *toolState, err error) error {
	ce := toolError(s.t.name, s.t.field, err)
	if ce.Code != contracts.CodeToolExecutionFailed {
		ce.Code = contracts.CodeToolExecutionFailed
	}
	s.status = contracts.ToolStatusFailed
	s.detail = ce.Message
	r.err = ce
	if r.failure == nil {
		r.failure = ce
	}
	r.events = append(r.events, ToolEvent{Tool: string(s.t.name), Action: contracts.ToolActionFailed, Detail: ce.Message})
	return ce
}

// failCode records a failure with an explicit tool code.
func (r *Run) failCode(s *toolState, code contracts.ToolCode, format string, args ...any) error {
	ce := runError(s.t.name, code, format, args...)
	s.status = contracts.ToolStatusFailed
	s.detail = ce.Message
	r.err = ce
	if r.failure == nil {
		r.failure = ce
	}
	r.events = append(r.events, ToolEvent{Tool: string(s.t.name), Action: contracts.ToolActionFailed, Detail: ce.Message})
	return ce
}

// violate records a soft violation of tool s.
func (r *Run) violate(s *toolState, detail string) {
	if s.violated {
		return
	}
	s.violated = true
	s.detail = strings.TrimPrefix(s.detail+"; "+detail, "; ")
	r.events = append(r.events, ToolEvent{Tool: string(s.t.name), Action: contracts.ToolActionViolated, Detail: detail})
}

// Mask fills allowed, a packed bitset of (VocabSize+63)/64 words, with the
// tokens allowed next, and reports whether any constraint applies. When it
// returns false, no tool masks tokens and allowed is untouched: every token
// is allowed. End-of-generation tokens are allowed only where every
// constraint may end.
//
// An error is a *contracts.Error (tool_execution_failed with ToolStepBudget,
// ToolMemoryExhausted, or ToolConstraintUnsatisfiable when no token is left);
// the job fails alone.
func (r *Run) Mask(allowed []uint64) (bool, error) {
	if r.err != nil {
		return false, r.err
	}
	if !r.set.masks {
		return false, nil
	}
	vi := r.set.vi
	if len(allowed) < vi.Words {
		return false, &contracts.Error{Code: contracts.CodeInternal, Message: fmt.Sprintf("mask has %d words, want %d", len(allowed), vi.Words)}
	}
	allowed = allowed[:vi.Words]
	r.refuel()
	first, eog := true, true
	var firstTool *toolState
	for _, s := range r.st {
		if s.c == nil || s.off() {
			continue
		}
		t0 := time.Now()
		var e bool
		var err error
		if first {
			e, err = s.c.Mask(allowed, s.fuel())
			first, firstTool = false, s
		} else {
			e, err = s.c.Mask(r.tmp, s.fuel())
			vocab.AndMask(allowed, r.tmp)
		}
		r.timed(s, t0)
		s.actions++
		if err == nil {
			err = r.poolOver(s)
		}
		if err != nil {
			return false, r.fail(s, err)
		}
		eog = eog && e
	}
	if first {
		vi.FillAll(allowed)
	}
	for _, s := range r.st {
		if s.tox == nil || s.off() {
			continue
		}
		t0 := time.Now()
		banned, err := s.tox.Mask(r.tmp, s.fuel())
		r.timed(s, t0)
		if err == nil {
			err = r.poolOver(s)
		}
		if err != nil {
			return false, r.fail(s, err)
		}
		vocab.AndMask(allowed, r.tmp)
		if banned {
			s.actions++
			if !s.noted {
				s.noted = true
				r.events = append(r.events, ToolEvent{Tool: string(s.t.name), Action: contracts.ToolActionMasked, Detail: "banned words masked at the logits"})
			}
		}
		eog = eog && s.tox.CanEnd()
		if firstTool == nil {
			firstTool = s
		}
	}
	vi.ClearEOG(allowed)
	if eog {
		vi.SetEOG(allowed)
	}
	if vocab.MaskEmpty(allowed) {
		s := firstTool
		if s == nil {
			s = r.st[0]
		}
		return false, r.failCode(s, contracts.ToolConstraintUnsatisfiable, "no token can continue the output under the constraints")
	}
	return true, nil
}

// Accept advances every tool's state by the sampled token. An error is a
// *contracts.Error: tool_execution_failed with ToolConstraintUnsatisfiable
// when a strict constraint does not allow the token (the engine sampled
// outside the mask) or the output ends before a constraint is satisfied,
// ToolStepBudget or ToolMemoryExhausted when a tool runs out of budget. The
// job fails alone.
func (r *Run) Accept(token int32) error {
	if r.err != nil {
		return r.err
	}
	vi := r.set.vi
	if token < 0 || int(token) >= vi.Size {
		return &contracts.Error{Code: contracts.CodeInternal, Message: fmt.Sprintf("token %d is out of the vocabulary", token)}
	}
	r.accepted = true
	if vi.IsEOG(token) {
		for _, s := range r.st {
			if s.off() {
				continue
			}
			end := true
			switch {
			case s.c != nil:
				end = s.c.CanEnd()
			case s.tox != nil:
				end = s.tox.CanEnd()
			}
			if end {
				continue
			}
			if s.t.soft {
				r.violate(s, "the output ended before the constraint was satisfied")
				continue
			}
			return r.failCode(s, contracts.ToolConstraintUnsatisfiable, "the output ended before the constraint was satisfied")
		}
		return nil
	}
	p := vi.Pieces[token]
	r.refuel()
	for _, s := range r.st {
		if s.off() || s.c == nil && s.tox == nil {
			continue
		}
		t0 := time.Now()
		var ok bool
		var err error
		if s.c != nil {
			if p == nil {
				ok = false
			} else {
				ok, err = s.c.Accept(p, s.fuel())
			}
		} else {
			ok = s.tox.Accept(p)
		}
		r.timed(s, t0)
		if err == nil && ok {
			err = r.poolOver(s)
		}
		if err != nil {
			return r.fail(s, err)
		}
		if !ok {
			if s.t.soft {
				r.violate(s, fmt.Sprintf("token %d (%q) breaks the constraint", token, p))
				continue
			}
			return r.failCode(s, contracts.ToolConstraintUnsatisfiable, "token %d (%q) is not allowed by the constraint", token, p)
		}
	}
	r.raw = append(r.raw, p...)
	return nil
}

// Forced returns the bytes the constraints force the output to take
// next, at most max: those of the first active constraint that forces
// any, or nil. A runner may draft them as tokens; it must verify them
// (another constraint, or the model, may disagree). The slice is reused
// by the next call.
func (r *Run) Forced(max int) []byte {
	if r.err != nil || !r.set.masks {
		return nil
	}
	for _, s := range r.st {
		if s.c == nil || s.off() {
			continue
		}
		if f, ok := s.c.(forcer); ok {
			if r.forced = f.Forced(max, r.forced[:0]); len(r.forced) > 0 {
				return r.forced
			}
		}
	}
	return nil
}

// Complete reports that a constraint admits no longer output: generation
// must stop (stop_reason "constraint").
func (r *Run) Complete() bool {
	for _, s := range r.st {
		if s.c != nil && !s.off() && s.c.Complete() {
			return true
		}
	}
	return false
}

// CanEnd reports whether every constraint accepts the output as it stands
// (an end-of-generation token would be allowed).
func (r *Run) CanEnd() bool {
	for _, s := range r.st {
		if s.off() {
			continue
		}
		if s.c != nil && !s.c.CanEnd() || s.tox != nil && !s.tox.CanEnd() {
			return false
		}
	}
	return true
}

// Text passes newly decoded output text through the streaming text tools
// (pii_redactor, toxicity_filter in redact mode) and returns what may be
// emitted now; text that could still become a match is held back until it
// is decided or Finish flushes it. On an error nothing more is emitted: the
// tools fail closed.
func (r *Run) Text(chunk string) (string, error) {
	if r.err != nil {
		return "", r.err
	}
	r.text = append(r.text, chunk...)
	if !r.set.texts {
		return chunk, nil
	}
	r.refuel()
	out := chunk
	for _, s := range r.st {
		if s.text == nil || s.off() {
			continue
		}
		t0 := time.Now()
		var err error
		out, err = s.text.write(out, s.fuel())
		r.timed(s, t0)
		r.noteRedactions(s)
		if err != nil {
			return "", r.fail(s, err)
		}
	}
	return out, nil
}

func (r *Run) noteRedactions(s *toolState) {
	for _, d := range s.text.redactions() {
		s.actions++
		r.events = append(r.events, ToolEvent{Tool: string(s.t.name), Action: contracts.ToolActionRedacted, Detail: d})
	}
}

// Finish runs the final validation of every constraint (the JSON Schema
// with santhosh-tekuri/jsonschema, the regex as a full match with Go's
// regexp, XML balance, banned words), appends the mandatory suffixes and
// flushes held-back text through the text tools, the suffix included: a
// redactor sees everything the job emits, and a match that runs from the
// output into the suffix is found. It returns the tail to emit after
// everything Text returned; the suffix is its last part, as redacted. A
// failed strict validation is an error (tool_execution_failed,
// ToolValidationFailed); a soft one is reported. Constraints Truncate found
// incomplete are not validated.
func (r *Run) Finish() (string, error) {
	if r.err != nil {
		return "", r.err
	}
	r.refuel()
	output := r.text
	if r.accepted {
		output = r.raw
	}
	var firstErr error
	for _, s := range r.st {
		if s.off() || s.incomplete || s.checked {
			continue
		}
		t0 := time.Now()
		problem := r.finalCheck(s, output)
		r.timed(s, t0)
		if problem == "" {
			continue
		}
		if s.t.soft {
			r.violate(s, problem)
			continue
		}
		if err := r.failCode(s, contracts.ToolValidationFailed, "%s", problem); firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		return "", firstErr
	}
	var tail string
	for _, s := range r.st {
		if s.t.suffix == "" || s.off() {
			continue
		}
		tail += s.t.suffix
		s.actions++
		r.events = append(r.events, ToolEvent{Tool: string(s.t.name), Action: contracts.ToolActionAppended, Detail: fmt.Sprintf("%d bytes", len(s.t.suffix))})
	}
	for _, s := range r.st {
		if s.text == nil || s.off() {
			continue
		}
		t0 := time.Now()
		out, err := s.text.write(tail, s.fuel())
		if err == nil {
			var rest string
			rest, err = s.text.flush(s.fuel())
			out += rest
		}
		r.timed(s, t0)
		r.noteRedactions(s)
		if err != nil {
			return "", r.fail(s, err)
		}
		tail = out
	}
	return tail, nil
}

// Truncate tells the run that generation stopped at a budget (why names
// it: "max_tokens", "memory_limit") rather than where the model or a
// constraint ended it; call it before Finish. It returns why the output is
// incomplete: the constraints (strict or soft) that could not end where it
// stopped, or "" when every one could. Finish then leaves their final
// validation out, and Report marks them "incomplete" in their detail: the
// output is a prefix of a valid one, cut short by the budget, not a tool
// failure.
func (r *Run) Truncate(why string) string {
	r.cut = why
	var reasons []string
	for _, s := range r.st {
		if s.c == nil || s.off() || s.c.CanEnd() {
			continue
		}
		s.incomplete = true
		reasons = append(reasons, fmt.Sprintf("%s (%s): %s", s.t.name, s.t.field, r.incompleteMsg()))
	}
	return strings.Join(reasons, "; ")
}

// incompleteMsg says how the output of a Truncate-d run ended.
func (r *Run) incompleteMsg() string {
	return fmt.Sprintf("the output ended at %s before the constraint was satisfied", r.cut)
}

// finalCheck returns why output fails tool s's final check, or "".
func (r *Run) finalCheck(s *toolState, output []byte) string {
	t := s.t
	switch {
	case t.json != nil:
		if t.json.trig != nil {
			doc, ok := triggered(string(t.json.trig.trigger), output)
			if !ok {
				return "" // free text
			}
			output = doc
		}
		if err := t.json.val.ValidateText(output); err != nil {
			return "output does not validate: " + schema.ValidationSummary(err)
		}
	case t.regex != nil:
		if loc := t.regex.re.FindIndex(output); loc == nil || loc[0] != 0 || loc[1] != len(output) {
			return "output does not match the pattern"
		}
	case t.xml != nil:
		if msg := xmlCheck(t.xml, output); msg != "" {
			return msg
		}
	case t.tox != nil && t.tox.mode != toxRedact:
		if w := t.tox.find(output); w != "" {
			return fmt.Sprintf("output contains the banned word %q", w)
		}
	}
	return ""
}

// Retry reports whether output is to be generated again: retry_on_fail's
// output contains one of the markers and retries remain, or a JSON
// constraint's final validation of the keywords its mask leaves to it
// fails and rechecks remain (MaxRechecks). Each true counts one retry; the
// engine then calls Reset and generates again, within the job's budget.
// When the markers match and no retry remains, a strict tool fails the
// job at Finish (ToolValidationFailed) and a soft one is reported.
func (r *Run) Retry(output string) bool {
	for _, s := range r.st {
		t := s.t.retry
		if t == nil || s.off() {
			continue
		}
		m := t.match(output)
		if m == "" {
			continue
		}
		if s.retries < t.max {
			s.retries++
			s.actions++
			r.marker = m
			r.events = append(r.events, ToolEvent{Tool: string(s.t.name), Action: contracts.ToolActionRetried,
				Detail: fmt.Sprintf("output contains %q; retry %d of %d", m, s.retries, t.max)})
			return true
		}
		if s.t.soft {
			r.violate(s, fmt.Sprintf("output still contains %q after %d retries", m, t.max))
		} else {
			r.failCode(s, contracts.ToolValidationFailed, "output still contains %q after %d retries", m, t.max)
		}
	}
	if r.err != nil {
		return false
	}
	// A JSON constraint whose mask leaves some keywords to the final
	// validation (an if whose condition does not negate, an overlapping
	// oneOf, uniqueItems of objects: the report names them) may end with
	// a document that fails it. Such an attempt is made again, up to
	// MaxRechecks times, before Finish fails the job; the retries are
	// counted in the job's attempts and usage like any other.
	doc := r.text
	if r.accepted {
		doc = r.raw
	}
	for _, s := range r.st {
		if s.t.json == nil || s.t.soft || len(s.t.notes) == 0 || s.off() || s.rechecks >= MaxRechecks {
			continue
		}
		t0 := time.Now()
		problem := r.finalCheck(s, doc)
		r.timed(s, t0)
		s.checked = problem == ""
		if problem != "" {
			s.rechecks++
			s.actions++
			r.marker = ""
			r.events = append(r.events, ToolEvent{Tool: string(s.t.name), Action: contracts.ToolActionRetried,
				Detail: fmt.Sprintf("%s (checked after generation: %s); retry %d of %d", problem, strings.Join(s.t.notes, ", "), s.rechecks, MaxRechecks)})
			return true
		}
	}
	return false
}

// MaxRechecks is how many times a job is generated again when its output
// fails the final validation of keywords its mask does not enforce.
const MaxRechecks = 2

// RetryMarker returns the marker that made the last Retry ask for a
// retry: the engine bans the token with which the failed attempt began
// it, so that the next attempt does not repeat it.
func (r *Run) RetryMarker() string { return r.marker }

// Markers reports whether a retry_on_fail tool may ask for a retry by a
// marker in the output: only then does the engine need to know where in
// the output each token's text lies.
func (r *Run) Markers() bool { return r.markers }

// Reset clears the generation state for a new attempt (after Retry, or
// after DropFailed). Retry counts, actions and time carry over: retries
// share the job's budget and are counted in its usage.
func (r *Run) Reset() {
	r.raw = r.raw[:0]
	r.text = r.text[:0]
	r.accepted = false
	r.err = nil
	r.cut = ""
	for _, s := range r.st {
		s.incomplete, s.checked = false, false
		if s.c != nil {
			s.c.Reset()
		}
		if s.tox != nil {
			s.tox.Reset()
		}
		if s.text != nil {
			s.text.Reset()
		}
		if s.t.retry == nil {
			s.violated = false
		}
	}
}

// DropFailed implements on_tool_failure retry_without_tool: failed tools
// are dropped (status "dropped") and the job's error cleared, so the
// engine can Reset and generate again without them. It returns the names
// of the dropped tools.
func (r *Run) DropFailed() []string {
	var out []string
	for _, s := range r.st {
		if s.status == contracts.ToolStatusFailed {
			s.status = contracts.ToolStatusDropped
			out = append(out, string(s.t.name))
		}
	}
	r.err = nil
	return out
}

// Failure returns the run's first tool failure (a *contracts.Error with
// Tool and ToolCode), also when on_tool_failure retry_without_tool has
// dropped the tool since; nil when no tool failed. The worker reports it
// as tool_failure_reason.
func (r *Run) Failure() *contracts.Error { return r.failure }

// Report returns per-tool status, action counts and time.
func (r *Run) Report() []contracts.ToolReport {
	out := make([]contracts.ToolReport, len(r.st))
	for i, s := range r.st {
		status := s.status
		if status == contracts.ToolStatusOK && s.violated {
			status = contracts.ToolStatusViolated
		}
		detail := s.detail
		if s.t.soft && detail == "" {
			detail = "constraint: soft"
		}
		if s.incomplete {
			detail = strings.TrimPrefix(detail+"; incomplete: "+r.incompleteMsg(), "; ")
		}
		out[i] = contracts.ToolReport{
			Tool:    string(s.t.name),
			Status:  status,
			Actions: s.actions,
			TimeMs:  float64(s.nanos) / 1e6,
			Detail:  detail,
		}
	}
	return out
}

// TimeMs returns the total measured tool time, for usage
// tool_execution_time_ms.
func (r *Run) TimeMs() float64 { return float64(r.nanos) / 1e6 }

// MemoryBytes is the memory the generation's tools hold: the compiled
// tools' automata and mask caches (counted in full, though jobs using the
// same compiled tool share them) and this run's own buffers.
func (r *Run) MemoryBytes() int64 {
	n := int64(8*cap(r.tmp) + cap(r.raw) + cap(r.text))
	for _, st := range r.st {
		n += st.t.memBytes()
	}
	return n
}

// Events returns the tool actions since the last call.
func (r *Run) Events() []ToolEvent {
	ev := r.events
	r.events = nil
	return ev
}
