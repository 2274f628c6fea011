package nvml

import "errors"

// ErrUnavailable is matched (errors.Is) by every error saying NVML cannot
// be used here: no NVIDIA driver, no GPU, or a binary built without cgo.
var ErrUnavailable = errors.New("nvml: unavailable")

// UnavailableError says why NVML cannot be used. It matches ErrUnavailable.
type UnavailableError struct {
	// Reason is NVML's (or the build's) explanation, e.g.
	// "nvml.Init: ERROR_LIBRARY_NOT_FOUND (12)".
	Reason string
}

func (e *UnavailableError) Error() string { return "nvml: unavailable: " + e.Reason }

// Is reports whether target is ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }
