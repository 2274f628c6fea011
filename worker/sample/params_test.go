package sample

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestParamsValidate(t *testing.T) {
	t.Parallel()
	nan := float32(math.NaN())
	tests := []struct {
		name    string
		p       Params
		wantErr error
		wantMsg string
	}{
		{name: "zero value", p: Params{}},
		{name: "edges", p: Params{Temperature: 2, TopK: 1, TopP: 1, MinP: 0.99, RepetitionPenalty: 0.5, RepeatLastN: -1}},
		{name: "temperature negative", p: Params{Temperature: -0.1}, wantErr: ErrInvalidParams, wantMsg: "temperature"},
		{name: "temperature high", p: Params{Temperature: 2.01}, wantErr: ErrInvalidParams, wantMsg: "temperature"},
		{name: "temperature NaN", p: Params{Temperature: nan}, wantErr: ErrInvalidParams, wantMsg: "temperature"},
		{name: "top_k negative", p: Params{TopK: -1}, wantErr: ErrInvalidParams, wantMsg: "top_k"},
		{name: "top_p negative", p: Params{TopP: -0.5}, wantErr: ErrInvalidParams, wantMsg: "top_p"},
		{name: "top_p above 1", p: Params{TopP: 1.5}, wantErr: ErrInvalidParams, wantMsg: "top_p"},
		{name: "min_p 1", p: Params{MinP: 1}, wantErr: ErrInvalidParams, wantMsg: "min_p"},
		{name: "min_p negative", p: Params{MinP: -0.1}, wantErr: ErrInvalidParams, wantMsg: "min_p"},
		{name: "penalty negative", p: Params{RepetitionPenalty: -1}, wantErr: ErrInvalidParams, wantMsg: "repetition_penalty"},
		{name: "penalty infinite", p: Params{RepetitionPenalty: float32(math.Inf(1))}, wantErr: ErrInvalidParams, wantMsg: "repetition_penalty"},
		{name: "repeat_last_n below -1", p: Params{RepeatLastN: -2}, wantErr: ErrInvalidParams, wantMsg: "repeat_last_n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.p.Validate()
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Validate() error = %v, want %v", err, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Validate() error = %q, want it to name %q", err, tt.wantMsg)
			}
			if _, nerr := New(tt.p); !errors.Is(nerr, tt.wantErr) {
				t.Errorf("New() error = %v, want %v", nerr, tt.wantErr)
			}
		})
	}
}

func TestWithDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   Params
		want Params
	}{
		{name: "zero", in: Params{}, want: Params{TopP: 1, RepetitionPenalty: 1, RepeatLastN: 64}},
		{name: "set fields kept", in: Params{Temperature: 0.5, TopK: 3, TopP: 0.5, MinP: 0.1, RepetitionPenalty: 1.2, RepeatLastN: -1, Seed: 9},
			want: Params{Temperature: 0.5, TopK: 3, TopP: 0.5, MinP: 0.1, RepetitionPenalty: 1.2, RepeatLastN: -1, Seed: 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.in.WithDefaults(); got != tt.want {
				t.Errorf("WithDefaults() = %+v, want %+v", got, tt.want)
			}
			s, err := New(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Params(); got != tt.want {
				t.Errorf("Sampler.Params() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestPreset(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		wantTemp float32
		wantMax  int
		wantErr  error
	}{
		{name: "concise", wantTemp: 0.3, wantMax: 256},
		{name: "balanced", wantTemp: 0.7, wantMax: 512},
		{name: " Detailed ", wantTemp: 0.6, wantMax: 1536},
		{name: "creative", wantTemp: 1.0, wantMax: 1024},
		{name: "wild", wantErr: ErrUnknownPreset},
		{name: "", wantErr: ErrUnknownPreset},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, maxTokens, err := Preset(tt.name)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Preset(%q) error = %v, want %v", tt.name, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if p.Temperature != tt.wantTemp || maxTokens != tt.wantMax {
				t.Errorf("Preset(%q) = temperature %v, max_tokens %d; want %v, %d", tt.name, p.Temperature, maxTokens, tt.wantTemp, tt.wantMax)
			}
			if _, err := New(p); err != nil {
				t.Errorf("New(Preset(%q)) error = %v", tt.name, err)
			}
		})
	}
	for _, n := range PresetNames() {
		if _, _, err := Preset(n); err != nil {
			t.Errorf("Preset(%q) from PresetNames() failed: %v", n, err)
		}
	}
	if len(PresetNames()) != len(presets) {
		t.Errorf("PresetNames() has %d names, table has %d", len(PresetNames()), len(presets))
	}
}
