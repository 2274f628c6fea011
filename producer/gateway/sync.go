package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/producer"
)

// syncCall is one job run for a synchronous API call.
type syncCall struct {
	g   *Gateway
	c   *producer.Client
	r   *http.Request
	req *contracts.JobRequest
	id  string
}

// compatRequest is a compatible API's request body.
type compatRequest interface {
	job() (*contracts.JobRequest, *contracts.Error)
}

// startSync authenticates r, decodes its body into body, maps it to a job
// and submits it. On failure it has answered with fail and returns nil.
func (g *Gateway) startSync(w http.ResponseWriter, r *http.Request, body compatRequest, fail func(http.ResponseWriter, *contracts.Error)) *syncCall {
	c, e := g.client(r)
	if e != nil {
		fail(w, e)
		return nil
	}
	raw, e := g.body(w, r)
	if e != nil {
		fail(w, e)
		return nil
	}
	if e := decodeJSON(raw, body); e != nil {
		fail(w, e)
		return nil
	}
	req, e := body.job()
	if e != nil {
		fail(w, e)
		return nil
	}
	s := &syncCall{g: g, c: c, r: r, req: req}
	if jl, ok := body.(interface{ jobless() bool }); ok && jl.jobless() {
		// Answered without a job (s.id stays empty), for a model served.
		if e := g.knownModel(req.Model, req.WaitForModel); e != nil {
			fail(w, e)
			return nil
		}
		return s
	}
	if e := s.submit(w); e != nil {
		fail(w, e)
		return nil
	}
	return s
}

// decodeJSON decodes a compatible API's request body into v.
func decodeJSON(raw []byte, v any) *contracts.Error {
	if err := json.Unmarshal(raw, v); err != nil {
		return contracts.NewError(contracts.CodeMalformedJSON, "%v", err)
	}
	return nil
}

// priority applies the priority header to req.
func priority(r *http.Request, req *contracts.JobRequest) *contracts.Error {
	if v := r.Header.Get(PriorityHeader); v != "" {
		p, err := contracts.ParsePriority(v)
		if err != nil {
			return contracts.NewError(contracts.CodeInvalidRequest, "%s: %v", PriorityHeader, err)
		}
		req.Priority = p
	}
	return nil
}

// submit validates and submits the job; the job id goes in the answer's
// header.
func (s *syncCall) submit(w http.ResponseWriter) *contracts.Error {
	if e := priority(s.r, s.req); e != nil {
		return e
	}
	id, err := s.c.Submit(s.r.Context(), s.req, submitOpts(s.r))
	if err != nil {
		return asError(err)
	}
	s.id = id
	w.Header().Set(JobIDHeader, id)
	setRequestID(w, id)
	return nil
}

// abandon cancels the job when the caller is gone or the wait timed out:
// nobody will read its output.
func (s *syncCall) abandon() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.c.Cancel(ctx, s.id); err != nil {
		s.g.cfg.Logger.Warn("gateway: canceling an abandoned job", "job", s.id, "err", err)
	}
}

// wait returns the job's result; a failed or canceled job is an error.
func (s *syncCall) wait() (*contracts.Result, *contracts.Error) {
	ctx, cancel := context.WithTimeout(s.r.Context(), s.g.cfg.SyncTimeout)
	defer cancel()
	res, err := s.c.Wait(ctx, s.id)
	if err != nil {
		s.abandon()
		return nil, asError(err)
	}
	res = answered(res)
	if res.Status != contracts.StatusCompleted {
		if res.Error != nil {
			return nil, res.Error
		}
		return nil, contracts.NewError(contracts.CodeInternal, "job %s ended %s", s.id, res.Status)
	}
	return res, nil
}

// answered is res as the APIs answer it: a tool call job whose output
// stopped inside the call (see cutShort) completed with the stop reason
// max_tokens; any other result as it is. The batch APIs read results
// through it too.
func answered(res *contracts.Result) *contracts.Result {
	if res == nil || res.Status != contracts.StatusFailed || !callCutShort(res.Metadata, res.Error) {
		return res
	}
	cut := *res
	cut.Status, cut.StopReason, cut.Error = contracts.StatusCompleted, contracts.StopMaxTokens, nil
	return &cut
}

// cutShort reports whether e ended a tool call job (see toolCallKey)
// whose output stopped inside the call: a forced call's constraint fails
// its final check on a document cut short (the output reached max_tokens,
// or the memory limit). The job is answered as the APIs answer a call cut
// short, with the stop reason max_tokens, not as an error.
func (s *syncCall) cutShort(e *contracts.Error) bool { return callCutShort(s.req.Metadata, e) }

// callCutShort reports whether e ended a tool call job whose metadata
// (the request's, copied into its result) is meta, with its call cut
// short.
func callCutShort(meta map[string]string, e *contracts.Error) bool {
	return e != nil && e.ToolCode == contracts.ToolValidationFailed && meta[toolCallKey] != ""
}

