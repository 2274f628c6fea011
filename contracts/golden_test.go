package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// fixture is one golden wire message in testdata/.
type fixture struct {
	file   string
	schema string       // file in schema/ it must match
	typ    reflect.Type // Go type it decodes into
	check  func(t *testing.T, v any)
}

var fixtures = []fixture{
	{"job_request.json", "job_request.json", reflect.TypeFor[JobRequest](), func(t *testing.T, v any) {
		if err := v.(*JobRequest).Validate(Limits{}); err != nil {
			t.Errorf("golden request does not validate: %v", err)
		}
	}},
	{"job_request_regex.json", "job_request.json", reflect.TypeFor[JobRequest](), func(t *testing.T, v any) {
		if err := v.(*JobRequest).Validate(Limits{}); err != nil {
			t.Errorf("golden request does not validate: %v", err)
		}
	}},
	{"job_request_fallback.json", "job_request.json", reflect.TypeFor[JobRequest](), func(t *testing.T, v any) {
		r := v.(*JobRequest)
		if err := r.Validate(Limits{}); err != nil {
			t.Errorf("golden request does not validate: %v", err)
		}
		sp, err := ParseSystemPrompt(r.System)
		if err != nil || !sp.LowLatency || len(sp.Tools) != 1 || sp.Tools[0].ContextID != "extract" {
			t.Errorf("system prompt: %+v, %v", sp, err)
		}
	}},
	{"job_request_thinking.json", "job_request.json", reflect.TypeFor[JobRequest](), func(t *testing.T, v any) {
		r := v.(*JobRequest)
		if err := r.Validate(Limits{}); err != nil || r.Thinking.Enabled() == nil || !*r.Thinking.Enabled() {
			t.Errorf("golden request: thinking %+v, %v", r.Thinking, err)
		}
	}},
	{"job_request_embedding.json", "job_request.json", reflect.TypeFor[JobRequest](), func(t *testing.T, v any) {
		r := v.(*JobRequest)
		if err := r.Validate(Limits{}); err != nil || !r.IsEmbedding() || r.Embedding.Input[0].Text == "" || len(r.Embedding.Input[1].Tokens) != 4 {
			t.Errorf("golden embedding request: %+v, %v", r.Embedding, err)
		}
	}},
	{"event_started.json", "event.json", reflect.TypeFor[Event](), checkEvent(EventStarted)},
	{"event_delta.json", "event.json", reflect.TypeFor[Event](), checkEvent(EventDelta)},
	{"event_delta_thinking.json", "event.json", reflect.TypeFor[Event](), checkEvent(EventDelta)},
	{"event_tool.json", "event.json", reflect.TypeFor[Event](), checkEvent(EventTool)},
	{"event_preempted.json", "event.json", reflect.TypeFor[Event](), checkEvent(EventPreempted)},
	{"event_resumed.json", "event.json", reflect.TypeFor[Event](), checkEvent(EventResumed)},
	{"event_final.json", "event.json", reflect.TypeFor[Event](), checkEvent(EventFinal)},
	{"event_final_incomplete.json", "event.json", reflect.TypeFor[Event](), checkEvent(EventFinal)},
	{"event_error.json", "event.json", reflect.TypeFor[Event](), checkEvent(EventError)},
	{"event_error_rate_limited.json", "event.json", reflect.TypeFor[Event](), checkEvent(EventError)},
	{"result_fallback.json", "result.json", reflect.TypeFor[Result](), checkResult},
	{"result_thinking.json", "result.json", reflect.TypeFor[Result](), checkResult},
	{"result.json", "result.json", reflect.TypeFor[Result](), checkResult},
	{"result_failed.json", "result.json", reflect.TypeFor[Result](), checkResult},
	{"result_incomplete.json", "result.json", reflect.TypeFor[Result](), checkResult},
	{"result_embedding.json", "result.json", reflect.TypeFor[Result](), checkResult},
	{"usage.json", "usage.json", reflect.TypeFor[Usage](), nil},
	{"tenant_limits.json", "tenant_limits.json", reflect.TypeFor[TenantLimits](), func(t *testing.T, v any) {
		if err := v.(*TenantLimits).Validate(); err != nil {
			t.Errorf("golden tenant limits do not validate: %v", err)
		}
	}},
	{"worker_info.json", "worker_info.json", reflect.TypeFor[WorkerInfo](), nil},
	{"model_record.json", "model_record.json", reflect.TypeFor[ModelRecord](), nil},
	{"dlq_record.json", "dlq_record.json", reflect.TypeFor[DLQRecord](), func(t *testing.T, v any) {
		d := v.(*DLQRecord)
		if _, err := DecodeJobRequest(d.RequestBytes(), Limits{}); err != nil {
			t.Errorf("DLQ record's request does not decode: %v", err)
		}
	}},
	{"dlq_record_raw.json", "dlq_record.json", reflect.TypeFor[DLQRecord](), func(t *testing.T, v any) {
		d := v.(*DLQRecord)
		if _, err := DecodeJobRequest(d.RequestBytes(), Limits{}); !errors.Is(err, CodeMalformedJSON) {
			t.Errorf("DecodeJobRequest(raw DLQ request) = %v, want malformed_json", err)
		}
	}},
}

