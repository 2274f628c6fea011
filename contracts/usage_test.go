package contracts

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestDecodeUsageGolden(t *testing.T) {
	t.Parallel()
	u, err := DecodeUsage(readFixture(t, "usage.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 8, 30, 9, 59, 59, 987e6, time.UTC)
	if u.JobID != "job_01J9Z8Q4W6K2M3N4P5R6S7T8V9" || u.Tenant != "acme" || u.InputTokens != 182 ||
		u.TimeToFirstTokenMs != 31.25 || !u.CreatedAt.Equal(want) {
		t.Errorf("decoded %+v", u)
	}
}

// deleted, passed to editUsage, removes the field.
var deleted = new(int)

// editUsage returns the golden record with one top-level field replaced by
// v (nil for JSON null), or removed when v is deleted.
func editUsage(t *testing.T, field string, v any) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(readFixture(t, "usage.json"), &m); err != nil {
		t.Fatal(err)
	}
	if v == deleted {
		delete(m, field)
	} else {
		m[field] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeUsageRejects(t *testing.T) {
	t.Parallel()
	golden := readFixture(t, "usage.json")
	for _, tc := range []struct {
		name      string
		body      []byte
		wantCode  Code
		wantField string
		wantMsg   string
	}{
		{"not json", []byte("{nope"), CodeMalformedJSON, "", "invalid character"},
		{"array", []byte("[]"), CodeMalformedJSON, "", "must be a JSON object, not an array"},
		{"null", []byte("null"), CodeMalformedJSON, "", "must be a JSON object, not null"},
		{"trailing", append(golden, []byte(" {}")...), CodeMalformedJSON, "", "unexpected data"},
		{"not utf-8", []byte("{\"model\":\"\xff\"}"), CodeMalformedJSON, "", "usage record is not valid UTF-8"},
		{"too large", []byte(`{"x":"` + strings.Repeat("a", MaxUsageBytes) + `"}`), CodeRequestTooLarge, "", "above the limit"},
		{"missing field", editUsage(t, "input_tokens", deleted), CodeInvalidRequest, "input_tokens", "is missing"},
		{"null field", editUsage(t, "confidence", nil), CodeInvalidRequest, "confidence", "must not be null"},
		{"wrong type", editUsage(t, "output_tokens", "47"), CodeInvalidRequest, "output_tokens", "must be an integer"},
		{"fractional count", editUsage(t, "output_tokens", 4.5), CodeInvalidRequest, "output_tokens", "not an integer"},
		{"negative tokens", editUsage(t, "input_tokens", -1), CodeInvalidRequest, "input_tokens", "input_tokens is negative"},
		{"negative ms", editUsage(t, "time_to_first_token_ms", -0.5), CodeInvalidRequest, "time_to_first_token_ms", "finite number"},
		{"confidence above 1", editUsage(t, "confidence", 1.5), CodeInvalidRequest, "confidence", "confidence 1.5 is above 1"},
		{"bad tenant", editUsage(t, "tenant", "a.b"), CodeInvalidRequest, "tenant", ""},
		{"bad job id", editUsage(t, "job_id", "has space"), CodeInvalidRequest, "job_id", ""},
		{"empty model", editUsage(t, "model", ""), CodeInvalidRequest, "model", ""},
		{"bad priority", editUsage(t, "priority", "urgent"), CodeInvalidRequest, "priority", "urgent"},
		{"bad bucket", editUsage(t, "bucket", "huge"), CodeInvalidRequest, "bucket", "huge"},
		{"bad status", editUsage(t, "status", "done"), CodeInvalidRequest, "status", "done"},
		{"retried above output", editUsage(t, "retried_output_tokens", 48), CodeInvalidRequest, "retried_output_tokens", "above output_tokens 47"},
		{"attempt 0", editUsage(t, "attempt", 0), CodeInvalidRequest, "attempt", "below 1"},
		{"bad time", editUsage(t, "created_at", "yesterday"), CodeInvalidRequest, "created_at", "RFC 3339"},
		{"long batch id", editUsage(t, "batch_id", strings.Repeat("b", MaxMetadataValueLen+1)), CodeInvalidRequest, "batch_id", "at most 512"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := DecodeUsage(tc.body)
			var v *ValidationError
			if !errors.As(err, &v) || len(v.Problems) == 0 {
				t.Fatalf("DecodeUsage: %v, want a *ValidationError", err)
			}
			if u != (Usage{}) {
				t.Errorf("a record came back with the error: %+v", u)
			}
			p := v.Problems[0]
			if p.Code != tc.wantCode || p.Field != tc.wantField || !strings.Contains(p.Message, tc.wantMsg) {
				t.Errorf("problem %+v, want code %s, field %q, message with %q", p, tc.wantCode, tc.wantField, tc.wantMsg)
			}
			if !errors.Is(err, tc.wantCode) {
				t.Errorf("errors.Is(%v, %s) is false", err, tc.wantCode)
			}
		})
	}
}

func TestDecodeUsageIgnoresNewFields(t *testing.T) {
	t.Parallel()
	if _, err := DecodeUsage(editUsage(t, "reasoning_tokens", 12)); err != nil {
		t.Errorf("record with an added field: %v", err)
	}
	// Optional fields may be absent or null.
	if _, err := DecodeUsage(editUsage(t, "batch_id", nil)); err != nil {
		t.Errorf("record with a null batch_id: %v", err)
	}
	// A batch id as long as request metadata allows is billed.
	if _, err := DecodeUsage(editUsage(t, "batch_id", strings.Repeat("b", MaxMetadataValueLen))); err != nil {
		t.Errorf("record with a %d-byte batch_id: %v", MaxMetadataValueLen, err)
	}
}

func TestValidateUsageNonFinite(t *testing.T) {
	t.Parallel()
	u, err := DecodeUsage(readFixture(t, "usage.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		bad := u
		bad.ToolExecutionTimeMs = v
		var ve *ValidationError
		if err := bad.Validate(); !errors.As(err, &ve) || ve.Problems[0].Field != "tool_execution_time_ms" {
			t.Errorf("tool ms %v: %v", v, err)
		}
	}
}
