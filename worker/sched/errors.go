package sched

import (
	"errors"
	"fmt"
)

// ErrTooLarge is returned when a job can never fit: its prompt needs more
// KV memory than its max_memory_mb cap or the whole arena.
var ErrTooLarge = errors.New("sched: the job does not fit in KV memory")

// ErrStopped is returned for jobs submitted to, or still queued in, a
// stopped scheduler.
var ErrStopped = errors.New("sched: scheduler stopped")

func errf(format string, a ...any) error { return fmt.Errorf("sched: "+format, a...) }
