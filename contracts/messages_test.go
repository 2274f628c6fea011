package contracts

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func TestEventValidate(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 8, 30, 10, 0, 0, 0, time.UTC)
	base := func(typ EventType) *Event {
		return &Event{Type: typ, JobID: "j1", Tenant: "acme", Seq: 1, Attempt: 1, Time: now}
	}
	tests := []struct {
		name string
		e    *Event
		ok   bool
	}{
		{"started", base(EventStarted), true},
		{"unknown type", base("progress"), false},
		{"bad job id", func() *Event { e := base(EventStarted); e.JobID = "a.b"; return e }(), false},
		{"bad tenant", func() *Event { e := base(EventStarted); e.Tenant = ""; return e }(), false},
		{"seq 0", func() *Event { e := base(EventStarted); e.Seq = 0; return e }(), false},
		{"no time", func() *Event { e := base(EventStarted); e.Time = time.Time{}; return e }(), false},
		{"empty delta", base(EventDelta), false},
		{"token-only delta", func() *Event { e := base(EventDelta); e.TokenIDs = []int32{5}; return e }(), true},
		{"delta logprobs mismatch", func() *Event {
			e := base(EventDelta)
			e.Text, e.TokenIDs, e.Logprobs = "a", []int32{1, 2}, []TokenLogprob{{TokenID: 1}}
			return e
		}(), false},
		{"tool without action", func() *Event { e := base(EventTool); e.Tool = "suffix"; return e }(), false},
		{"tool", func() *Event { e := base(EventTool); e.Tool, e.Action = "suffix", ToolActionAppended; return e }(), true},
		{"final without usage", func() *Event { e := base(EventFinal); e.StopReason = StopEndTurn; return e }(), false},
		{"final", func() *Event { e := base(EventFinal); e.StopReason, e.Usage = StopEndTurn, &Usage{}; return e }(), true},
		{"error without error", base(EventError), false},
		{"error", func() *Event { e := base(EventError); e.Error = NewError(CodeInternal, "x"); return e }(), true},
	}
	for _, tt := range tests {
		if err := tt.e.Validate(); (err == nil) != tt.ok {
			t.Errorf("%s: Validate = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
	for _, typ := range EventTypes() {
		if !typ.Valid() || typ.Terminal() != (typ == EventFinal || typ == EventError) {
			t.Errorf("%s: Valid/Terminal wrong", typ)
		}
	}
	if s := base(EventStarted).String(); s != "started job=j1 attempt=1 seq=1" {
		t.Errorf("String = %q", s)
	}
}

func TestResultValidate(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC()
	base := func(s ResultStatus) *Result {
		return &Result{JobID: "j1", Tenant: "acme", Status: s, Attempt: 1, FinishedAt: now}
	}
	if err := base(StatusCompleted).Validate(); err == nil {
		t.Error("completed without stop_reason accepted")
	}
	r := base(StatusCompleted)
	r.StopReason = StopMaxTokens
	if err := r.Validate(); err != nil {
		t.Error(err)
	}
	for _, s := range []ResultStatus{StatusFailed, StatusCanceled} {
		r := base(s)
		if err := r.Validate(); err == nil {
			t.Errorf("%s without error accepted", s)
		}
		r.Error = NewError(CodeCanceled, "by user")
		if err := r.Validate(); err != nil {
			t.Error(err)
		}
	}
	if err := base("done").Validate(); !errors.Is(err, CodeInvalidRequest) {
		t.Errorf("unknown status: %v", err)
	}
	r = base(StatusCompleted)
	r.StopReason, r.Attempt = StopEndTurn, 0
	if err := r.Validate(); err == nil {
		t.Error("attempt 0 accepted")
	}
}

func TestDLQRecordRequest(t *testing.T) {
	t.Parallel()
	var d DLQRecord
	good := []byte(`{"model":"m"}`)
	d.SetRequest(good)
	if d.RequestBase64 != nil || !bytes.Equal(d.RequestBytes(), good) {
		t.Errorf("valid JSON stored as %+v", d)
	}
	good[0] = 'x' // SetRequest must have copied
	if d.Request[0] != '{' {
		t.Error("SetRequest kept the caller's slice")
	}
	bad := []byte("{\"model\": \xff")
	d.SetRequest(bad)
	if d.Request != nil || !bytes.Equal(d.RequestBytes(), bad) {
		t.Errorf("invalid JSON stored as %+v", d)
	}
}
