package cuda

import (
	"errors"
	"fmt"

	"github.com/zerolayer/zerolayer/gpu"
)

// NoDeviceError is returned by New (and Available) when the binary has CUDA
// support but no usable device: no driver, no GPU, or a stub libcuda. It
// matches gpu.ErrBackendUnavailable with errors.Is, so callers can fall
// back to the CPU backend.
type NoDeviceError struct {
	// Reason says what the driver reported, e.g.
	// "cuInit(0) = CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected".
	Reason string
}

func (e *NoDeviceError) Error() string { return "no CUDA device (" + e.Reason + ")" }

// Is reports whether target is gpu.ErrBackendUnavailable.
func (e *NoDeviceError) Is(target error) bool { return target == gpu.ErrBackendUnavailable }

// ErrNotBuilt is returned by New in a binary built without the cuda build
// tag. It wraps gpu.ErrBackendUnavailable.
var ErrNotBuilt = fmt.Errorf("%w: cuda: this binary was built without the cuda build tag", gpu.ErrBackendUnavailable)

// ErrClosed is returned by operations on a closed backend.
var ErrClosed = errors.New("cuda: backend closed")
