package contracts

import (
	"errors"
	"testing"
)

// TestThinkingSwitch: enabled and disabled validate, anything else is an
// invalid request naming thinking.type; nil leaves the model's default.
func TestThinkingSwitch(t *testing.T) {
	t.Parallel()
	base := func(th *Thinking) *JobRequest {
		return &JobRequest{Model: "m", Messages: []Message{{Role: RoleUser, Content: "hi"}}, Thinking: th}
	}
	for _, typ := range []string{ThinkingEnabled, ThinkingDisabled} {
		r := base(&Thinking{Type: typ})
		if err := r.Validate(Limits{}); err != nil {
			t.Errorf("%s: %v", typ, err)
		}
		if on := r.Thinking.Enabled(); on == nil || *on != (typ == ThinkingEnabled) {
			t.Errorf("%s: Enabled() = %v", typ, on)
		}
	}
	if base(nil).Thinking.Enabled() != nil {
		t.Error("nil thinking is not the model's default")
	}
	err := base(&Thinking{Type: "maybe"}).Validate(Limits{})
	var ce *Error
	if !errors.As(err, &ce) || ce.Code != CodeInvalidRequest || ce.Field != "thinking.type" {
		t.Errorf("thinking maybe: %v", err)
	}
}
