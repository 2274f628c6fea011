package contracts

import (
	"errors"
	"strings"
	"testing"
)

func TestSubjectBuilders(t *testing.T) {
	t.Parallel()
	tests := []struct{ got, want string }{
		{JobSubject(PriorityLow, BucketLong, "acme", "stories260k", "j1"), "zl.jobs.low.long.acme.stories260k.j1"},
		{JobSubject(PriorityLow, BucketLong, "acme", "qwen3-0.6b", "j1"), "zl.jobs.low.long.acme.qwen3-0_2E6b.j1"},
		{ModellessJobSubject(PriorityLow, BucketLong, "acme", "j1"), "zl.jobs.low.long.acme.j1"},
		{ModelJobsFilter(PriorityNormal, BucketShort, "acme", "m_1"), "zl.jobs.normal.short.acme.m_5F1.*"},
		{ModelConsumerName(PriorityNormal, BucketShort, "acme", "m.1"), "jobs-normal-short-acme~m_2E1"},
		{JobsFilter(PriorityNormal, BucketShort), "zl.jobs.normal.short.*"},
		{TenantJobsFilter(PriorityNormal, BucketShort, "acme"), "zl.jobs.normal.short.acme.*"},
		{TenantConsumerName(PriorityNormal, BucketShort, "acme"), "jobs-normal-short-acme"},
		{EventsSubject("acme", "j1"), "zl.events.acme.j1"},
		{EventsFilter("acme"), "zl.events.acme.*"},
		{ResultsSubject("acme", "j1"), "zl.results.acme.j1"},
		{ResultsFilter("acme"), "zl.results.acme.*"},
		{LegacyResultsSubject("j1"), "zl.results.j1"},
		{UsageSubject("acme"), "zl.usage.acme"},
		{DLQSubject(PriorityHigh, BucketMedium, "acme"), "zl.dlq.high.medium.acme"},
		{CancelSubject("acme", "j1"), "zl.cancel.acme.j1"},
		{JobRef{Tenant: "acme", JobID: "j1"}.String(), "acme/j1"},
		{ConsumerName(PriorityLow, BucketShort), "jobs-low-short"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestParseSubjects(t *testing.T) {
	t.Parallel()
	r, err := ParseJobSubject("zl.jobs.high.short.acme-1.qwen3-0_2E6b.job_9")
	if err != nil || r != (JobRoute{PriorityHigh, BucketShort, "acme-1", "qwen3-0_2E6b", "job_9", ""}) {
		t.Errorf("ParseJobSubject = %+v, %v", r, err)
	}
	// A job queued by the previous release: no model in the subject.
	r, err = ParseJobSubject("zl.jobs.high.short.acme-1.job_9")
	if err != nil || r != (JobRoute{PriorityHigh, BucketShort, "acme-1", "", "job_9", ""}) {
		t.Errorf("ParseJobSubject(model-less form) = %+v, %v", r, err)
	}
	// A job queued by an older release: no id in the subject.
	r, err = ParseJobSubject("zl.jobs.high.short.acme-1")
	if err != nil || r != (JobRoute{PriorityHigh, BucketShort, "acme-1", "", "", ""}) {
		t.Errorf("ParseJobSubject(old form) = %+v, %v", r, err)
	}
	// A job passed on to the worker holding its prefix.
	r, err = ParseJobSubject(DirectJobSubject(ModelToken("w.1"), PriorityHigh, BucketShort, "acme-1", "qwen3-0.6b", "job_9"))
	if err != nil || r != (JobRoute{PriorityHigh, BucketShort, "acme-1", "qwen3-0_2E6b", "job_9", "w_2E1"}) {
		t.Errorf("ParseJobSubject(direct) = %+v, %v", r, err)
	}
	for _, bad := range []string{"zl.jobs.direct.w.high.short.acme-1.job_9", "zl.jobs.direct.w.x.short.acme-1.m.job_9", "zl.jobs.direct..high.short.acme-1.m.j"} {
		if _, err := ParseJobSubject(bad); !errors.Is(err, CodeInvalidRequest) {
			t.Errorf("ParseJobSubject(%q) = %v, want invalid_request", bad, err)
		}
	}
	r, err = ParseDLQSubject(DLQSubject(PriorityLow, BucketLong, "t"))
	if err != nil || r != (JobRoute{PriorityLow, BucketLong, "t", "", "", ""}) {
		t.Errorf("ParseDLQSubject = %+v, %v", r, err)
	}
	if _, err := ParseDLQSubject("zl.dlq.low.long.t.j"); !errors.Is(err, CodeInvalidRequest) {
		t.Errorf("ParseDLQSubject accepted a job id token: %v", err)
	}
	for _, bad := range []string{
		"zl.jobs.high.short", "zl.jobs.high.short.a.b.c.d", "zl.jobs.high.short.a.*.j", "zl.jobs.high.short.a.m~1.j", "zl.jobs.urgent.short.a.j", "zl.jobs.high.tiny.a.j",
		"zl.jobs.high.short.*", "zl.jobs.high.short.>", "zl.jobs.high.short.a.*", "zl.jobs.high.short.a.>",
		"zl.dlq.high.short.a", "jobs.high.short.a", "zl.jobs.high.short.a.",
	} {
		if _, err := ParseJobSubject(bad); !errors.Is(err, CodeInvalidRequest) {
			t.Errorf("ParseJobSubject(%q) = %v, want invalid_request", bad, err)
		}
	}
	for _, s := range []string{EventsSubject("acme", "j_1"), ResultsSubject("acme", "j_1"), CancelSubject("acme", "j_1")} {
		if ref, err := JobRefFromSubject(s); err != nil || ref != (JobRef{"acme", "j_1"}) {
			t.Errorf("JobRefFromSubject(%q) = %+v, %v", s, ref, err)
		}
	}
	for _, bad := range []string{"zl.events.a.b.c", "zl.events.j1", "zl.events.", "zl.events.a.", "zl.usage.a.j",
		"zl.results.*.j", "zl.results.a.*", "zl.cancel.a.>"} {
		if _, err := JobRefFromSubject(bad); err == nil {
			t.Errorf("JobRefFromSubject(%q) accepted", bad)
		}
	}
	if ten, err := TenantFromUsageSubject("zl.usage.acme"); err != nil || ten != "acme" {
		t.Errorf("TenantFromUsageSubject = %q, %v", ten, err)
	}
	if _, err := TenantFromUsageSubject("zl.usage.a.b"); err == nil {
		t.Error("TenantFromUsageSubject accepted a dotted tenant")
	}
}

// TestModelToken: names of letters, digits and '-' are their own tokens;
// other bytes are escaped, so distinct names never share a token; long
// names are cut to MaxModelTokenLen with a hash of the whole name.
func TestModelToken(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"stories260k": "stories260k", "qwen3-s-f32": "qwen3-s-f32", "Qwen3": "Qwen3", "a.b": "a_2Eb", "a_2Eb": "a_5F2Eb",
		"a b*>": "a_20b_2A_3E", "": "_", "é": "_C3_A9",
	} {
		if got := ModelToken(name); got != want {
			t.Errorf("ModelToken(%q) = %q, want %q", name, got, want)
		}
	}
	long1, long2 := strings.Repeat("m", 80)+"1", strings.Repeat("m", 80)+"2"
	t1, t2 := ModelToken(long1), ModelToken(long2)
	if len(t1) != MaxModelTokenLen || len(t2) != MaxModelTokenLen || t1 == t2 || !strings.Contains(t1, "__") {
		t.Errorf("long names: %q and %q", t1, t2)
	}
	seen := map[string]string{}
	for _, name := range []string{"a.b", "a_2Eb", "a-b", "a/b", "A.b", long1, long2, strings.Repeat("._", 40)} {
		tok := ModelToken(name)
		if other, dup := seen[tok]; dup {
			t.Errorf("%q and %q share the token %q", name, other, tok)
		}
		seen[tok] = name
		if p := modelTokenProblem(tok); p != "" || len(tok) > MaxModelTokenLen {
			t.Errorf("ModelToken(%q) = %q: %s", name, tok, p)
		}
		if _, err := ParseJobSubject(JobSubject(PriorityLow, BucketShort, "acme", name, "j")); err != nil {
			t.Errorf("the subject of model %q does not parse: %v", name, err)
		}
	}
}

func TestTokens(t *testing.T) {
	t.Parallel()
	good := []string{"a", "acme", "ACME_corp-2", "01J9Z8Q4W6K2M3N4P5R6S7T8V9", "123e4567-e89b-12d3-a456-426614174000"}
	bad := []string{"", "a.b", "a*", "a>", ">", "a b", "a\tb", "a\nb", "tenant/x", "é", "a\x00", strings.Repeat("x", MaxJobIDLen+1)}
	for _, s := range good {
		if err := ValidateTenant(s); err != nil {
			t.Errorf("ValidateTenant(%q) = %v", s, err)
		}
		if err := ValidateJobID(s); err != nil {
			t.Errorf("ValidateJobID(%q) = %v", s, err)
		}
	}
	for _, s := range bad {
		if err := ValidateTenant(s); !errors.Is(err, CodeInvalidRequest) {
			t.Errorf("ValidateTenant(%q) = %v", s, err)
		}
		if err := ValidateJobID(s); !errors.Is(err, CodeInvalidRequest) {
			t.Errorf("ValidateJobID(%q) = %v", s, err)
		}
	}
	if err := ValidateTenant(strings.Repeat("x", MaxTenantLen+1)); err == nil {
		t.Error("ValidateTenant accepted a tenant above MaxTenantLen")
	}
	if err := ValidateJobID(strings.Repeat("x", MaxJobIDLen)); err != nil {
		t.Errorf("ValidateJobID rejected MaxJobIDLen characters: %v", err)
	}
}

func TestPriorityAndBucket(t *testing.T) {
	t.Parallel()
	for i, p := range Priorities() {
		if got, err := ParsePriority(string(p)); err != nil || got != p || p.Rank() != i {
			t.Errorf("priority %q: parse %q, %v, rank %d", p, got, err, p.Rank())
		}
	}
	for _, s := range []string{"", "HIGH", "urgent"} {
		if _, err := ParsePriority(s); err == nil {
			t.Errorf("ParsePriority(%q) accepted", s)
		}
		if _, err := ParseBucket(s); err == nil {
			t.Errorf("ParseBucket(%q) accepted", s)
		}
	}
	if Priority("x").Rank() != 3 || !PriorityLow.Valid() || Priority("x").Valid() {
		t.Error("Rank/Valid wrong for unknown priority")
	}
	for _, b := range AllBuckets() {
		if got, err := ParseBucket(string(b)); err != nil || got != b {
			t.Errorf("ParseBucket(%q) = %q, %v", b, got, err)
		}
	}
	custom := Buckets{ShortMax: 10, MediumMax: 20}
	tests := []struct {
		b    Buckets
		n    int
		want Bucket
	}{
		{Buckets{}, 0, BucketShort}, {Buckets{}, 63, BucketShort}, {Buckets{}, 64, BucketMedium},
		{Buckets{}, 512, BucketMedium}, {Buckets{}, 513, BucketLong},
		{custom, 9, BucketShort}, {custom, 10, BucketMedium}, {custom, 20, BucketMedium}, {custom, 21, BucketLong},
	}
	for _, tt := range tests {
		if got := tt.b.Bucket(tt.n); got != tt.want {
			t.Errorf("%+v.Bucket(%d) = %s, want %s", tt.b, tt.n, got, tt.want)
		}
	}
	if err := (Buckets{ShortMax: 10, MediumMax: 5}).Validate(); err == nil {
		t.Error("Validate accepted MediumMax < ShortMax")
	}
	if err := DefaultBuckets().Validate(); err != nil {
		t.Error(err)
	}
}

func TestPrefixKeys(t *testing.T) {
	t.Parallel()
	turn1 := &JobRequest{Model: "m", System: "be brief", Messages: []Message{{Role: RoleUser, Content: "hi"}}}
	held := HeldConversationKey(turn1, "hello")
	turn2 := &JobRequest{Model: "m", System: "be brief", Messages: []Message{{Role: RoleUser, Content: "hi"}, {Role: RoleAssistant, Content: "hello"}, {Role: RoleUser, Content: "more"}}}
	want := ConversationKey(turn2)
	if held == "" || want == "" || held != want {
		t.Fatalf("turn 1 holds %q, turn 2 looks for %q: the next turn must find the conversation", held, want)
	}
	// A first turn (a batch's document behind its instruction) is not
	// routed.
	if k := ConversationKey(turn1); k != "" {
		t.Errorf("a first turn looks for %q", k)
	}
	// Another reply, model, system prompt, or role split gives another key.
	for _, k := range []string{HeldConversationKey(turn1, "hello!"), PrefixKey("m2", "be brief", turn2.Messages[:2]), PrefixKey("m", "be", turn2.Messages[:2]),
		PrefixKey("m", "be brief", []Message{{Role: RoleUser, Content: "hihello"}})} {
		if k == want {
			t.Errorf("key %s collides with the conversation's", k)
		}
	}
	if ConversationKey(&JobRequest{Model: "m", Embedding: &EmbeddingRequest{}, Messages: turn2.Messages}) != "" {
		t.Error("an embedding job looks for a prefix")
	}
}
