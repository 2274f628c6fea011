// Package limit holds the meters every room of the tools package spends
// against: step fuel per call, bytes held by a compiled tool, and the
// compile clock, with the sentinel errors they report.
//
// # Data flow
//
// The tools package turns a job's Budget into a Meter per compiled tool
// (shared by its lazily grown automata and caches), a Clock per compile,
// and a Fuel per Mask, Accept, Text or Finish call. The machinery below
// (automaton, vocab, grammar, schema) only spends: Fuel.Spend,
// Meter.Charge and Clock.Check return ErrStepBudget, ErrMemory or
// ErrCompileTimeout, which travel up unchanged; the tools package maps them
// to contract errors (TOOL_STEP_BUDGET, TOOL_MEMORY_EXHAUSTED,
// TOOL_TIMEOUT) in one place.
//
// # Imports
//
// Only the standard library: every other room imports it.
//
//	f := limit.NewFuel(budget.MaxStepFuel)
//	if err := f.Spend(n); err != nil { // limit.ErrStepBudget
//		return err
//	}
package limit