func checkEvent(want EventType) func(t *testing.T, v any) {
	return func(t *testing.T, v any) {
		e := v.(*Event)
		if e.Type != want {
			t.Errorf("type = %q, want %q", e.Type, want)
		}
		if err := e.Validate(); err != nil {
			t.Errorf("Validate: %v", err)
		}
	}
}

func checkResult(t *testing.T, v any) {
	if err := v.(*Result).Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// canonical decodes JSON into plain Go values for comparison.
func canonical(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("canonical: %v", err)
	}
	return v
}

// TestGoldenRoundTrip decodes every fixture strictly into its Go type,
// encodes it again and wants the same JSON: a renamed, dropped or retyped
// field fails here.
func TestGoldenRoundTrip(t *testing.T) {
	t.Parallel()
	for _, fx := range fixtures {
		t.Run(fx.file, func(t *testing.T) {
			t.Parallel()
			b := readFixture(t, fx.file)
			v := reflect.New(fx.typ).Interface()
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			if err := dec.Decode(v); err != nil {
				t.Fatalf("strict decode: %v", err)
			}
			out, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := canonical(t, out), canonical(t, b); !reflect.DeepEqual(got, want) {
				t.Errorf("round trip changed the message\n got: %s\nwant: %s", out, b)
			}
			if fx.check != nil {
				fx.check(t, v)
			}
		})
	}
}

// TestGoldenDecodeJobRequest runs the golden request through the untrusted
// decoder: it must pass unchanged (it already carries every default).
func TestGoldenDecodeJobRequest(t *testing.T) {
	t.Parallel()
	b := readFixture(t, "job_request.json")
	req, err := DecodeJobRequest(b, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := canonical(t, out), canonical(t, b); !reflect.DeepEqual(got, want) {
		t.Errorf("DecodeJobRequest changed the request\n got: %s\nwant: %s", out, b)
	}
}

// TestGoldenCoverage wants every JSON field of every wire type to appear in
// at least one fixture, so that the round trip guards all of them.
func TestGoldenCoverage(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	all := map[string]bool{}
	for _, fx := range fixtures {
		collectFields(fx.typ, all)
		markPresent(canonical(t, readFixture(t, fx.file)), fx.typ, seen)
	}
	var missing []string
	for f := range all {
		if !seen[f] {
			missing = append(missing, f)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("fields in no fixture: %v", missing)
	}
}

// structOf strips pointers and slices down to a struct type, or returns
// nil.
func structOf(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		if t == rawMessageType {
			return nil
		}
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == timeType || t == embedInputType {
		return nil
	}
	return t
}

func collectFields(t reflect.Type, all map[string]bool) {
	st := structOf(t)
	if st == nil {
		return
	}
	// The contract's types have no cycles, so plain recursion ends.
	for _, f := range jsonFields(st) {
		all[st.Name()+"."+f.name] = true
		collectFields(f.typ, all)
	}
}

func markPresent(v any, t reflect.Type, seen map[string]bool) {
	st := structOf(t)
	if st == nil {
		return
	}
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			markPresent(e, t.Elem(), seen)
		}
	case map[string]any:
		if t.Kind() == reflect.Map {
			for _, e := range x {
				markPresent(e, t.Elem(), seen)
			}
			return
		}
		for _, f := range jsonFields(st) {
			if fv, ok := x[f.name]; ok {
				seen[st.Name()+"."+f.name] = true
				markPresent(fv, f.typ, seen)
			}
		}
	}
}
