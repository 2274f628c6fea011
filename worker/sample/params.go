package sample

import (
	"fmt"
	"math"
	"strings"
)

// Params configures a Sampler. The zero value is valid and means greedy
// decoding with no repetition penalty.
type Params struct {
	// Temperature divides the logits before a token is drawn: below 1
	// sharpens the distribution, above 1 flattens it. 0 means greedy: the
	// most likely token is taken and the truncation settings are ignored.
	// Must be in [0, 2]. Defaults to 0 (greedy).
	Temperature float32

	// TopK keeps only the TopK most likely tokens. 0 disables it. Must be
	// at least 0. Defaults to 0 (off).
	TopK int

	// TopP keeps the smallest set of most likely tokens whose probabilities
	// add up to at least TopP (nucleus sampling). 1 disables it. Must be in
	// (0, 1]; 0 is read as unset. Defaults to 1 (off).
	TopP float32

	// MinP drops tokens whose probability is below MinP times that of the
	// most likely token. 0 disables it. Must be in [0, 1). Defaults to 0
	// (off).
	MinP float32

	// RepetitionPenalty lowers the logits of tokens seen in the last
	// RepeatLastN history tokens, as llama.cpp does: a positive logit is
	// divided by it, a negative one multiplied. Each distinct token is
	// penalised once however often it occurs. 1 disables it; values below 1
	// favour repetition. Must be above 0; 0 is read as unset. Defaults to 1
	// (off).
	RepetitionPenalty float32

	// RepeatLastN is how many of the most recent history tokens the
	// repetition penalty looks at; -1 means the whole history. Must be at
	// least -1; 0 is read as unset. Defaults to 64.
	RepeatLastN int

	// Seed seeds the random number generator: the same Seed, Params and
	// sequence of logits give the same tokens. 0 is an ordinary seed, so
	// callers who want varied output must choose a seed themselves.
	// Defaults to 0.
	Seed uint64
}

// Defaults applied by WithDefaults.
const (
	defaultTopP              = 1
	defaultRepetitionPenalty = 1
	defaultRepeatLastN       = 64
)

// WithDefaults returns p with unset fields (TopP, RepetitionPenalty and
// RepeatLastN at zero) replaced by their defaults.
func (p Params) WithDefaults() Params {
	if p.TopP == 0 {
		p.TopP = defaultTopP
	}
	if p.RepetitionPenalty == 0 {
		p.RepetitionPenalty = defaultRepetitionPenalty
	}
	if p.RepeatLastN == 0 {
		p.RepeatLastN = defaultRepeatLastN
	}
	return p
}

// Validate reports the first parameter of p.WithDefaults() that is out of
// range, as an error matching ErrInvalidParams. NaN is out of every range.
func (p Params) Validate() error {
	p = p.WithDefaults()
	switch {
	case !(p.Temperature >= 0 && p.Temperature <= 2):
		return fmt.Errorf("%w: temperature %v is outside [0, 2]; use 0 for greedy decoding", ErrInvalidParams, p.Temperature)
	case p.TopK < 0:
		return fmt.Errorf("%w: top_k %d is negative; use 0 to disable it", ErrInvalidParams, p.TopK)
	case !(p.TopP > 0 && p.TopP <= 1):
		return fmt.Errorf("%w: top_p %v is outside (0, 1]; use 1 to disable it", ErrInvalidParams, p.TopP)
	case !(p.MinP >= 0 && p.MinP < 1):
		return fmt.Errorf("%w: min_p %v is outside [0, 1); use 0 to disable it", ErrInvalidParams, p.MinP)
	case !(p.RepetitionPenalty > 0) || p.RepetitionPenalty > math.MaxFloat32:
		return fmt.Errorf("%w: repetition_penalty %v must be a positive number; use 1 to disable it", ErrInvalidParams, p.RepetitionPenalty)
	case p.RepeatLastN < -1:
		return fmt.Errorf("%w: repeat_last_n %d is below -1; use -1 for the whole history", ErrInvalidParams, p.RepeatLastN)
	}
	return nil
}

// preset is one row of the preset table.
type preset struct {
	params    Params
	maxTokens int
}

// presets is the table documented in doc.go; keep the two in step.
var presets = map[string]preset{
	"concise": {Params{Temperature: 0.3, TopK: 40, TopP: 0.9, MinP: 0.05,
		RepetitionPenalty: 1.1, RepeatLastN: 64}, 256},
	"balanced": {Params{Temperature: 0.7, TopK: 40, TopP: 0.9, MinP: 0.05,
		RepetitionPenalty: 1.1, RepeatLastN: 64}, 512},
	"detailed": {Params{Temperature: 0.6, TopK: 40, TopP: 0.95, MinP: 0.05,
		RepetitionPenalty: 1.05, RepeatLastN: 128}, 1536},
	"creative": {Params{Temperature: 1.0, TopK: 100, TopP: 0.95, MinP: 0.02,
		RepetitionPenalty: 1.15, RepeatLastN: 256}, 1024},
}

// PresetNames returns the names Preset accepts, from the most to the least
// restrained.
func PresetNames() []string { return []string{"concise", "balanced", "detailed", "creative"} }

// Preset returns the parameters and the suggested max_tokens of the named
// preset (see the table in the package documentation). Matching ignores case
// and surrounding spaces. The returned Seed is 0; set it per request. An
// unknown name yields an error matching ErrUnknownPreset.
func Preset(name string) (Params, int, error) {
	pr, ok := presets[strings.ToLower(strings.TrimSpace(name))]
	if !ok {
		return Params{}, 0, fmt.Errorf("%w %q: want one of %s", ErrUnknownPreset, name, strings.Join(PresetNames(), ", "))
	}
	return pr.params, pr.maxTokens, nil
}
