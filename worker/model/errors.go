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

// ErrEncoderOnly is returned when an encoder (Config.Encoder: BERT and
// its kin) is asked for logits, or for hidden states of rows that are
// not whole inputs: it only embeds, through ForwardHidden.
var ErrEncoderOnly = errors.New("model: an encoder-only model only embeds")

// ErrInterrupted is returned by ForwardInterruptible when its stop function
// ended the step early; nothing of the step is to be used.
var ErrInterrupted = errors.New("model: step interrupted")
