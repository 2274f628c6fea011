package contracts

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
)

func TestParseTraceparent(t *testing.T) {
	t.Parallel()
	const valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tp, err := ParseTraceparent(valid)
	if err != nil {
		t.Fatal(err)
	}
	if tp.String() != valid || tp.TraceIDString() != "4bf92f3577b34da6a3ce929d0e0e4736" || !tp.Sampled() {
		t.Errorf("parsed %+v -> %q", tp, tp.String())
	}
	// A later version may append fields; the first four are read.
	if tp2, err := ParseTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-extra"); err != nil || tp2.Sampled() || tp2.TraceID != tp.TraceID {
		t.Errorf("future version: %+v, %v", tp2, err)
	}
	bad := []string{
		"",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",      // no flags
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", // suffix on 00
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   // version ff
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",   // upper case
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",   // zero trace id
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",   // zero parent id
		"00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",   // separators
		"0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   // bad version
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",  // bad suffix
		"00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",   // non-hex
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",    // short
	}
	for _, s := range bad {
		if _, err := ParseTraceparent(s); !errors.Is(err, CodeInvalidRequest) {
			t.Errorf("ParseTraceparent(%q) = %v, want invalid_request", s, err)
		}
	}
}

func TestNewTraceparent(t *testing.T) {
	t.Parallel()
	a, b := NewTraceparent(), NewTraceparent()
	if a.TraceID == b.TraceID || !a.Sampled() || a.IsZero() {
		t.Errorf("NewTraceparent: %v %v", a, b)
	}
	back, err := ParseTraceparent(a.String())
	if err != nil || back != a {
		t.Errorf("round trip %q: %v, %v", a, back, err)
	}
	if (Traceparent{}).String() != "" || (Traceparent{}).Child().IsZero() {
		t.Error("zero value handling")
	}
}

func TestHeaders(t *testing.T) {
	t.Parallel()
	tp := NewTraceparent()
	h := NewHeader("acme", tp)
	// A job carries no Nats-Msg-Id: ZL_JOBS deduplicates on the subject.
	if h.Get("Nats-Msg-Id") != "" || h.Get(HeaderTenant) != "acme" || h.Get(HeaderContract) != ContractVersion || h.Get("traceparent") != tp.String() {
		t.Errorf("NewHeader = %v", h)
	}
	if TraceIDFromHeader(h) != tp.TraceIDString() {
		t.Error("TraceIDFromHeader")
	}
	if NewHeader("t", Traceparent{}).Get(HeaderTraceparent) != "" {
		t.Error("zero traceparent must not be sent")
	}
	if TraceIDFromHeader(nats.Header{HeaderTraceparent: {"junk"}}) != "" || TraceIDFromHeader(nil) != "" {
		t.Error("TraceIDFromHeader accepted junk")
	}
	if err := CheckContract(h); err != nil {
		t.Error(err)
	}
	if err := CheckContract(nats.Header{}); err != nil {
		t.Errorf("missing header: %v", err)
	}
	if err := CheckContract(nats.Header{HeaderContract: {"2"}}); !errors.Is(err, CodeUnsupportedContract) {
		t.Errorf("CheckContract(2) = %v", err)
	}
	if got := EventMsgID(JobRef{"acme", "job1"}, 2, 7); got != "acme/job1/2/7" {
		t.Errorf("EventMsgID = %q", got)
	}
}
