package tools

import "errors"

// Sentinels of the limits; the tools package turns them into contract
// errors.
var (
	// errStepBudget: the call ran out of step fuel.
	errStepBudget = errors.New("step budget exhausted")
	// errMemory: the tool went over its memory budget.
	errMemory = errors.New("memory budget exhausted")
	// errCompileTimeout: compiling took longer than the budget allows.
	errCompileTimeout = errors.New("compile time budget exhausted")
	// errTooManyThreads: a grammar followed too many alternatives at once.
	errTooManyThreads = errors.New("too many parser threads")
)
