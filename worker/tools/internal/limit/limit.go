package limit

import (
	"sync/atomic"
	"time"
)

// Fuel counts the steps of one call against Budget.MaxStepFuel.
type Fuel struct {
	left int64
}

// NewFuel returns a Fuel of n steps.
func NewFuel(n int64) *Fuel { return &Fuel{left: n} }

// Refill sets the fuel back to n steps, for the next call.
func (f *Fuel) Refill(n int64) { f.left = n }

// Spend takes n steps and reports ErrStepBudget once the fuel is gone.
func (f *Fuel) Spend(n int64) error {
	if f == nil {
		return nil
	}
	f.left -= n
	if f.left < 0 {
		return ErrStepBudget
	}
	return nil
}

// Meter counts bytes held against Budget.MaxMemoryBytes. It is shared by
// the lazily grown structures of one compiled tool, so it is safe for
// concurrent use.
type Meter struct {
	// Used is the number of bytes charged so far.
	Used  atomic.Int64
	limit int64
}

// NewMeter returns a Meter that allows limit bytes.
func NewMeter(limit int64) *Meter { return &Meter{limit: limit} }

// Charge adds n bytes; it reports ErrMemory (and takes nothing) when that
// would go over the limit.
func (m *Meter) Charge(n int64) error {
	if m == nil {
		return nil
	}
	if m.Used.Add(n) > m.limit {
		m.Used.Add(-n)
		return ErrMemory
	}
	return nil
}

// Clock enforces Budget.CompileTimeout at checkpoints.
type Clock struct {
	deadline time.Time
	n        int
}

// NewClock returns a Clock whose deadline is d from now.
func NewClock(d time.Duration) *Clock {
	return &Clock{deadline: time.Now().Add(d)}
}

// Check reports ErrCompileTimeout once the deadline has passed; it reads
// the clock only every 64 calls.
func (c *Clock) Check() error {
	if c == nil {
		return nil
	}
	c.n++
	if c.n&63 == 0 && time.Now().After(c.deadline) {
		return ErrCompileTimeout
	}
	return nil
}

// CheckNow reads the clock.
func (c *Clock) CheckNow() error {
	if c != nil && time.Now().After(c.deadline) {
		return ErrCompileTimeout
	}
	return nil
}
