package sample

import "errors"

// ErrInvalidParams is returned by New and Params.Validate when a parameter is
// outside its range; the message names the parameter and the range.
var ErrInvalidParams = errors.New("sample: invalid sampling parameters")

// ErrUnknownPreset is returned by Preset for a name that is not a preset.
var ErrUnknownPreset = errors.New("sample: unknown preset")