// stream follows the job's events, calling delta with each piece of new
// text, and returns the final event. When a job is redelivered (a worker
// stopped) its new attempt's text is checked against what was already
// sent: only the part beyond it is passed on, and a different output is an
// error (it cannot be taken back from the caller). A thinking job's
// reasoning goes to reasoning (when not nil) piece by piece, before the
// event's answer text, checked on redelivery as the text is. What delta
// and reasoning write to out (when not nil) reaches the caller in one
// flush per event, however many tokens and pieces the event carries.
func (s *syncCall) stream(out *sse, delta func(text string, lps []contracts.TokenLogprob) error, reasoning func(text string) error) (*contracts.Event, *contracts.Error) {
	ctx, cancel := context.WithTimeout(s.r.Context(), s.g.cfg.SyncTimeout)
	defer cancel()
	out.hold()
	defer out.release()
	var sent, sentR string
	var cur, curR strings.Builder
	attempt, tokens := 0, 0
	var final *contracts.Event
	var failed *contracts.Error
	// answer stops following the events with the call's answer.
	answer := func(ev *contracts.Event, e *contracts.Error) error {
		final, failed = ev, e
		return errAnswered
	}
	// The events are handled on this goroutine as they are received
	// (Follow): no hop through a channel per event.
	err := s.c.Follow(ctx, s.id, func(ev contracts.Event) error {
		if ev.Attempt != attempt {
			attempt, tokens = ev.Attempt, 0
			cur.Reset()
			curR.Reset()
		}
		switch ev.Type {
		case contracts.EventDelta:
			tokens += len(ev.TokenIDs)
			if ev.Reasoning != "" {
				curR.WriteString(ev.Reasoning)
				nowR := curR.String()
				switch {
				case len(nowR) <= len(sentR) && strings.HasPrefix(sentR, nowR):
				case !strings.HasPrefix(nowR, sentR):
					return answer(nil, contracts.NewError(contracts.CodeWorkerShutdown,
						"job %s was run again after a worker stopped, and its reasoning differs from what was already streamed", s.id))
				default:
					if reasoning != nil {
						if err := reasoning(nowR[len(sentR):]); err != nil {
							s.abandon()
							return answer(nil, asError(err))
						}
					}
					sentR = nowR
				}
			}
			cur.WriteString(ev.Text)
			now := cur.String()
			switch {
			case len(now) <= len(sent) && strings.HasPrefix(sent, now):
				out.flush() // reasoning alone, or text already sent
				return nil
			case !strings.HasPrefix(now, sent):
				return answer(nil, contracts.NewError(contracts.CodeWorkerShutdown,
					"job %s was run again after a worker stopped, and its output differs from what was already streamed", s.id))
			}
			if err := delta(now[len(sent):], ev.Logprobs); err != nil {
				s.abandon() // the caller is gone
				return answer(nil, asError(err))
			}
			sent = now
			out.flush()
		case contracts.EventFinal:
			return answer(&ev, nil)
		case contracts.EventError:
			if s.cutShort(ev.Error) {
				in, _ := s.c.PromptTokens(s.req)
				return answer(&contracts.Event{Type: contracts.EventFinal, StopReason: contracts.StopMaxTokens,
					Usage: &contracts.Usage{InputTokens: in, OutputTokens: tokens}}, nil)
			}
			if ev.Error != nil {
				return answer(nil, ev.Error)
			}
			return answer(nil, contracts.NewError(contracts.CodeInternal, "job %s failed", s.id))
		}
		return nil
	})
	if final != nil || failed != nil {
		return final, failed
	}
	s.abandon()
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		err = contracts.NewError(contracts.CodeInternal, "the events of job %s ended without a final event", s.id)
	}
	return nil, asError(err)
}

// errAnswered ends syncCall.stream's following of the events once the
// call has its answer.
var errAnswered = errors.New("gateway: answered")

// compatMessage is one message of a compatible API. ToolCalls (an
// assistant message's calls) and ToolCallID (a tool message's call) are
// the chat completions API's tool turns.
type compatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  json.RawMessage `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

// jobMessages maps a compatible API's messages, contents flattened to
// text, to the contract's system prompt and messages: system holds system
// text given apart, and messages whose role is in systemRoles join it.
// Tool turns become text: an assistant message's tool_calls follow its
// content as renderCall writes them, and a tool message is a user message
// holding renderResult's text.
func jobMessages(system []string, msgs []compatMessage, systemRoles ...string) (string, []contracts.Message, *contracts.Error) {
	var out []contracts.Message
	for i, m := range msgs {
		text, e := textContent(m.Content, fmt.Sprintf("messages[%d].content", i))
		if e != nil {
			return "", nil, e
		}
		if len(m.ToolCalls) > 0 && string(m.ToolCalls) != "null" {
			if m.Role != "assistant" {
				return "", nil, contracts.NewError(contracts.CodeInvalidRequest, "messages[%d].tool_calls: only assistant messages make tool calls", i)
			}
			var calls []struct {
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			}
			if err := json.Unmarshal(m.ToolCalls, &calls); err != nil {
				return "", nil, contracts.NewError(contracts.CodeInvalidRequest, "messages[%d].tool_calls: want a list of {id, type, function: {name, arguments}}: %v", i, err)
			}
			var sb strings.Builder
			sb.WriteString(text)
			for _, c := range calls {
				lineBreak(&sb)
				sb.WriteString(renderCall(c.Function.Name, c.Function.Arguments))
			}
			text = sb.String()
		}
		if m.Role == "tool" {
			out = append(out, contracts.Message{Role: contracts.RoleUser, Content: renderResult(m.ToolCallID, text, false)})
			continue
		}
		switch {
		case slices.Contains(systemRoles, m.Role):
			system = append(system, text)
		case m.Role == "user" || m.Role == "assistant":
			out = append(out, contracts.Message{Role: contracts.Role(m.Role), Content: text})
		default:
			return "", nil, contracts.NewError(contracts.CodeInvalidRequest, "messages[%d].role %q: want %s",
				i, m.Role, strings.Join(append(slices.Clone(systemRoles), "user", "assistant"), ", "))
		}
	}
	return strings.Join(system, "\n\n"), out, nil
}
