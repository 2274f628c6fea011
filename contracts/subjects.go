package contracts

import (
	"fmt"
	"strings"
)

// Subject prefixes. Every subject is "zl.<kind>." followed by tokens that
// are each a priority, a bucket, a tenant, a model token (ModelToken) or a
// job id. A job id is unique
// per tenant, not globally: every subject that names a job names its tenant
// too, so that tenants are isolated by subject (NATS accounts import only
// their own tenant's subjects, see ops/nats/nats.conf) and two tenants may
// use the same id.
const (
	// SubjectJobsPrefix starts
	// zl.jobs.<priority>.<bucket>.<tenant>.<model>.<job_id>.
	SubjectJobsPrefix = "zl.jobs."
	// SubjectEventsPrefix starts zl.events.<tenant>.<job_id>.
	SubjectEventsPrefix = "zl.events."
	// SubjectResultsPrefix starts zl.results.<tenant>.<job_id>.
	SubjectResultsPrefix = "zl.results."
	// SubjectUsagePrefix starts zl.usage.<tenant>.
	SubjectUsagePrefix = "zl.usage."
	// SubjectDLQPrefix starts zl.dlq.<priority>.<bucket>.<tenant>.
	SubjectDLQPrefix = "zl.dlq."
	// SubjectCancelPrefix starts zl.cancel.<tenant>.<job_id> (stream
	// ZL_CANCEL).
	SubjectCancelPrefix = "zl.cancel."
)

// Wildcard subjects, as bound to the streams and used by subscribers.
const (
	// SubjectJobsAll matches every job subject of the current form,
	// zl.jobs.<priority>.<bucket>.<tenant>.<model>.<job_id>, known
	// priority and bucket or not. ZL_JOBS binds the narrower JobsSubjects,
	// so that a job no consumer serves is refused at publish instead of
	// expiring unseen.
	SubjectJobsAll = "zl.jobs.*.*.*.*.*"
	// ModellessJobsAll matches every job subject of the previous form,
	// zl.jobs.<priority>.<bucket>.<tenant>.<job_id>, without the model:
	// such jobs are still stored and served (ModellessJobSubject).
	ModellessJobsAll = "zl.jobs.*.*.*.*"
	// SubjectStoredJobsAll matches every stored-job notice,
	// zl.stored.jobs.<priority>.<bucket>.<tenant>.<model>.<job_id> (or a
	// model-less job's subject after zl.stored.): the headers of each
	// job, republished by JetStream once ZL_JOBS has stored it (core
	// NATS, no payload). Workers wake on it.
	SubjectStoredJobsAll = "zl.stored.jobs.>"
	// SubjectEventsAll matches every event subject (the ZL_EVENTS stream).
	SubjectEventsAll = "zl.events.*.*"
	// SubjectResultsAll matches every result subject (the ZL_RESULTS
	// stream).
	SubjectResultsAll = "zl.results.*.*"
	// SubjectUsageAll matches every usage subject (the ZL_USAGE stream).
	SubjectUsageAll = "zl.usage.*"
	// SubjectDLQAll matches every DLQ subject (the ZL_DLQ stream).
	SubjectDLQAll = "zl.dlq.*.*.*"
	// SubjectCancelAll matches every cancel subject (the ZL_CANCEL
	// stream); workers also subscribe to it to stop running jobs.
	SubjectCancelAll = "zl.cancel.*.*"
)

// Subjects of contract releases before job ids were scoped by tenant. No
// component publishes on them any more; they are read where such messages
// may still be stored: jobs queued on zl.jobs.<priority>.<bucket>.<tenant>
// (the id in Nats-Msg-Id) are still served, and results stored on
// zl.results.<job_id> are still found by operators' tools (their Tenant
// field says whose they are).
const (
	// LegacyJobsAll matches the jobs of the old form.
	LegacyJobsAll = "zl.jobs.*.*.*"
)

// LegacyResultsSubject returns zl.results.<job_id>, where results were
// stored before ids were scoped by tenant.
func LegacyResultsSubject(jobID string) string { return SubjectResultsPrefix + jobID }

// Token length bounds.
const (
	// MaxTenantLen is the longest tenant id.
	MaxTenantLen = 64
	// MaxJobIDLen is the longest job id.
	MaxJobIDLen = 128
)

