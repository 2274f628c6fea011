package contracts

import "fmt"

// Priority is a job's class. Workers pull high before normal before low,
// with aging so that low never starves. It is a subject token of
// zl.jobs.<priority>.<bucket>.<tenant>.<model>.<job_id>.
type Priority string

// The priorities, highest first.
const (
	PriorityHigh   Priority = "high"
	PriorityNormal Priority = "normal"
	PriorityLow    Priority = "low"
)

// DefaultPriority is the priority of a request that names none.
const DefaultPriority = PriorityNormal

// Priorities returns every priority, highest first.
func Priorities() []Priority { return []Priority{PriorityHigh, PriorityNormal, PriorityLow} }

// ParsePriority returns the priority named s, or an *Error with
// CodeInvalidRequest. The empty string is not accepted: use
// [DefaultPriority] for a request that names none.
func ParsePriority(s string) (Priority, error) {
	switch p := Priority(s); p {
	case PriorityHigh, PriorityNormal, PriorityLow:
		return p, nil
	}
	return "", fieldError(CodeInvalidRequest, "priority", "priority %q is not one of high, normal, low", s)
}

// Valid reports whether p is one of the three priorities.
func (p Priority) Valid() bool {
	_, err := ParsePriority(string(p))
	return err == nil
}

// Rank orders priorities: 0 for high, 1 for normal, 2 for low, and 3 for
// anything else.
func (p Priority) Rank() int {
	switch p {
	case PriorityHigh:
		return 0
	case PriorityNormal:
		return 1
	case PriorityLow:
		return 2
	}
	return 3
}

// Bucket is a prompt-length class. It is a subject token of
// zl.jobs.<priority>.<bucket>.<tenant>.<model>.<job_id>, so that a worker can pull the jobs
// its free KV memory can admit.
type Bucket string

// The buckets, shortest first.
const (
	BucketShort  Bucket = "short"
	BucketMedium Bucket = "medium"
	BucketLong   Bucket = "long"
)

// AllBuckets returns every bucket, shortest first.
func AllBuckets() []Bucket { return []Bucket{BucketShort, BucketMedium, BucketLong} }

// ParseBucket returns the bucket named s, or an *Error with
// CodeInvalidRequest.
func ParseBucket(s string) (Bucket, error) {
	switch b := Bucket(s); b {
	case BucketShort, BucketMedium, BucketLong:
		return b, nil
	}
	return "", fieldError(CodeInvalidRequest, "bucket", "bucket %q is not one of short, medium, long", s)
}

// Valid reports whether b is one of the three buckets.
func (b Bucket) Valid() bool {
	_, err := ParseBucket(string(b))
	return err == nil
}

// Buckets holds the prompt-length thresholds, in prompt tokens as counted
// by the model's tokenizer (system prompt, messages and chat template).
// A prompt of n tokens is short when n < ShortMax, medium when
// ShortMax <= n <= MediumMax, and long when n > MediumMax. With the
// defaults: short < 64, medium 64–512, long > 512.
type Buckets struct {
	// ShortMax is the first prompt length that is not short. Defaults to 64.
	ShortMax int
	// MediumMax is the last prompt length that is medium. Defaults to 512.
	MediumMax int
}

// DefaultBuckets returns the documented thresholds.
func DefaultBuckets() Buckets { return Buckets{ShortMax: 64, MediumMax: 512} }

// WithDefaults returns b with zero fields set to their defaults.
func (b Buckets) WithDefaults() Buckets {
	d := DefaultBuckets()
	if b.ShortMax == 0 {
		b.ShortMax = d.ShortMax
	}
	if b.MediumMax == 0 {
		b.MediumMax = d.MediumMax
	}
	return b
}

// Validate reports thresholds that cannot order the buckets.
func (b Buckets) Validate() error {
	if b.ShortMax < 1 || b.MediumMax < b.ShortMax {
		return fmt.Errorf("contracts: buckets need 1 <= ShortMax <= MediumMax, got ShortMax %d, MediumMax %d", b.ShortMax, b.MediumMax)
	}
	return nil
}

// Bucket returns the bucket of a prompt of promptTokens tokens. Zero fields
// of b take their defaults.
func (b Buckets) Bucket(promptTokens int) Bucket {
	b = b.WithDefaults()
	switch {
	case promptTokens < b.ShortMax:
		return BucketShort
	case promptTokens <= b.MediumMax:
		return BucketMedium
	}
	return BucketLong
}
