package billing

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

func goldenUsage(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../contracts/testdata/usage.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeUsageGolden(t *testing.T) {
	t.Parallel()
	u, err := DecodeUsage(goldenUsage(t))
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 8, 30, 9, 59, 59, 987e6, time.UTC)
	if u.JobID != "job_01J9Z8Q4W6K2M3N4P5R6S7T8V9" || u.Tenant != "acme" || u.InputTokens != 182 ||
		u.TimeToFirstTokenMs != 31.25 || !u.CreatedAt.Equal(want) {
		t.Errorf("decoded %+v", u)
	}
}

// deleted, passed to edit, removes the field.
var deleted = new(int)

// edit returns the golden record with one top-level field replaced by v
// (nil for JSON null), or removed when v is deleted.
func edit(t *testing.T, field string, v any) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(goldenUsage(t), &m); err != nil {
		t.Fatal(err)
	}
	if v == deleted {
		delete(m, field)
	} else {
		m[field] = v
	}
	return mustJSON(t, m)
}

func TestDecodeUsageRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		body    []byte
		wantMsg string
	}{
		{"not json", []byte("{nope"), "not a JSON object"},
		{"array", []byte("[]"), "not a JSON object"},
		{"null", []byte("null"), "not a JSON object"},
		{"trailing", append(goldenUsage(t), []byte(" {}")...), "unexpected data"},
		{"too large", []byte(`{"x":"` + strings.Repeat("a", MaxUsageBytes) + `"}`), "above the limit"},
		{"missing field", edit(t, "input_tokens", deleted), "missing or null: input_tokens"},
		{"null field", edit(t, "confidence", nil), "missing or null: confidence"},
		{"wrong type", edit(t, "output_tokens", "47"), "output_tokens"},
		{"fractional count", edit(t, "output_tokens", 4.5), "output_tokens"},
		{"negative tokens", edit(t, "input_tokens", -1), "input_tokens is negative"},
		{"negative ms", edit(t, "time_to_first_token_ms", -0.5), "time_to_first_token_ms"},
		{"confidence above 1", edit(t, "confidence", 1.5), "confidence 1.5 is above 1"},
		{"bad tenant", edit(t, "tenant", "a.b"), "tenant"},
		{"bad job id", edit(t, "job_id", "has space"), "job_id"},
		{"empty model", edit(t, "model", ""), "model"},
		{"bad priority", edit(t, "priority", "urgent"), "priority"},
		{"bad bucket", edit(t, "bucket", "huge"), "bucket"},
		{"bad status", edit(t, "status", "done"), "status"},
		{"attempt 0", edit(t, "attempt", 0), "attempt"},
		{"bad time", edit(t, "created_at", "yesterday"), "created_at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeUsage(tc.body)
			if !errors.Is(err, ErrInvalidUsage) {
				t.Fatalf("DecodeUsage: %v, want ErrInvalidUsage", err)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tc.wantMsg)
			}
		})
	}
}

func TestDecodeUsageIgnoresNewFields(t *testing.T) {
	t.Parallel()
	if _, err := DecodeUsage(edit(t, "reasoning_tokens", 12)); err != nil {
		t.Errorf("record with an added field: %v", err)
	}
}

func TestValidateUsageNonFinite(t *testing.T) {
	t.Parallel()
	u := usage("j1", "acme", "m", time.Now(), 1, 1, 1, 1, 0.5)
	if err := ValidateUsage(u); err != nil {
		t.Fatal(err)
	}
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		bad := u
		bad.ToolExecutionTimeMs = v
		if err := ValidateUsage(bad); !errors.Is(err, ErrInvalidUsage) {
			t.Errorf("tool ms %v: %v", v, err)
		}
	}
}