// The subject builders below do not validate their arguments: pass only
// priorities and buckets from this package and tenants and job ids that
// passed ValidateTenant and ValidateJobID (DecodeJobRequest checks the id).
// A token with a dot or a wildcard would address other subjects.

// JobSubject returns zl.jobs.<priority>.<bucket>.<tenant>.<model>.<job_id>,
// model being ModelToken(model): the job's model is in its subject so that
// a worker pulls only the jobs of the models it serves (a consumer per
// model, ModelConsumerConfig). The id in the subject is the idempotency
// key: ZL_JOBS keeps at most one message per subject, so a resubmission of
// a queued job is refused by the stream (IsDuplicateJob) and the job runs
// once; a worker that finds a stored result for the id does not run it
// again either. (A job id is unique per tenant, whatever the model: a
// resubmission naming another model is a new subject, and the worker that
// pulls it finds the first one's stored result.)
func JobSubject(p Priority, b Bucket, tenant, model, jobID string) string {
	return SubjectJobsPrefix + string(p) + "." + string(b) + "." + tenant + "." + ModelToken(model) + "." + jobID
}

// ModellessJobSubject returns zl.jobs.<priority>.<bucket>.<tenant>.<job_id>,
// the previous form of a job subject, without the model. ZL_JOBS still
// binds it and workers still serve it (through the class-and-tenant
// consumer, TenantConsumerConfig): a worker that pulls such a job for a
// model it does not serve republishes it on JobSubject, where a worker
// serving the model pulls it, instead of failing it. New publishers use
// JobSubject.
func ModellessJobSubject(p Priority, b Bucket, tenant, jobID string) string {
	return SubjectJobsPrefix + string(p) + "." + string(b) + "." + tenant + "." + jobID
}

// JobsFilter returns zl.jobs.<priority>.<bucket>.*, the filter subject of
// the class consumer for that priority and bucket: it matches only jobs
// queued in the old form (no job id token), which it still serves. Jobs of
// the current form are pulled through a consumer per class and tenant
// (TenantJobsFilter), so that workers choose whose job runs next.
func JobsFilter(p Priority, b Bucket) string {
	return SubjectJobsPrefix + string(p) + "." + string(b) + ".*"
}

// TenantJobsFilter returns zl.jobs.<priority>.<bucket>.<tenant>.*, the
// filter subject of the consumer of one class and tenant: it matches only
// jobs queued in the model-less form (ModellessJobSubject).
func TenantJobsFilter(p Priority, b Bucket, tenant string) string {
	return SubjectJobsPrefix + string(p) + "." + string(b) + "." + tenant + ".*"
}

// ModelJobsFilter returns zl.jobs.<priority>.<bucket>.<tenant>.<model>.*
// (model being ModelToken(model)), the filter subject of the consumer of
// one class, tenant and model. Filters of different models, tenants or
// forms never overlap, as a work-queue stream requires.
func ModelJobsFilter(p Priority, b Bucket, tenant, model string) string {
	return SubjectJobsPrefix + string(p) + "." + string(b) + "." + tenant + "." + ModelToken(model) + ".*"
}

// JobsSubjects returns the subjects ZL_JOBS binds: for every priority and
// bucket (highest priority and shortest bucket first) the current form
// zl.jobs.<priority>.<bucket>.*.*.* and the previous, model-less one
// zl.jobs.<priority>.<bucket>.*.*, whose jobs stay readable and are still
// served; and last the jobs passed on to a worker (DirectJobsSubjects). A
// publish on zl.jobs with any other priority, bucket or number of tokens
// reaches no stream and so gets no JetStream acknowledgement.
func JobsSubjects() []string {
	var out []string
	for _, p := range Priorities() {
		for _, b := range AllBuckets() {
			out = append(out, SubjectJobsPrefix+string(p)+"."+string(b)+".*.*.*", SubjectJobsPrefix+string(p)+"."+string(b)+".*.*")
		}
	}
	return append(out, DirectJobsSubjects)
}

// EventsSubject returns zl.events.<tenant>.<job_id>.
func EventsSubject(tenant, jobID string) string { return SubjectEventsPrefix + tenant + "." + jobID }

// ResultsSubject returns zl.results.<tenant>.<job_id>.
func ResultsSubject(tenant, jobID string) string { return SubjectResultsPrefix + tenant + "." + jobID }

