package billing

import "errors"

var (
	// ErrInvalidUsage reports a usage record that cannot be billed: not
	// JSON, a field missing or of the wrong type, or a value out of range.
	ErrInvalidUsage = errors.New("billing: invalid usage record")
	// ErrNoPriceBook reports that no price book applies to a usage record.
	ErrNoPriceBook = errors.New("billing: no price book applies")
	// ErrInvalidPriceBook reports a price book that cannot be stored.
	ErrInvalidPriceBook = errors.New("billing: invalid price book")
	// ErrPriceBookMismatch reports a re-rating asked to use a price book
	// of another tenant or model than the job's.
	ErrPriceBookMismatch = errors.New("billing: price book does not apply to the job")
	// ErrInvalidTagRule reports a value-tag rule that cannot be used.
	ErrInvalidTagRule = errors.New("billing: invalid value-tag rule")
	// ErrNotFound reports a usage record or charge that is not stored.
	ErrNotFound = errors.New("billing: not found")
	// ErrMixedCurrency reports a report period whose charges are in more
	// than one currency.
	ErrMixedCurrency = errors.New("billing: charges in more than one currency")
	// ErrInvalidConfig reports a configuration that cannot work; the
	// message says how to fix it.
	ErrInvalidConfig = errors.New("billing: invalid configuration")
	// ErrUnknownTenant reports a report asked for a tenant billing has
	// never heard of: no usage of it ingested, no price book or value-tag
	// rule of its own (a misspelt tenant, usually).
	ErrUnknownTenant = errors.New("billing: unknown tenant")
	// ErrUnknownBatch reports a batch report asked for a batch with no
	// usage recorded under the tenant (not run yet, another tenant's, or a
	// misspelt id).
	ErrUnknownBatch = errors.New("billing: unknown batch")
	// ErrInvalidLimits reports tenant limits that cannot be stored.
	ErrInvalidLimits = errors.New("billing: invalid tenant limits")
	// ErrInvalidPeriod reports a billing period that is not a month, or a
	// period that cannot be closed yet.
	ErrInvalidPeriod = errors.New("billing: invalid period")
	// ErrPeriodLocked reports a change to an invoiced (closed) period: a
	// re-rating, a credit, a second invoice.
	ErrPeriodLocked = errors.New("billing: period is invoiced and locked")
	// ErrUnratedUsage reports a period close while some of the period's
	// usage is not rated yet.
	ErrUnratedUsage = errors.New("billing: usage not rated yet")
	// ErrInvalidCredit reports a credit or adjustment that cannot be
	// stored.
	ErrInvalidCredit = errors.New("billing: invalid credit")
	// ErrInvalidCustomer reports tenant billing details that cannot be
	// stored.
	ErrInvalidCustomer = errors.New("billing: invalid billing details")
	// ErrNoSupplier reports a close while the supplier's details (the
	// seller every invoice names) are not set.
	ErrNoSupplier = errors.New("billing: the supplier's details are not set")
	// ErrInvalidSupplier reports supplier details that cannot be stored.
	ErrInvalidSupplier = errors.New("billing: invalid supplier details")
	// ErrCurrencyChange reports a price book that would change a tenant's
	// currency within a month.
	ErrCurrencyChange = errors.New("billing: currency change within a month")
	// ErrInvalidFormat reports an unknown report format.
	ErrInvalidFormat = errors.New("billing: unknown report format")
)
