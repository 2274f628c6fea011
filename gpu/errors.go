package gpu

import "errors"

// ErrUnsupportedType is returned for a tensor type no backend implements.
var ErrUnsupportedType = errors.New("gpu: unsupported tensor type")

// ErrBackendUnavailable is returned when a backend cannot run here: the
// binary was built without it, or no device is present.
var ErrBackendUnavailable = errors.New("gpu: backend unavailable")

// ErrShape is returned when operands do not have compatible shapes.
var ErrShape = errors.New("gpu: shape mismatch")