// ResultsFilter returns zl.results.<tenant>.*: every result of one tenant.
func ResultsFilter(tenant string) string { return SubjectResultsPrefix + tenant + ".*" }

// EventsFilter returns zl.events.<tenant>.*: every event of one tenant.
func EventsFilter(tenant string) string { return SubjectEventsPrefix + tenant + ".*" }

// CancelSubject returns zl.cancel.<tenant>.<job_id>.
func CancelSubject(tenant, jobID string) string { return SubjectCancelPrefix + tenant + "." + jobID }

// UsageSubject returns zl.usage.<tenant>.
func UsageSubject(tenant string) string { return SubjectUsagePrefix + tenant }

// DLQSubject returns zl.dlq.<priority>.<bucket>.<tenant>.
func DLQSubject(p Priority, b Bucket, tenant string) string {
	return SubjectDLQPrefix + string(p) + "." + string(b) + "." + tenant
}

// JobRoute is what a job subject (or a DLQ subject) encodes.
type JobRoute struct {
	// Priority is the job's class.
	Priority Priority
	// Bucket is the job's prompt-length class.
	Bucket Bucket
	// Tenant is the submitting tenant.
	Tenant string
	// Model is the model token (ModelToken) of a job subject of the
	// current form; empty for a DLQ subject and for a job queued in a
	// model-less form.
	Model string
	// JobID is the job id of a job subject of the current or the
	// model-less form; empty for a DLQ subject and for a job queued in the
	// oldest form (its id is in Nats-Msg-Id).
	JobID string
	// Direct is the worker token (ModelToken of its id) of a job passed on
	// to that worker's queue (DirectJobSubject); empty otherwise.
	Direct string
}

// ParseJobSubject splits zl.jobs.<priority>.<bucket>.<tenant>.<model>.<job_id>
// (or the model-less zl.jobs.<priority>.<bucket>.<tenant>.<job_id>, or the
// oldest zl.jobs.<priority>.<bucket>.<tenant>), checking every token.
// Errors are *Error values with CodeInvalidRequest.
//
// A job passed on to a worker, zl.jobs.direct.<worker>.<priority>.<bucket>.
// <tenant>.<model>.<job_id>, parses as its own subject with Direct set.
func ParseJobSubject(subject string) (JobRoute, error) {
	if rest, ok := strings.CutPrefix(subject, SubjectDirectJobsPrefix); ok {
		worker, rest, _ := strings.Cut(rest, ".")
		if msg := modelTokenProblem(worker); msg != "" {
			return JobRoute{}, NewError(CodeInvalidRequest, "subject %q: worker token %q %s", subject, worker, msg)
		}
		r, err := ParseJobSubject(SubjectJobsPrefix + rest)
		if err == nil && r.Model == "" {
			err = NewError(CodeInvalidRequest, "subject %q is not %s<worker>.<priority>.<bucket>.<tenant>.<model>.<job_id>", subject, SubjectDirectJobsPrefix)
		}
		if err != nil {
			return JobRoute{}, err
		}
		r.Direct = worker
		return r, nil
	}
	r, id, err := parseRoute(subject, SubjectJobsPrefix, true)
	r.JobID = id
	return r, err
}

// ParseDLQSubject splits zl.dlq.<priority>.<bucket>.<tenant>, checking every
// token.
func ParseDLQSubject(subject string) (JobRoute, error) {
	r, _, err := parseRoute(subject, SubjectDLQPrefix, false)
	return r, err
}

