package contracts

import (
	"fmt"
	"strings"
)

// Subject prefixes. Every subject is "zl.<kind>." followed by tokens that
// are each a priority, a bucket, a tenant or a job id.
const (
	// SubjectJobsPrefix starts zl.jobs.<priority>.<bucket>.<tenant>.
	SubjectJobsPrefix = "zl.jobs."
	// SubjectEventsPrefix starts zl.events.<job_id>.
	SubjectEventsPrefix = "zl.events."
	// SubjectResultsPrefix starts zl.results.<job_id>.
	SubjectResultsPrefix = "zl.results."
	// SubjectUsagePrefix starts zl.usage.<tenant>.
	SubjectUsagePrefix = "zl.usage."
	// SubjectDLQPrefix starts zl.dlq.<priority>.<bucket>.<tenant>.
	SubjectDLQPrefix = "zl.dlq."
	// SubjectCancelPrefix starts zl.cancel.<job_id> (core NATS, not a
	// stream).
	SubjectCancelPrefix = "zl.cancel."
)

// Wildcard subjects, as bound to the streams and used by subscribers.
const (
	// SubjectJobsAll matches every subject of the zl.jobs.<priority>.
	// <bucket>.<tenant> shape, known priority and bucket or not. ZL_JOBS
	// binds the narrower JobsSubjects, so that a job no consumer serves is
	// refused at publish instead of expiring unseen.
	SubjectJobsAll = "zl.jobs.*.*.*"
	// SubjectStoredJobsAll matches every stored-job notice,
	// zl.stored.jobs.<priority>.<bucket>.<tenant>: the headers of each job,
	// republished by JetStream once ZL_JOBS has stored it (core NATS, no
	// payload). Workers wake on it.
	SubjectStoredJobsAll = "zl.stored.jobs.>"
	// SubjectEventsAll matches every event subject (the ZL_EVENTS stream).
	SubjectEventsAll = "zl.events.*"
	// SubjectResultsAll matches every result subject (the ZL_RESULTS
	// stream).
	SubjectResultsAll = "zl.results.*"
	// SubjectUsageAll matches every usage subject (the ZL_USAGE stream).
	SubjectUsageAll = "zl.usage.*"
	// SubjectDLQAll matches every DLQ subject (the ZL_DLQ stream).
	SubjectDLQAll = "zl.dlq.*.*.*"
	// SubjectCancelAll matches every cancel subject; workers subscribe to
	// it.
	SubjectCancelAll = "zl.cancel.*"
)

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

// JobSubject returns zl.jobs.<priority>.<bucket>.<tenant>.
func JobSubject(p Priority, b Bucket, tenant string) string {
	return SubjectJobsPrefix + string(p) + "." + string(b) + "." + tenant
}

// JobsFilter returns zl.jobs.<priority>.<bucket>.*, the filter subject of
// the durable consumer for that priority and bucket.
func JobsFilter(p Priority, b Bucket) string {
	return SubjectJobsPrefix + string(p) + "." + string(b) + ".*"
}

// JobsSubjects returns the subjects ZL_JOBS binds: JobsFilter of every
// priority and bucket, highest priority and shortest bucket first. A
// publish on zl.jobs with any other priority or bucket reaches no stream
// and so gets no JetStream acknowledgement.
func JobsSubjects() []string {
	var out []string
	for _, p := range Priorities() {
		for _, b := range AllBuckets() {
			out = append(out, JobsFilter(p, b))
		}
	}
	return out
}

// EventsSubject returns zl.events.<job_id>.
func EventsSubject(jobID string) string { return SubjectEventsPrefix + jobID }

// ResultsSubject returns zl.results.<job_id>.
func ResultsSubject(jobID string) string { return SubjectResultsPrefix + jobID }

// UsageSubject returns zl.usage.<tenant>.
func UsageSubject(tenant string) string { return SubjectUsagePrefix + tenant }

// DLQSubject returns zl.dlq.<priority>.<bucket>.<tenant>.
func DLQSubject(p Priority, b Bucket, tenant string) string {
	return SubjectDLQPrefix + string(p) + "." + string(b) + "." + tenant
}

// CancelSubject returns zl.cancel.<job_id>.
func CancelSubject(jobID string) string { return SubjectCancelPrefix + jobID }

// JobRoute is what a job subject (or a DLQ subject) encodes.
type JobRoute struct {
	// Priority is the job's class.
	Priority Priority
	// Bucket is the job's prompt-length class.
	Bucket Bucket
	// Tenant is the submitting tenant.
	Tenant string
}

// ParseJobSubject splits zl.jobs.<priority>.<bucket>.<tenant>, checking
// every token. Errors are *Error values with CodeInvalidRequest.
func ParseJobSubject(subject string) (JobRoute, error) {
	return parseRoute(subject, SubjectJobsPrefix)
}

// ParseDLQSubject splits zl.dlq.<priority>.<bucket>.<tenant>, checking every
// token.
func ParseDLQSubject(subject string) (JobRoute, error) {
	return parseRoute(subject, SubjectDLQPrefix)
}

func parseRoute(subject, prefix string) (JobRoute, error) {
	rest, ok := strings.CutPrefix(subject, prefix)
	if !ok {
		return JobRoute{}, NewError(CodeInvalidRequest, "subject %q does not start with %q", subject, prefix)
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return JobRoute{}, NewError(CodeInvalidRequest, "subject %q is not %s<priority>.<bucket>.<tenant>", subject, prefix)
	}
	p, err := ParsePriority(parts[0])
	if err != nil {
		return JobRoute{}, err
	}
	b, err := ParseBucket(parts[1])
	if err != nil {
		return JobRoute{}, err
	}
	if err := ValidateTenant(parts[2]); err != nil {
		return JobRoute{}, err
	}
	return JobRoute{Priority: p, Bucket: b, Tenant: parts[2]}, nil
}

// JobIDFromSubject returns the job id of zl.events.<job_id>,
// zl.results.<job_id> or zl.cancel.<job_id>, checking it.
func JobIDFromSubject(subject string) (string, error) {
	for _, prefix := range []string{SubjectEventsPrefix, SubjectResultsPrefix, SubjectCancelPrefix} {
		if id, ok := strings.CutPrefix(subject, prefix); ok {
			if err := ValidateJobID(id); err != nil {
				return "", err
			}
			return id, nil
		}
	}
	return "", NewError(CodeInvalidRequest, "subject %q carries no job id", subject)
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
