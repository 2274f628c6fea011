package tools

import (
	"sync/atomic"
	"time"
)

// fuel counts the steps of one call against Budget.MaxStepFuel.
type fuel struct {
	left int64
}

func newFuel(n int64) *fuel { return &fuel{left: n} }

// spend takes n steps and reports errStepBudget once the fuel is gone.
func (f *fuel) spend(n int64) error {
	if f == nil {
		return nil
	}
	f.left -= n
	if f.left < 0 {
		return errStepBudget
	}
	return nil
}

// meter counts bytes held against Budget.MaxMemoryBytes. It is shared by
// the lazily grown structures of one compiled tool, so it is safe for
// concurrent use.
type meter struct {
	used  atomic.Int64
	limit int64
}

func newMeter(limit int64) *meter { return &meter{limit: limit} }

// charge adds n bytes; it reports errMemory (and takes nothing) when that
// would go over the limit.
func (m *meter) charge(n int64) error {
	if m == nil {
		return nil
	}
	if m.used.Add(n) > m.limit {
		m.used.Add(-n)
		return errMemory
	}
	return nil
}

// compileClock enforces Budget.CompileTimeout at checkpoints.
type compileClock struct {
	deadline time.Time
	n        int
}

func newCompileClock(d time.Duration) *compileClock {
	return &compileClock{deadline: time.Now().Add(d)}
}

// check reports errCompileTimeout once the deadline has passed; it reads
// the clock only every 64 calls.
func (c *compileClock) check() error {
	if c == nil {
		return nil
	}
	c.n++
	if c.n&63 == 0 && time.Now().After(c.deadline) {
		return errCompileTimeout
	}
	return nil
}

// checkNow reads the clock.
func (c *compileClock) checkNow() error {
	if c != nil && time.Now().After(c.deadline) {
		return errCompileTimeout
	}
	return nil
}
