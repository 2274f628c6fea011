//go:build !cgo

package nvml

// Monitor is an NVML session; without cgo none can be opened.
type Monitor struct{}

var errNoCgo = &UnavailableError{Reason: "built without cgo (CGO_ENABLED=0)"}

// Open fails: NVML needs cgo.
func Open() (*Monitor, error) { return nil, errNoCgo }

// Driver returns "".
func (m *Monitor) Driver() string { return "" }

// Count returns 0.
func (m *Monitor) Count() int { return 0 }

// FreeMemory fails: NVML needs cgo.
func (m *Monitor) FreeMemory(device int) (uint64, error) { return 0, errNoCgo }

// Stats fails: NVML needs cgo.
func (m *Monitor) Stats() ([]Stats, error) { return nil, errNoCgo }

// Close does nothing.
func (m *Monitor) Close() error { return nil }

// FreeMemory fails: NVML needs cgo.
func FreeMemory(device int) (uint64, error) { return 0, errNoCgo }
