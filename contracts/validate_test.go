package contracts

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

func validRequest() *JobRequest {
	return &JobRequest{
		Model:    "stories260K",
		Messages: []Message{{Role: RoleUser, Content: "Once upon a time"}},
	}
}

// problem is a (code, field) pair expected from validation.
type problem struct {
	code  Code
	field string
}

func problemsOf(t *testing.T, err error) []problem {
	t.Helper()
	if err == nil {
		return nil
	}
	var v *ValidationError
	if !errors.As(err, &v) {
		t.Fatalf("error %T is not a *ValidationError: %v", err, err)
	}
	out := make([]problem, len(v.Problems))
	for i, p := range v.Problems {
		if !p.Code.Known() {
			t.Errorf("problem with unknown code %q", p.Code)
		}
		if p.Message == "" {
			t.Errorf("problem %s at %s has no message", p.Code, p.Field)
		}
		out[i] = problem{p.Code, p.Field}
	}
	return out
}

func TestValidate(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`)
	tests := []struct {
		name   string
		lim    Limits
		mutate func(r *JobRequest)
		want   []problem
	}{
		{"valid", Limits{}, func(r *JobRequest) {}, nil},
		{"missing model and messages", Limits{}, func(r *JobRequest) { r.Model, r.Messages = "", nil },
			[]problem{{CodeInvalidRequest, "model"}, {CodeMissingMessages, "messages"}}},
		{"unknown model", Limits{KnownModel: func(m string) bool { return m == "other" }}, func(r *JobRequest) {},
			[]problem{{CodeUnknownModel, "model"}}},
		{"model with space", Limits{}, func(r *JobRequest) { r.Model = "a b" }, []problem{{CodeInvalidRequest, "model"}}},
		{"bad id", Limits{}, func(r *JobRequest) { r.ID = "a.b" }, []problem{{CodeInvalidRequest, "id"}}},
		{"bad roles and empty content", Limits{}, func(r *JobRequest) {
			r.Messages = []Message{{Role: "user", Content: "hi"}, {Role: "system", Content: "x"}, {Role: "robot", Content: ""}, {Role: "assistant", Content: ""}}
		}, []problem{{CodeInvalidRequest, "messages[1].role"}, {CodeInvalidRequest, "messages[2].role"}, {CodeInvalidRequest, "messages[2].content"}}},
		{"empty user content", Limits{}, func(r *JobRequest) { r.Messages[0].Content = "" },
			[]problem{{CodeInvalidRequest, "messages[0].content"}}},
		{"too many messages", Limits{MaxMessages: 2}, func(r *JobRequest) {
			r.Messages = slices.Repeat(r.Messages, 3)
		}, []problem{{CodeInvalidRequest, "messages"}}},
		{"max_tokens above ceiling", Limits{MaxTokensCeiling: 100}, func(r *JobRequest) { r.MaxTokens = 101 },
			[]problem{{CodeMaxTokensOutOfRange, "max_tokens"}}},
		{"negative max_tokens", Limits{}, func(r *JobRequest) { r.MaxTokens = -1 },
			[]problem{{CodeMaxTokensOutOfRange, "max_tokens"}}},
		{"sampling out of range", Limits{}, func(r *JobRequest) {
			r.Temperature, r.TopP, r.TopK, r.MinP, r.RepetitionPenalty = ptr(2.5), ptr(0.0), ptr(-1), ptr(1.0), ptr(0.0)
		}, []problem{{CodeInvalidSampling, "temperature"}, {CodeInvalidSampling, "top_p"}, {CodeInvalidSampling, "top_k"},
			{CodeInvalidSampling, "min_p"}, {CodeInvalidSampling, "repetition_penalty"}}},
		{"NaN temperature", Limits{}, func(r *JobRequest) { r.Temperature = ptr(math.NaN()) },
			[]problem{{CodeInvalidSampling, "temperature"}}},
		{"explicit zeros are fine", Limits{}, func(r *JobRequest) {
			r.Temperature, r.TopK, r.MinP, r.Seed = ptr(0.0), ptr(0), ptr(0.0), ptr(uint64(0))
		}, nil},
		{"top_logprobs without logprobs", Limits{}, func(r *JobRequest) { r.TopLogprobs = 2 },
			[]problem{{CodeInvalidSampling, "top_logprobs"}}},
		{"too many top_logprobs", Limits{}, func(r *JobRequest) { r.Logprobs, r.TopLogprobs = true, 21 },
			[]problem{{CodeInvalidSampling, "top_logprobs"}}},
		{"empty stop sequence", Limits{}, func(r *JobRequest) { r.StopSequences = []string{"ok", ""} },
			[]problem{{CodeInvalidSampling, "stop_sequences[1]"}}},
		{"unknown preset", Limits{}, func(r *JobRequest) { r.Preset = "wild" }, []problem{{CodeUnknownPreset, "preset"}}},
		{"bad priority", Limits{}, func(r *JobRequest) { r.Priority = "urgent" }, []problem{{CodeInvalidRequest, "priority"}}},
		{"zero deadline", Limits{}, func(r *JobRequest) { r.Deadline = &time.Time{} }, []problem{{CodeInvalidRequest, "deadline"}}},
		{"json schema ok", Limits{}, func(r *JobRequest) {
			r.ResponseFormat = &ResponseFormat{Type: FormatJSONSchema, Schema: schema}
		}, nil},
		{"schema that does not compile", Limits{}, func(r *JobRequest) {
			r.ResponseFormat = &ResponseFormat{Type: FormatJSONSchema, Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"strin"}}}`)}
		}, []problem{{CodeInvalidSchema, "response_format.schema"}}},
		{"schema with external ref", Limits{}, func(r *JobRequest) {
			r.ResponseFormat = &ResponseFormat{Type: FormatJSONSchema, Schema: json.RawMessage(`{"$ref":"file:///etc/passwd"}`)}
		}, []problem{{CodeInvalidSchema, "response_format.schema"}}},
		{"schema not an object", Limits{}, func(r *JobRequest) {
			r.ResponseFormat = &ResponseFormat{Type: FormatJSONSchema, Schema: json.RawMessage(`"x"`)}
		}, []problem{{CodeInvalidSchema, "response_format.schema"}}},
		{"schema missing", Limits{}, func(r *JobRequest) { r.ResponseFormat = &ResponseFormat{Type: FormatJSONSchema} },
			[]problem{{CodeInvalidSchema, "response_format.schema"}}},
		{"bad regex", Limits{}, func(r *JobRequest) { r.ResponseFormat = &ResponseFormat{Type: FormatRegex, Pattern: "a(b"} },
			[]problem{{CodeInvalidRegex, "response_format.pattern"}}},
		{"lookahead is not RE2", Limits{}, func(r *JobRequest) { r.ResponseFormat = &ResponseFormat{Type: FormatRegex, Pattern: "a(?=b)"} },
			[]problem{{CodeInvalidRegex, "response_format.pattern"}}},
		{"format type mix-up", Limits{}, func(r *JobRequest) {
			r.ResponseFormat = &ResponseFormat{Type: FormatRegex, Pattern: "a+", Schema: schema}
		}, []problem{{CodeInvalidRequest, "response_format.schema"}}},
		{"json schema layout ok", Limits{}, func(r *JobRequest) {
			r.ResponseFormat = &ResponseFormat{Type: FormatJSONSchema, Schema: schema, Whitespace: WhitespacePretty, MaxStringLength: 200}
		}, nil},
		{"unknown whitespace", Limits{}, func(r *JobRequest) {
			r.ResponseFormat = &ResponseFormat{Type: FormatJSONSchema, Schema: schema, Whitespace: "loose"}
		}, []problem{{CodeInvalidRequest, "response_format.whitespace"}}},
		{"string cap out of range", Limits{}, func(r *JobRequest) {
			r.ResponseFormat = &ResponseFormat{Type: FormatJSONSchema, Schema: schema, MaxStringLength: -1}
		}, []problem{{CodeInvalidRequest, "response_format.max_string_length"}}},
		{"regex with a layout", Limits{}, func(r *JobRequest) {
			r.ResponseFormat = &ResponseFormat{Type: FormatRegex, Pattern: "a+", Whitespace: WhitespaceCompact}
		}, []problem{{CodeInvalidRequest, "response_format"}}},
		{"json_validator layout params", Limits{}, func(r *JobRequest) {
			r.Tools = []Tool{{Name: ToolJSONValidator, Params: map[string]json.RawMessage{"schema": schema,
				"whitespace": json.RawMessage(`"tabs"`), "max_string_length": json.RawMessage(`2000000`)}}}
		}, []problem{{CodeInvalidRequest, "tools[0].params.whitespace"}, {CodeInvalidRequest, "tools[0].params.max_string_length"}}},
		{"regex with a trigger", Limits{}, func(r *JobRequest) {
			r.ResponseFormat = &ResponseFormat{Type: FormatRegex, Pattern: "a+", Trigger: "<call>"}
		}, []problem{{CodeInvalidRequest, "response_format.trigger"}}},
		{"trigger too long", Limits{}, func(r *JobRequest) {
			r.ResponseFormat = &ResponseFormat{Type: FormatJSONSchema, Schema: schema, Trigger: strings.Repeat("x", MaxTriggerBytes+1)}
		}, []problem{{CodeInvalidRequest, "response_format.trigger"}}},
		{"unknown format type", Limits{}, func(r *JobRequest) { r.ResponseFormat = &ResponseFormat{Type: "xml"} },
			[]problem{{CodeInvalidRequest, "response_format.type"}}},
		{"tools", Limits{}, func(r *JobRequest) {
			r.Tools = []Tool{
				{Name: "shell"},
				{Name: ToolJSONValidator, Params: map[string]json.RawMessage{"schema": json.RawMessage(`{"minimum":"x"}`)}},
				{Name: ToolRegexMatcher, Params: map[string]json.RawMessage{"pattern": json.RawMessage(`"(("`), "flags": json.RawMessage(`"i"`)}},
				{Name: ToolSuffix},
				{Name: ToolRetryOnFail, Params: map[string]json.RawMessage{"output_contains": json.RawMessage(`["x"]`), "max_retries": json.RawMessage(`99`)}, Mode: "lax"},
				{Name: ToolSuffix, Params: map[string]json.RawMessage{"text": json.RawMessage(`"!"`)}},
				{Name: ToolPIIRedactor, Params: map[string]json.RawMessage{"patterns": json.RawMessage(`["ok","[z-a]"]`)}},
				{Name: ToolXMLValidator, Params: map[string]json.RawMessage{"allowed_tags": json.RawMessage(`"b"`)}},
			}
		}, []problem{
			{CodeUnknownTool, "tools[0].name"},
			{CodeInvalidSchema, "tools[1].params.schema"},
			{CodeInvalidRegex, "tools[2].params.pattern"},
			{CodeInvalidRequest, "tools[2].params.flags"},
			{CodeInvalidRequest, "tools[3].params.text"},
			{CodeInvalidRequest, "tools[4].mode"},
			{CodeInvalidRequest, "tools[4].params.max_retries"},
			{CodeInvalidRequest, "tools[5].name"},
			{CodeInvalidRegex, "tools[6].params.patterns[1]"},
			{CodeInvalidRequest, "tools[7].params.allowed_tags"},
		}},
		{"toxicity mode", Limits{}, func(r *JobRequest) {
			r.Tools = []Tool{
				{Name: ToolToxicityFilter, Params: map[string]json.RawMessage{"words": json.RawMessage(`["darn"]`), "mode": json.RawMessage(`"shout"`)}},
				{Name: ToolPIIRedactor, Params: map[string]json.RawMessage{"foo": json.RawMessage(`1`)}},
			}
		}, []problem{{CodeInvalidRequest, "tools[0].params.mode"}, {CodeInvalidRequest, "tools[1].params.foo"}}},
		{"toxicity mode aliases", Limits{}, func(r *JobRequest) {
			r.Tools = []Tool{{Name: ToolToxicityFilter, Params: map[string]json.RawMessage{"words": json.RawMessage(`["darn"]`), "mode": json.RawMessage(`"Whole_Word"`)}}}
		}, nil},
		{"too many tools", Limits{MaxTools: 1}, func(r *JobRequest) {
			r.Tools = []Tool{{Name: ToolSuffix, Params: map[string]json.RawMessage{"text": json.RawMessage(`"!"`)}},
				{Name: ToolXMLValidator, Params: map[string]json.RawMessage{"allowed_tags": json.RawMessage(`["b"]`)}}}
		}, []problem{{CodeInvalidRequest, "tools"}}},
		{"bad on_tool_failure", Limits{}, func(r *JobRequest) { r.OnToolFailure = "ignore" },
			[]problem{{CodeInvalidRequest, "on_tool_failure"}}},
		{"memory", Limits{MaxMemoryMB: 100}, func(r *JobRequest) {
			r.Memory = &MemoryOptions{MaxMemoryMB: 200, LowLatency: true, Preemptible: ptr(true)}
		}, []problem{{CodeMemoryLimit, "memory.max_memory_mb"}, {CodeInvalidRequest, "memory.preemptible"}}},
		{"negative memory", Limits{}, func(r *JobRequest) { r.Memory = &MemoryOptions{MaxMemoryMB: -1} },
			[]problem{{CodeInvalidRequest, "memory.max_memory_mb"}}},
		{"metadata", Limits{MaxMetadataKeys: 2}, func(r *JobRequest) {
			r.Metadata = map[string]string{"": "x", "big": strings.Repeat("v", MaxMetadataValueLen+1), "ok": "fine"}
		}, []problem{{CodeInvalidRequest, "metadata"}, {CodeInvalidRequest, "metadata"}, {CodeInvalidRequest, "metadata.big"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := validRequest()
			tt.mutate(r)
			got := problemsOf(t, r.Validate(tt.lim))
			if !slices.Equal(got, tt.want) {
				t.Errorf("problems = %v\nwant       %v\nerror: %v", got, tt.want, r.Validate(tt.lim))
			}
			for _, p := range tt.want {
				if err := r.Validate(tt.lim); !errors.Is(err, p.code) {
					t.Errorf("errors.Is(err, %s) = false", p.code)
				}
			}
		})
	}
}

