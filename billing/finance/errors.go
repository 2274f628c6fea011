package finance

import "errors"

var (
	// ErrMixedCurrency reports a report period whose charges are in more
	// than one currency.
	ErrMixedCurrency = errors.New("billing: charges in more than one currency")
	// ErrUnknownBatch reports a batch report asked for a batch with no
	// usage recorded under the tenant (not run yet, another tenant's, or a
	// misspelt id).
	ErrUnknownBatch = errors.New("billing: unknown batch")
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
