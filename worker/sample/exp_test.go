package sample

import (
	"math"
	"testing"
)

func TestExpNeg(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		y    float64
		want float64
	}{
		{name: "zero", y: 0, want: 1},
		{name: "-Inf", y: math.Inf(-1), want: 0},
		{name: "NaN", y: math.NaN(), want: 0},
		{name: "below underflow", y: -104.5, want: 0},
		{name: "ln 1/2", y: -math.Ln2, want: 0.5},
	}
	for _, tt := range tests {
		if got := expNeg(tt.y); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("%s: expNeg(%v) = %v, want %v", tt.name, tt.y, got, tt.want)
		}
	}
	// Relative error over the whole range, on a grid finer than the
	// polynomial's interval and off the interval boundaries.
	worst := 0.0
	for y := 0.0; y >= expUnderflow; y -= 0.00731 {
		want := math.Exp(y)
		worst = max(worst, math.Abs(expNeg(y)-want)/want)
	}
	if worst > 1e-8 {
		t.Errorf("worst relative error %g, want below 1e-8", worst)
	}
}

func BenchmarkExpNeg(b *testing.B) {
	var sink float64
	for b.Loop() {
		for i := range 1024 {
			sink += expNeg(-float64(i) * 0.01)
		}
	}
	_ = sink
}
