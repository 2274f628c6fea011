package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzDecodeJobRequest feeds arbitrary bytes to DecodeJobRequest: it must
// never panic, must fail only with a *ValidationError of known codes, and
// what it accepts must encode to a request it accepts again unchanged.
func FuzzDecodeJobRequest(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "job_request*.json"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		``, `null`, `[]`, `{}`, `{"model":"m"`, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"seed":18446744073709551615,"top_k":-0,"temperature":1e-308}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","schema":{"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/a"}}}}}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"name":"pii_redactor","params":{"patterns":["(a|b)*c{2,5}"]}}]}`,
		`{"model":"m","messages":[null,{"role":1}],"metadata":{"a":null},"deadline":"2026-13-01T00:00:00Z"}`,
	} {
		f.Add([]byte(s))
	}
	lim := Limits{MaxRequestBytes: 1 << 16}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := DecodeJobRequest(b, lim)
		if err != nil {
			if req != nil {
				t.Fatal("request returned with an error")
			}
			checkDecodeError(t, err)
			return
		}
		out, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("accepted request does not encode: %v", err)
		}
		again, err := DecodeJobRequest(out, Limits{MaxRequestBytes: 1 << 20})
		if err != nil {
			t.Fatalf("re-encoded request rejected: %v\n%s", err, out)
		}
		out2, err := json.Marshal(again)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, out2) {
			t.Fatalf("decode/encode is not stable:\n%s\n%s", out, out2)
		}
	})
}

// FuzzDecodeUsage feeds arbitrary bytes to DecodeUsage (billing reads
// ZL_USAGE bodies with it): it must never panic, must fail only with a
// *ValidationError of known codes, and what it accepts must encode to a
// record it accepts again unchanged.
func FuzzDecodeUsage(f *testing.F) {
	golden, err := os.ReadFile(filepath.Join("testdata", "usage.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden)
	for _, s := range []string{
		``, `null`, `[]`, `{}`, `{"job_id":1}`, `{"job_id":"j","confidence":1e400}`,
		`{"job_id":"j","tenant":"t","model":"m","priority":"high","bucket":"short","status":"completed","created_at":"2026-13-01T00:00:00Z"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := DecodeUsage(b)
		if err != nil {
			if u != (Usage{}) {
				t.Fatal("record returned with an error")
			}
			checkDecodeError(t, err)
			return
		}
		checkStable(t, u, DecodeUsage)
	})
}

// FuzzDecodeTenantLimits feeds arbitrary bytes to DecodeTenantLimits
// (workers and gateways read ZL_LIMITS values with it): never a panic,
// only known codes, and what it accepts encodes to a value it accepts
// again unchanged.
func FuzzDecodeTenantLimits(f *testing.F) {
	golden, err := os.ReadFile(filepath.Join("testdata", "tenant_limits.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden)
	for _, s := range []string{
		``, `null`, `{}`, `{"tenant":"a","requests_per_minute":-1}`, `{"tenant":"a","monthly_spend":100}`,
		`{"tenant":"a","currency":"USD","month":"2026-13","month_to_date":"1e3","updated_at":"2026-01-01T00:00:00Z"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := DecodeTenantLimits(b)
		if err != nil {
			checkDecodeError(t, err)
			return
		}
		checkStable(t, l, DecodeTenantLimits)
	})
}

// FuzzDecodeWorkerInfo feeds arbitrary bytes to DecodeWorkerInfo and
// DecodeModelRecord (producers and gateways read the fleet's buckets with
// them): never a panic, only known codes, and what they accept encodes to
// a value they accept again unchanged.
func FuzzDecodeWorkerInfo(f *testing.F) {
	for _, name := range []string{"worker_info.json", "model_record.json"} {
		golden, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(golden)
	}
	for _, s := range []string{``, `null`, `{}`, `{"worker_id":"w","models":null}`, `{"model":"m","worker_id":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if w, err := DecodeWorkerInfo(b); err != nil {
			checkDecodeError(t, err)
		} else {
			checkStable(t, w, DecodeWorkerInfo)
		}
		if m, err := DecodeModelRecord(b); err != nil {
			checkDecodeError(t, err)
		} else {
			checkStable(t, m, DecodeModelRecord)
		}
	})
}

// checkStable fails t unless v, which decode accepted, encodes to a
// message decode accepts again and that encodes to the same bytes.
func checkStable[T any](t *testing.T, v T, decode func([]byte) (T, error)) {
	t.Helper()
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("accepted message does not encode: %v", err)
	}
	again, err := decode(out)
	if err != nil {
		t.Fatalf("re-encoded message rejected: %v\n%s", err, out)
	}
	if out2, _ := json.Marshal(again); !bytes.Equal(out, out2) {
		t.Fatalf("decode/encode is not stable:\n%s\n%s", out, out2)
	}
}

// checkDecodeError fails t unless err is what a decoder may return: a
// non-empty *ValidationError of known, non-internal codes.
func checkDecodeError(t *testing.T, err error) {
	t.Helper()
	var v *ValidationError
	if !errors.As(err, &v) || len(v.Problems) == 0 {
		t.Fatalf("error %T %v is not a non-empty *ValidationError", err, err)
	}
	for _, p := range v.Problems {
		if !p.Code.Known() || p.Message == "" || p.Code == CodeInternal {
			t.Fatalf("bad problem %+v", p)
		}
	}
}

// FuzzParseTraceparent: never panics, and a parsed version-00 value
// prints back as it came.
func FuzzParseTraceparent(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-x")
	f.Fuzz(func(t *testing.T, s string) {
		tp, err := ParseTraceparent(s)
		if err != nil {
			return
		}
		if strings.HasPrefix(s, "00-") && tp.String() != s {
			t.Fatalf("%q printed back as %q", s, tp.String())
		}
	})
}
