package limit

import "errors"

// Sentinels of the limits; the tools package turns them into contract
// errors.
var (
	// ErrStepBudget: the call ran out of step fuel.
	ErrStepBudget = errors.New("step budget exhausted")
	// ErrMemory: the tool went over its memory budget.
	ErrMemory = errors.New("memory budget exhausted")
	// ErrCompileTimeout: compiling took longer than the budget allows.
	ErrCompileTimeout = errors.New("compile time budget exhausted")
	// ErrTooManyThreads: a grammar followed too many alternatives at once.
	ErrTooManyThreads = errors.New("too many parser threads")
)
