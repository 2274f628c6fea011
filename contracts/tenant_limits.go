package contracts

import (
	"regexp"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TenantLimitsBucket is the JetStream key-value bucket of per-tenant
// limits: the key is the tenant, the value a [TenantLimits] as JSON.
// Billing, which owns the limits (Postgres) and the charges, writes it
// every few seconds and right after the limits change; whoever admits jobs
// (the HTTP gateway, the workers) watches it. A tenant without a key has no
// limits. Only billing may write it (ops/nats/nats.conf): a tenant cannot
// raise its own limits.
const TenantLimitsBucket = "ZL_LIMITS"

// MaxTenantLimitsBytes is the largest TenantLimits DecodeTenantLimits
// accepts; a real one is under 1 KiB.
const MaxTenantLimitsBytes = 16 << 10

// TenantLimits is one tenant's admission limits and spend so far, as
// billing publishes them in [TenantLimitsBucket]. A nil limit is no limit;
// a zero limit admits nothing (a suspended tenant). Money is decimal text
// ("100.00", never a JSON number), in Currency.
type TenantLimits struct {
	// Tenant is the tenant, the bucket key.
	Tenant string `json:"tenant"`
	// RequestsPerMinute caps the jobs admitted in any 60 seconds.
	RequestsPerMinute *int64 `json:"requests_per_minute,omitempty"`
	// TokensPerMinute caps the tokens admitted in any 60 seconds, a job
	// counting its prompt tokens plus its max_tokens.
	TokensPerMinute *int64 `json:"tokens_per_minute,omitempty"`
	// MaxConcurrent caps the tenant's jobs in flight (admitted and not yet
	// finished) at one admitter.
	MaxConcurrent *int64 `json:"max_concurrent,omitempty"`
	// MonthlySpend caps MonthToDate plus the estimated cost of the jobs in
	// flight, in Currency, over a UTC calendar month.
	MonthlySpend *string `json:"monthly_spend,omitempty"`
	// Currency is the ISO 4217 code of MonthlySpend, MonthToDate and the
	// prices.
	Currency string `json:"currency"`
	// Month is the UTC month MonthToDate covers, as YYYY-MM.
	Month string `json:"month"`
	// MonthToDate is the tenant's rated charges in Currency for usage
	// created in Month, plus an estimate (at PriceIn and PriceOut) of its
	// usage stored but not rated yet.
	MonthToDate string `json:"month_to_date"`
	// PriceIn and PriceOut are per-token prices to estimate a job's cost
	// before it runs (prompt tokens × PriceIn + max_tokens × PriceOut):
	// those of the tenant's price book for any model in force at
	// UpdatedAt. Empty when that book is in another currency.
	PriceIn  string `json:"price_in,omitempty"`
	PriceOut string `json:"price_out,omitempty"`
	// PriceEmbedIn is the per-token price of an embedding job's input
	// (the book's p_embed_in), to estimate such a job (no output tokens)
	// before it runs; empty: PriceIn.
	PriceEmbedIn string `json:"price_embed_in,omitempty"`
	// UpdatedAt is when billing computed this value (RFC 3339, UTC).
	UpdatedAt time.Time `json:"updated_at"`
}

var (
	decimalRE = regexp.MustCompile(`^[0-9]{1,30}(\.[0-9]{1,30})?$`)
	currRE    = regexp.MustCompile(`^[A-Z]{3}$`)
	monthRE   = regexp.MustCompile(`^[0-9]{4}-(0[1-9]|1[0-2])$`)
)

// DecodeTenantLimits decodes and validates an untrusted TenantLimits (a
// ZL_LIMITS value) with the decoder of every wire message: size, one UTF-8
// JSON object, each field's type, every field without omitempty present.
// Fields it does not know are ignored (a newer billing may add some).
// Every failure is a *ValidationError.
func DecodeTenantLimits(b []byte) (TenantLimits, error) {
	var l TenantLimits
	if err := decodeMessage(b, &l, "tenant limits", MaxTenantLimitsBytes, shapeRules{required: true}); err != nil {
		return TenantLimits{}, err
	}
	if err := l.Validate(); err != nil {
		return TenantLimits{}, err
	}
	return l, nil
}

// Validate checks the values: the tenant is a valid subject token, limits
// are not negative, money is non-negative decimal text, the currency is
// three capital letters, the month is YYYY-MM, and UpdatedAt is set.
func (l *TenantLimits) Validate() error {
	var ps problems
	add := func(field, format string, a ...any) { ps.add(CodeInvalidRequest, field, format, a...) }
	if err := ValidateTenant(l.Tenant); err != nil {
		add("tenant", "%v", err)
	}
	for _, c := range []struct {
		name string
		v    *int64
	}{{"requests_per_minute", l.RequestsPerMinute}, {"tokens_per_minute", l.TokensPerMinute}, {"max_concurrent", l.MaxConcurrent}} {
		if c.v != nil && *c.v < 0 {
			add(c.name, "%s is negative (%d)", c.name, *c.v)
		}
	}
	money := func(name, v string, optional bool) {
		if v == "" && optional {
			return
		}
		if !decimalRE.MatchString(v) {
			add(name, "%s %q is not non-negative decimal text such as \"100.00\"", name, v)
		}
	}
	if l.MonthlySpend != nil {
		money("monthly_spend", *l.MonthlySpend, false)
	}
	money("month_to_date", l.MonthToDate, false)
	money("price_in", l.PriceIn, true)
	money("price_out", l.PriceOut, true)
	money("price_embed_in", l.PriceEmbedIn, true)
	if !currRE.MatchString(l.Currency) {
		add("currency", "currency %q is not an ISO 4217 code such as USD", l.Currency)
	}
	if !monthRE.MatchString(l.Month) {
		add("month", "month %q is not YYYY-MM", l.Month)
	}
	if l.UpdatedAt.IsZero() {
		add("updated_at", "updated_at is not set")
	}
	return ps.err()
}

// TenantLimitsBucketConfig returns the configuration of the tenant-limits
// bucket: one value per tenant, no history. c must already have its
// defaults.
func (c StreamsConfig) TenantLimitsBucketConfig() jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      TenantLimitsBucket,
		Description: "zerolayer per-tenant limits and month-to-date spend, keyed by tenant; written by billing",
		Storage:     c.Storage,
		Replicas:    c.Replicas,
		History:     1,
	}
}

// EstimatedPromptTokens estimates the prompt tokens of r from its bytes
// (system prompt and message contents, 4 bytes a token; an embedding
// job's inputs, see EmbeddingRequest.EstimatedInputTokens), for a component
// without the model's tokenizer: a worker's admission check, or a client
// bucketing a model it has no tokenizer for.
func (r *JobRequest) EstimatedPromptTokens() int {
	if r.IsEmbedding() {
		return r.Embedding.EstimatedInputTokens()
	}
	n := len(r.System)
	for _, m := range r.Messages {
		n += len(m.Content)
	}
	return n/4 + 1
}
