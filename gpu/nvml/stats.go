package nvml

import "fmt"

// Stats is one device's telemetry at one moment. A field NVML cannot read
// on a device (power on some boards) is zero and named in Missing.
type Stats struct {
	// Index is the NVML device index (PCI bus order).
	Index int
	// UUID is the device's "GPU-…" identifier; Name its product name.
	UUID, Name string
	// MemoryTotal, MemoryUsed and MemoryFree are in bytes, device-wide
	// (every process's allocations count).
	MemoryTotal, MemoryUsed, MemoryFree uint64
	// GPUUtilization and MemoryUtilization are percentages over NVML's
	// last sample period: of time a kernel ran, and of time memory was
	// read or written.
	GPUUtilization, MemoryUtilization uint32
	// TemperatureC is the GPU core temperature in °C.
	TemperatureC uint32
	// PowerW is the board power draw in watts; PowerLimitW the enforced
	// limit.
	PowerW, PowerLimitW float64
	// Missing names the readings that failed ("power", "temperature", …).
	Missing []string
}

// KVBytes returns fraction (0, 1] of free bytes: the budget for the KV
// arena when free is the device memory free after the weights are loaded.
func KVBytes(free uint64, fraction float64) (uint64, error) {
	if !(fraction > 0 && fraction <= 1) {
		return 0, fmt.Errorf("nvml: KV memory fraction %g is not in (0, 1]; 0.9 leaves a tenth of the free memory for activations", fraction)
	}
	return uint64(float64(free) * fraction), nil
}
