// Package nvml reads NVIDIA GPU telemetry through NVML (the library behind
// nvidia-smi): per-device memory total, used and free, GPU and memory
// utilization, temperature and power. It feeds two consumers: the worker's
// Prometheus endpoint (NewCollector) and the sizing of the KV arena from
// the memory that is free before the arena is allocated (FreeMemory,
// KVBytes).
//
// NVML is loaded at run time (github.com/NVIDIA/go-nvml dlopens
// libnvidia-ml.so.1), so a binary with this package runs on machines
// without a GPU: Open then returns an *UnavailableError saying why ("NVML
// library not found", "driver not loaded"). The package needs cgo; built
// with CGO_ENABLED=0 it compiles to the same API with Open always failing.
//
// NVML numbers devices by PCI bus order, which need not be CUDA's order
// (fastest first, CUDA_VISIBLE_DEVICES applied); match them by UUID, or
// run with CUDA_DEVICE_ORDER=PCI_BUS_ID. On a one-GPU machine both are 0.
//
//	m, err := nvml.Open()
//	if err != nil {
//		return err // no driver: no GPU telemetry
//	}
//	defer m.Close()
//	free, _ := m.FreeMemory(0)
//	kv, _ := nvml.KVBytes(free, 0.9)
//	registry.MustRegister(nvml.NewCollector(m))
//
// It imports nothing of ours (go-nvml under cgo).
package nvml
