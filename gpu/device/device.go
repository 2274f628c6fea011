package device

import (
	"errors"
	"fmt"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/gpu/cuda"
)

// Backend kinds accepted by Open.
const (
	CPU  = "cpu"  // the pure-Go CPU backend
	CUDA = "cuda" // the first CUDA device; an error when there is none
	Auto = "auto" // CUDA when a device opens, else the CPU
)

// ErrUnknownKind is returned by Open and Check for a kind other than cpu,
// cuda or auto.
var ErrUnknownKind = errors.New("device: unknown kind")

// Check returns nil when kind is one Open accepts ("" is cpu), else an
// error wrapping ErrUnknownKind.
func Check(kind string) error {
	switch kind {
	case "", CPU, CUDA, Auto:
		return nil
	}
	return fmt.Errorf("%w %q: want cpu, cuda or auto", ErrUnknownKind, kind)
}

// Open opens the backend of kind ("" is cpu); threads is the CPU backend's
// worker count (0: one per CPU). With cuda, CUDA's error is returned as it
// is (it matches gpu.ErrBackendUnavailable when the binary has no CUDA
// support or the machine no device). With auto, a CUDA backend that does
// not open means the CPU backend, after onFallback, when set, is called
// with the reason. The caller closes the backend.
func Open(kind string, threads int, onFallback func(reason error)) (gpu.Backend, error) {
	if err := Check(kind); err != nil {
		return nil, err
	}
	if kind == CUDA || kind == Auto {
		be, err := cuda.New(cuda.Config{})
		if err == nil {
			return be, nil
		}
		if kind == CUDA {
			return nil, err
		}
		if onFallback != nil {
			onFallback(err)
		}
	}
	return cpu.New(cpu.Config{Threads: threads}), nil
}

// IsCUDA reports whether be is the CUDA backend (which has NVML telemetry,
// for one).
func IsCUDA(be gpu.Backend) bool {
	_, ok := be.(*cuda.Backend)
	return ok
}
