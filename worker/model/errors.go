package model

import "errors"

// ErrUnsupportedArch is returned for a general.architecture this package
// does not implement.
var ErrUnsupportedArch = errors.New("model: unsupported architecture")

// ErrMissingTensor is returned when a tensor the architecture needs is absent.
var ErrMissingTensor = errors.New("model: missing tensor")

// ErrBadConfig is returned when hyper-parameters in the metadata are
// missing or inconsistent.
var ErrBadConfig = errors.New("model: bad hyper-parameters")

// ErrContextOverflow is returned when a sequence would exceed the model's
// context length.
var ErrContextOverflow = errors.New("model: context length exceeded")

// ErrInterrupted is returned by ForwardInterruptible when its stop function
// ended the step early; nothing of the step is to be used.
var ErrInterrupted = errors.New("model: step interrupted")