func parseRoute(subject, prefix string, withID bool) (JobRoute, string, error) {
	rest, ok := strings.CutPrefix(subject, prefix)
	if !ok {
		return JobRoute{}, "", NewError(CodeInvalidRequest, "subject %q does not start with %q", subject, prefix)
	}
	parts := strings.Split(rest, ".")
	want := prefix + "<priority>.<bucket>.<tenant>"
	if withID {
		want += ".<model>.<job_id>"
	}
	if len(parts) != 3 && !(withID && (len(parts) == 4 || len(parts) == 5)) {
		return JobRoute{}, "", NewError(CodeInvalidRequest, "subject %q is not %s", subject, want)
	}
	p, err := ParsePriority(parts[0])
	if err != nil {
		return JobRoute{}, "", err
	}
	b, err := ParseBucket(parts[1])
	if err != nil {
		return JobRoute{}, "", err
	}
	if err := ValidateTenant(parts[2]); err != nil {
		return JobRoute{}, "", err
	}
	r := JobRoute{Priority: p, Bucket: b, Tenant: parts[2]}
	if len(parts) == 5 {
		if msg := modelTokenProblem(parts[3]); msg != "" {
			return JobRoute{}, "", fieldError(CodeInvalidRequest, "model", "model token %q %s", parts[3], msg)
		}
		r.Model = parts[3]
		parts = append(parts[:3], parts[4])
	}
	if len(parts) == 4 {
		if err := ValidateJobID(parts[3]); err != nil {
			return JobRoute{}, "", err
		}
		return r, parts[3], nil
	}
	return r, "", nil
}

// JobRef names a job: ids are unique per tenant.
type JobRef struct {
	Tenant string
	JobID  string
}

// String returns "<tenant>/<job_id>", the form logs and Nats-Msg-Ids use.
func (r JobRef) String() string { return r.Tenant + "/" + r.JobID }

// JobRefFromSubject returns the tenant and job id of
// zl.events.<tenant>.<job_id>, zl.results.<tenant>.<job_id> or
// zl.cancel.<tenant>.<job_id>, checking both.
func JobRefFromSubject(subject string) (JobRef, error) {
	for _, prefix := range []string{SubjectEventsPrefix, SubjectResultsPrefix, SubjectCancelPrefix} {
		rest, ok := strings.CutPrefix(subject, prefix)
		if !ok {
			continue
		}
		tenant, id, ok := strings.Cut(rest, ".")
		if !ok {
			break
		}
		if err := ValidateTenant(tenant); err != nil {
			return JobRef{}, err
		}
		if err := ValidateJobID(id); err != nil {
			return JobRef{}, err
		}
		return JobRef{Tenant: tenant, JobID: id}, nil
	}
	return JobRef{}, NewError(CodeInvalidRequest, "subject %q carries no tenant and job id", subject)
}

// TenantFromUsageSubject returns the tenant of zl.usage.<tenant>, checking
// it.
func TenantFromUsageSubject(subject string) (string, error) {
	t, ok := strings.CutPrefix(subject, SubjectUsagePrefix)
	if !ok {
		return "", NewError(CodeInvalidRequest, "subject %q is not %s<tenant>", subject, SubjectUsagePrefix)
	}
	if err := ValidateTenant(t); err != nil {
		return "", err
	}
	return t, nil
}

// ValidateTenant checks that tenant can be a subject token: 1–64
// characters, each an ASCII letter, digit, '-' or '_'. That rules out dots,
// the wildcards '*' and '>', whitespace and control characters, and keeps
// the tenant safe as a KV key, a consumer name part and a file name. It
// returns an *Error with CodeInvalidRequest and field "tenant".
func ValidateTenant(tenant string) error {
	if msg := tokenProblem(tenant, MaxTenantLen); msg != "" {
		return fieldError(CodeInvalidRequest, "tenant", "tenant %s", msg)
	}
	return nil
}

// ValidateJobID checks that id can be a subject token and a Nats-Msg-Id:
// 1–128 characters, each an ASCII letter, digit, '-' or '_' (UUIDs, ULIDs
// and most client keys qualify). It returns an *Error with
// CodeInvalidRequest and field "id".
func ValidateJobID(id string) error {
	if msg := tokenProblem(id, MaxJobIDLen); msg != "" {
		return fieldError(CodeInvalidRequest, "id", "job id %s", msg)
	}
	return nil
}

// tokenProblem says what is wrong with s as a token of at most maxLen
// bytes, or returns "".
func tokenProblem(s string, maxLen int) string {
	switch {
	case s == "":
		return "is empty"
	case len(s) > maxLen:
		return fmt.Sprintf("is %d characters long, above the limit of %d", len(s), maxLen)
	}
	for i := 0; i < len(s); i++ {
		if !isTokenByte(s[i]) {
			return fmt.Sprintf("has %q at offset %d; use only A-Z, a-z, 0-9, '-' and '_'", s[i:i+1], i)
		}
	}
	return ""
}

func isTokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}
