package migrations

import "errors"

var (
	// ErrSteps reports a step count Down cannot use.
	ErrSteps = errors.New("migrations: invalid step count")
	// ErrUnknownMigration reports an applied migration this binary does
	// not know, so cannot revert.
	ErrUnknownMigration = errors.New("migrations: unknown applied migration")
)
