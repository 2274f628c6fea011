//go:build cgo

package nvml

import (
	"fmt"
	"sync"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Monitor is an initialised NVML session. It is safe for concurrent use.
type Monitor struct {
	mu      sync.Mutex
	closed  bool
	devices []gonvml.Device
	driver  string
}

// Open initialises NVML and finds the devices. Without an NVIDIA driver it
// returns an *UnavailableError.
func Open() (*Monitor, error) {
	if r := gonvml.Init(); r != gonvml.SUCCESS {
		return nil, &UnavailableError{Reason: fmt.Sprintf("nvml.Init: %v (%d)", r, int32(r))}
	}
	n, r := gonvml.DeviceGetCount()
	if r != gonvml.SUCCESS {
		gonvml.Shutdown()
		return nil, &UnavailableError{Reason: fmt.Sprintf("nvmlDeviceGetCount: %v (%d)", r, int32(r))}
	}
	m := &Monitor{}
	m.driver, _ = gonvml.SystemGetDriverVersion()
	for i := 0; i < n; i++ {
		d, r := gonvml.DeviceGetHandleByIndex(i)
		if r != gonvml.SUCCESS {
			gonvml.Shutdown()
			return nil, fmt.Errorf("nvml: device %d: %v", i, r)
		}
		m.devices = append(m.devices, d)
	}
	return m, nil
}

// Driver returns the driver version ("580.159.03").
func (m *Monitor) Driver() string { return m.driver }

// Count returns the number of devices.
func (m *Monitor) Count() int { return len(m.devices) }

func (m *Monitor) device(i int) (gonvml.Device, error) {
	if m.closed {
		return nil, fmt.Errorf("nvml: monitor closed")
	}
	if i < 0 || i >= len(m.devices) {
		return nil, fmt.Errorf("nvml: device %d of %d", i, len(m.devices))
	}
	return m.devices[i], nil
}

// FreeMemory returns the device memory free now, in bytes, device-wide.
func (m *Monitor) FreeMemory(device int) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.device(device)
	if err != nil {
		return 0, err
	}
	mem, r := d.GetMemoryInfo()
	if r != gonvml.SUCCESS {
		return 0, fmt.Errorf("nvml: device %d memory: %v", device, r)
	}
	return mem.Free, nil
}

// Stats reads every device.
func (m *Monitor) Stats() ([]Stats, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("nvml: monitor closed")
	}
	out := make([]Stats, len(m.devices))
	for i, d := range m.devices {
		s := &out[i]
		s.Index = i
		miss := func(what string, r gonvml.Return) bool {
			if r != gonvml.SUCCESS {
				s.Missing = append(s.Missing, what)
				return true
			}
			return false
		}
		var r gonvml.Return
		s.UUID, r = d.GetUUID()
		miss("uuid", r)
		s.Name, r = d.GetName()
		miss("name", r)
		if mem, r := d.GetMemoryInfo(); !miss("memory", r) {
			s.MemoryTotal, s.MemoryUsed, s.MemoryFree = mem.Total, mem.Used, mem.Free
		}
		if u, r := d.GetUtilizationRates(); !miss("utilization", r) {
			s.GPUUtilization, s.MemoryUtilization = u.Gpu, u.Memory
		}
		s.TemperatureC, r = d.GetTemperature(gonvml.TEMPERATURE_GPU)
		miss("temperature", r)
		if mw, r := d.GetPowerUsage(); !miss("power", r) {
			s.PowerW = float64(mw) / 1000
		}
		if mw, r := d.GetEnforcedPowerLimit(); !miss("power limit", r) {
			s.PowerLimitW = float64(mw) / 1000
		}
	}
	return out, nil
}

// Close shuts NVML down. It is safe to call twice.
func (m *Monitor) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	if r := gonvml.Shutdown(); r != gonvml.SUCCESS {
		return fmt.Errorf("nvml: shutdown: %v", r)
	}
	return nil
}

// FreeMemory opens NVML, reads the free memory of device and closes it:
// for sizing the KV arena once at start-up.
func FreeMemory(device int) (uint64, error) {
	m, err := Open()
	if err != nil {
		return 0, err
	}
	defer m.Close()
	return m.FreeMemory(device)
}