func TestValidateToolErrorsNameTheTool(t *testing.T) {
	t.Parallel()
	r := validRequest()
	r.Tools = []Tool{{Name: ToolRegexMatcher, Params: map[string]json.RawMessage{"pattern": json.RawMessage(`"("`)}}}
	var e *Error
	if err := r.Validate(Limits{}); !errors.As(err, &e) || e.Tool != "regex_matcher" {
		t.Fatalf("Validate = %v, want an *Error naming regex_matcher", err)
	}
}

func TestSchemaProblemNamesKeyword(t *testing.T) {
	t.Parallel()
	msg := SchemaProblem(json.RawMessage(`{"properties":{"total":{"minimum":"zero"}}}`))
	if !strings.Contains(msg, "/properties/total/minimum") {
		t.Errorf("schema problem %q does not say where", msg)
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("schema problem %q is not one line", msg)
	}
}

func TestDecodeJobRequest(t *testing.T) {
	t.Parallel()
	const ok = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	tests := []struct {
		name string
		in   string
		lim  Limits
		want []problem
	}{
		{"minimal", ok, Limits{}, nil},
		{"too large", ok, Limits{MaxRequestBytes: 10}, []problem{{CodeRequestTooLarge, ""}}},
		{"empty", ``, Limits{}, []problem{{CodeMalformedJSON, ""}}},
		{"truncated", `{"model":"m"`, Limits{}, []problem{{CodeMalformedJSON, ""}}},
		{"syntax", `{"model":"m",}`, Limits{}, []problem{{CodeMalformedJSON, ""}}},
		{"trailing data", ok + `{}`, Limits{}, []problem{{CodeMalformedJSON, ""}}},
		{"not utf-8", "{\"model\":\"m\xff\"}", Limits{}, []problem{{CodeMalformedJSON, ""}}},
		{"array", `[]`, Limits{}, []problem{{CodeMalformedJSON, ""}}},
		{"null", `null`, Limits{}, []problem{{CodeMalformedJSON, ""}}},
		{"unknown fields at every depth",
			`{"model":"m","temprature":1,"messages":[{"role":"user","content":"hi","name":"x"}],"memory":{"max_mb":1},"response_format":{"type":"regex","pattern":"a","flags":"i"}}`,
			Limits{}, []problem{
				{CodeInvalidRequest, "messages[0].name"},
				{CodeInvalidRequest, "response_format.flags"},
				{CodeInvalidRequest, "memory.max_mb"},
				{CodeInvalidRequest, "temprature"},
			}},
		{"unknown fields allowed", `{"model":"m","temprature":1,"messages":[{"role":"user","content":"hi","name":"x"}]}`,
			Limits{AllowUnknownFields: true}, nil},
		{"wrong types with paths",
			`{"model":1,"messages":[{"role":"user","content":"hi"},{"role":"user","content":5}],"max_tokens":"10","seed":-3,"temperature":true,"top_k":1.5,"stream":"yes","deadline":"tomorrow","metadata":{"k":2},"stop_sequences":"x"}`,
			Limits{}, []problem{
				{CodeInvalidRequest, "model"},
				{CodeInvalidRequest, "messages[1].content"},
				{CodeInvalidRequest, "max_tokens"},
				{CodeInvalidRequest, "temperature"},
				{CodeInvalidRequest, "top_k"},
				{CodeInvalidRequest, "seed"},
				{CodeInvalidRequest, "stop_sequences"},
				{CodeInvalidRequest, "deadline"},
				{CodeInvalidRequest, "stream"},
				{CodeInvalidRequest, "metadata.k"},
			}},
		{"huge number", `{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":1e999}`, Limits{},
			[]problem{{CodeInvalidRequest, "temperature"}}},
		{"nulls mean unset", `{"id":null,"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":null,"response_format":{"type":"regex","pattern":"a","schema":null},"tools":[{"name":"suffix","params":{"text":"!","x":null}}],"memory":null}`,
			Limits{}, nil},
		{"null message", `{"model":"m","messages":[null]}`, Limits{}, []problem{{CodeInvalidRequest, "messages[0]"}}},
		{"missing messages", `{"model":"m"}`, Limits{}, []problem{{CodeMissingMessages, "messages"}}},
		{"validation after shape", `{"model":"m","messages":[],"max_tokens":999999,"preset":"x"}`, Limits{},
			[]problem{{CodeMissingMessages, "messages"}, {CodeMaxTokensOutOfRange, "max_tokens"}, {CodeUnknownPreset, "preset"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req, err := DecodeJobRequest([]byte(tt.in), tt.lim)
			got := problemsOf(t, err)
			if !slices.Equal(got, tt.want) {
				t.Errorf("problems = %v\nwant       %v\nerror: %v", got, tt.want, err)
			}
			if (err == nil) != (req != nil) {
				t.Errorf("got request %v with error %v", req, err)
			}
		})
	}
}

func TestDecodeJobRequestDefaults(t *testing.T) {
	t.Parallel()
	req, err := DecodeJobRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],
		"tools":[{"name":"suffix","params":{"text":"!"}}]}`), Limits{DefaultMaxTokens: 77})
	if err != nil {
		t.Fatal(err)
	}
	if req.Priority != PriorityNormal || req.MaxTokens != 77 || req.OnToolFailure != OnToolFailureFail {
		t.Errorf("defaults not applied: priority %q max_tokens %d on_tool_failure %q", req.Priority, req.MaxTokens, req.OnToolFailure)
	}
	if req.Temperature != nil || req.Seed != nil {
		t.Error("sampling fields must stay unset")
	}
	if !req.Preemptible() {
		t.Error("a job without memory options is preemptible")
	}
}

func TestPreemptible(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mem  *MemoryOptions
		want bool
	}{
		{nil, true},
		{&MemoryOptions{}, true},
		{&MemoryOptions{LowLatency: true}, false},
		{&MemoryOptions{Preemptible: ptr(false)}, false},
		{&MemoryOptions{LowLatency: true, Preemptible: ptr(false)}, false},
	}
	for _, tt := range tests {
		r := &JobRequest{Memory: tt.mem}
		if got := r.Preemptible(); got != tt.want {
			t.Errorf("Preemptible(%+v) = %v, want %v", tt.mem, got, tt.want)
		}
	}
}

func TestLimitsDefaults(t *testing.T) {
	t.Parallel()
	l := Limits{}.WithDefaults()
	if l.MaxRequestBytes != 1_000_000 || l.DefaultMaxTokens != 1024 || l.MaxTokensCeiling != 32768 {
		t.Errorf("defaults = %+v", l)
	}
	if l := (Limits{MaxTokensCeiling: 100}).WithDefaults(); l.DefaultMaxTokens != 100 {
		t.Errorf("DefaultMaxTokens = %d above a ceiling of 100", l.DefaultMaxTokens)
	}
}

// TestValidateToolFailureLadder: fallback needs fallback_response, which
// needs a rung that uses it; context_id is checked in tools[].
func TestValidateToolFailureLadder(t *testing.T) {
	t.Parallel()
	tools := []Tool{{Name: ToolSuffix, Params: map[string]json.RawMessage{"text": json.RawMessage(`"!"`)}}}
	tests := []struct {
		name      string
		policy    OnToolFailure
		fallback  string
		contextID string
		wantField string // "" means valid
	}{
		{"fail", OnToolFailureFail, "", "", ""},
		{"retry", OnToolFailureRetryWithoutTool, "", "", ""},
		{"retry then fallback", OnToolFailureRetryWithoutTool, "sorry", "", ""},
		{"fallback", OnToolFailureFallback, "sorry", "", ""},
		{"fallback without response", OnToolFailureFallback, "", "", "fallback_response"},
		{"response without a rung", "", "sorry", "", "fallback_response"},
		{"response with fail", OnToolFailureFail, "sorry", "", "fallback_response"},
		{"response too long", OnToolFailureFallback, strings.Repeat("x", MaxFallbackResponseBytes+1), "", "fallback_response"},
		{"response not UTF-8", OnToolFailureFallback, "\xff", "", "fallback_response"},
		{"unknown rung", "degrade", "", "", "on_tool_failure"},
		{"context id", OnToolFailureFail, "", "pool_1.a-b", ""},
		{"bad context id", OnToolFailureFail, "", "pool 1", "tools[0].context_id"},
		{"long context id", OnToolFailureFail, "", strings.Repeat("a", MaxContextIDLen+1), "tools[0].context_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &JobRequest{Model: "m", Messages: []Message{{Role: RoleUser, Content: "hi"}}, OnToolFailure: tt.policy, FallbackResponse: tt.fallback,
				Tools: []Tool{{Name: tools[0].Name, Params: tools[0].Params, ContextID: tt.contextID}}}
			err := r.Validate(Limits{})
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Field != tt.wantField || !errors.Is(err, CodeInvalidRequest) {
				t.Fatalf("want one invalid_request at %s, got %v", tt.wantField, err)
			}
		})
	}
}

// TestLowLatencyModeDirective: the system prompt's low_latency_mode block
// sets memory.low_latency (ApplyDefaults, so DecodeJobRequest and the
// producer both do), and contradicts an explicit preemptible: true.
func TestLowLatencyModeDirective(t *testing.T) {
	t.Parallel()
	req, err := DecodeJobRequest([]byte(`{"model":"m","system":"<tool name=\"low_latency_mode\"/>Be quick.","messages":[{"role":"user","content":"hi"}]}`), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if req.Memory == nil || !req.Memory.LowLatency || req.Preemptible() {
		t.Fatalf("memory = %+v, want low_latency and not preemptible", req.Memory)
	}
	if req.System != "<tool name=\"low_latency_mode\"/>Be quick." {
		t.Errorf("the system prompt is kept as sent (the worker strips the block): %q", req.System)
	}
	_, err = DecodeJobRequest([]byte(`{"model":"m","system":"<tool name=\"low_latency_mode\"/>","messages":[{"role":"user","content":"hi"}],"memory":{"preemptible":true}}`), Limits{})
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Problems[0].Field != "memory.preemptible" {
		t.Fatalf("preemptible with low_latency_mode: %v", err)
	}
	// A prompt that only mentions the name is text.
	req, err = DecodeJobRequest([]byte(`{"model":"m","system":"no low_latency_mode here","messages":[{"role":"user","content":"hi"}]}`), Limits{})
	if err != nil || req.Memory != nil {
		t.Fatalf("mention: %+v, %v", req, err)
	}
}

// TestValidateSystemPromptTools: a tool declared in the system prompt is
// checked like one in tools[], at system.tools[k]: a bad mode or pattern
// is refused at submit, not by the worker (an unknown parameter is refused
// by ParseSystem already).
func TestValidateSystemPromptTools(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		system, field string
	}{
		{`Be nice. <tool name="toxicity_filter"><param name="words">["x"]</param><param name="mode">bogus</param></tool>`, "system.tools[0].params.mode"},
		{`<tool name="suffix"><param name="text">ok</param></tool><tool name="regex_matcher"><param name="pattern">(</param></tool>`, "system.tools[1].params.pattern"},
	} {
		r := validRequest()
		r.System = tc.system
		var e *Error
		if err := r.Validate(Limits{}); !errors.As(err, &e) || e.Field != tc.field {
			t.Errorf("%s: Validate = %v, want an error at %s", tc.system, err, tc.field)
		}
	}
	r := validRequest()
	r.System = `<tool name="toxicity_filter"><param name="words">["x"]</param><param name="mode">redact</param></tool>`
	if err := r.Validate(Limits{}); err != nil {
		t.Errorf("a good system-prompt tool: %v", err)
	}
}
