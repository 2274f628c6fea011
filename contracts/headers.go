package contracts

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Header names. NATS headers are case-sensitive: use these spellings.
const (
	// HeaderMsgID is JetStream's dedupe key. The worker sets it on the
	// events, results and usage records of a job ("<tenant>/<job_id>",
	// JobRef.String, and EventMsgID for events), so that a redelivered job
	// does not store them twice. Jobs carry none: a tenant chooses the
	// headers of what it publishes, so ZL_JOBS deduplicates on the subject
	// (which carries tenant and job id) instead, and a forged Nats-Msg-Id
	// on one tenant's job cannot swallow another tenant's.
	HeaderMsgID = jetstream.MsgIDHeader
	// HeaderTraceparent carries the W3C trace context of the job, the same
	// trace id across every hop.
	HeaderTraceparent = "traceparent"
	// HeaderContract carries the contract version of the body
	// (ContractVersion).
	HeaderContract = "Zl-Contract"
	// HeaderTenant repeats the tenant of the subject for consumers that
	// do not parse subjects (events, results).
	HeaderTenant = "Zl-Tenant"
)

// ContractVersion is the version of the wire messages in this package. It
// changes only when an existing field changes meaning or a reader would
// misread a message; adding an optional field does not change it.
const ContractVersion = "1"

// NewHeader returns the headers a message about a job of tenant carries:
// Zl-Tenant, Zl-Contract and, when tp is not zero, traceparent.
func NewHeader(tenant string, tp Traceparent) nats.Header {
	h := nats.Header{}
	h.Set(HeaderTenant, tenant)
	h.Set(HeaderContract, ContractVersion)
	if !tp.IsZero() {
		h.Set(HeaderTraceparent, tp.String())
	}
	return h
}

// EventMsgID returns the Nats-Msg-Id of a job's event:
// "<tenant>/<job_id>/<attempt>/<seq>", so that a worker retrying a publish
// does not store an event twice while a new attempt's events are kept.
func EventMsgID(job JobRef, attempt int, seq uint64) string {
	return fmt.Sprintf("%s/%d/%d", job, attempt, seq)
}

// CheckContract returns an *Error with CodeUnsupportedContract when h names
// a contract version other than ContractVersion. A missing Zl-Contract
// header is read as the current version, so that plain NATS publishers may
// leave it out.
func CheckContract(h nats.Header) error {
	v := h.Get(HeaderContract)
	if v == "" || v == ContractVersion {
		return nil
	}
	return NewError(CodeUnsupportedContract, "contract version %q is not supported; this component speaks version %q", v, ContractVersion)
}

// TraceparentFromHeader parses h's traceparent header. ok is false when it
// is missing or malformed; a malformed one should be replaced, not kept.
func TraceparentFromHeader(h nats.Header) (tp Traceparent, ok bool) {
	tp, err := ParseTraceparent(h.Get(HeaderTraceparent))
	return tp, err == nil
}

// TraceIDFromHeader returns the hex trace id of h's traceparent header, or
// "" when there is none.
func TraceIDFromHeader(h nats.Header) string {
	tp, ok := TraceparentFromHeader(h)
	if !ok {
		return ""
	}
	return tp.TraceIDString()
}

// Traceparent is a W3C Trace Context traceparent
// ("00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>"). The zero value
// is "no trace".
type Traceparent struct {
	// TraceID identifies the whole trace; never all zero in a valid value.
	TraceID [16]byte
	// ParentID identifies the span that sent the message; never all zero
	// in a valid value.
	ParentID [8]byte
	// Flags holds the trace flags; bit 0 is "sampled".
	Flags byte
}

// FlagSampled is the "sampled" trace flag.
const FlagSampled byte = 0x01

// NewTraceparent returns a traceparent with a random trace id and parent id
// and the sampled flag set: the start of a new trace.
func NewTraceparent() Traceparent {
	var tp Traceparent
	fill(tp.TraceID[:])
	fill(tp.ParentID[:])
	tp.Flags = FlagSampled
	return tp
}

// Child returns tp with a new random parent id: what a hop that received tp
// sends on. The zero value's child is a new trace.
func (tp Traceparent) Child() Traceparent {
	if tp.IsZero() {
		return NewTraceparent()
	}
	fill(tp.ParentID[:])
	return tp
}

// fill sets b to random bytes, never all zero.
func fill(b []byte) {
	for {
		_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+).
		for _, c := range b {
			if c != 0 {
				return
			}
		}
	}
}

// IsZero reports whether tp is the zero value.
func (tp Traceparent) IsZero() bool { return tp == Traceparent{} }

// Sampled reports whether the sampled flag is set.
func (tp Traceparent) Sampled() bool { return tp.Flags&FlagSampled != 0 }

// TraceIDString returns the trace id as 32 lower-case hex digits.
func (tp Traceparent) TraceIDString() string { return hex.EncodeToString(tp.TraceID[:]) }

// String returns the version-00 header value, or "" for the zero value.
func (tp Traceparent) String() string {
	if tp.IsZero() {
		return ""
	}
	return fmt.Sprintf("00-%x-%x-%02x", tp.TraceID[:], tp.ParentID[:], tp.Flags)
}

// ParseTraceparent parses a traceparent header value. It accepts version 00
// exactly and, as the W3C spec asks, later versions by their first four
// fields (ignoring what follows); it rejects version ff, upper-case hex and
// all-zero ids. The error is an *Error with CodeInvalidRequest.
func ParseTraceparent(s string) (Traceparent, error) {
	bad := func(why string) (Traceparent, error) {
		return Traceparent{}, &Error{Code: CodeInvalidRequest, Field: HeaderTraceparent, Message: fmt.Sprintf("traceparent %q %s", s, why)}
	}
	const n = 55 // len("00-" + 32 + "-" + 16 + "-" + 2)
	if len(s) < n {
		return bad("is too short")
	}
	if s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return bad("is not version-traceid-parentid-flags")
	}
	ver, ok := lowerHex(s[0:2])
	switch {
	case !ok:
		return bad("has a bad version")
	case ver[0] == 0xff:
		return bad("has the invalid version ff")
	case ver[0] == 0 && len(s) != n:
		return bad("is too long for version 00")
	case ver[0] != 0 && len(s) > n && s[n] != '-':
		return bad("has a malformed suffix")
	}
	var tp Traceparent
	tid, ok1 := lowerHex(s[3:35])
	pid, ok2 := lowerHex(s[36:52])
	flags, ok3 := lowerHex(s[53:55])
	if !ok1 || !ok2 || !ok3 {
		return bad("has characters other than lower-case hex")
	}
	copy(tp.TraceID[:], tid)
	copy(tp.ParentID[:], pid)
	tp.Flags = flags[0]
	if tp.TraceID == [16]byte{} {
		return bad("has an all-zero trace id")
	}
	if tp.ParentID == [8]byte{} {
		return bad("has an all-zero parent id")
	}
	return tp, nil
}

// lowerHex decodes s when it is lower-case hex only.
func lowerHex(s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return nil, false
		}
	}
	b, err := hex.DecodeString(s)
	return b, err == nil
}
