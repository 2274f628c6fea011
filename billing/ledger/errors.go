package ledger

import "errors"

var (
	// ErrInvalidUsage reports a usage record that cannot be billed: not
	// JSON, a field missing or of the wrong type, or a value out of range.
	ErrInvalidUsage = errors.New("billing: invalid usage record")
	// ErrNoPriceBook reports that no price book applies to a usage record.
	ErrNoPriceBook = errors.New("billing: no price book applies")
	// ErrPriceBookMismatch reports a re-rating asked to use a price book
	// of another tenant or model than the job's.
	ErrPriceBookMismatch = errors.New("billing: price book does not apply to the job")
	// ErrInvalidTagRule reports a value-tag rule that cannot be used.
	ErrInvalidTagRule = errors.New("billing: invalid value-tag rule")
	// ErrNotFound reports a usage record or charge that is not stored.
	ErrNotFound = errors.New("billing: not found")
	// ErrInvalidConfig reports a configuration that cannot work; the
	// message says how to fix it.
	ErrInvalidConfig = errors.New("billing: invalid configuration")
	// ErrUnknownTenant reports a report asked for a tenant billing has
	// never heard of: no usage of it ingested, no price book or value-tag
	// rule of its own (a misspelt tenant, usually).
	ErrUnknownTenant = errors.New("billing: unknown tenant")
	// ErrInvalidLimits reports tenant limits that cannot be stored.
	ErrInvalidLimits = errors.New("billing: invalid tenant limits")
	// ErrInvalidPeriod reports a billing period that is not a month, or a
	// period that cannot be closed yet.
	ErrInvalidPeriod = errors.New("billing: invalid period")
	// ErrPeriodLocked reports a change to an invoiced (closed) period: a
	// re-rating, a credit, a second invoice.
	ErrPeriodLocked = errors.New("billing: period is invoiced and locked")
)
