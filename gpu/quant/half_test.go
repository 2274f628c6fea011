package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestFP16Known(t *testing.T) {
	cases := []struct {
		f float32
		h uint16
	}{
		{0, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3c00},
		{-2, 0xc000},
		{0.5, 0x3800},
		{65504, 0x7bff},
		{65519, 0x7bff},
		{65520, 0x7c00}, // halfway to 65536: ties to even overflows to Inf
		{1e9, 0x7c00},
		{float32(math.Inf(-1)), 0xfc00},
		{0x1p-24, 0x0001},
		{0x1p-25, 0x0000},        // tie between 0 and the smallest subnormal: even
		{0x1.0002p-25, 0x0001},   // just above the tie
		{0x3p-25, 0x0002},        // 1.5 ulp ties to 2
		{0x1p-14, 0x0400},        // smallest normal
		{0x1.ffcp-15, 0x0400},    // largest subnormal + half ulp: tie, even is the smallest normal
		{0x3ffp-24, 0x03ff},      // largest subnormal
		{1 + 0x1p-11, 0x3c00},    // tie, even
		{1 + 0x3p-11, 0x3c02},    // tie, even upward
		{1 + 0x1.01p-11, 0x3c01}, // above the tie
		{-0x1p-30, 0x8000},       // underflow keeps sign
		{float32(1) / 3, 0x3555},
	}
	for _, c := range cases {
		if got := Float32ToFP16(c.f); got != c.h {
			t.Errorf("Float32ToFP16(%g) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
	if h := Float32ToFP16(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("NaN encoded as %#04x", h)
	}
	if f := FP16ToFloat32(0x7e00); !math.IsNaN(float64(f)) {
		t.Errorf("FP16ToFloat32(0x7e00) = %g, want NaN", f)
	}
	if f := FP16ToFloat32(0x0001); f != 0x1p-24 {
		t.Errorf("smallest subnormal decodes to %g", f)
	}
	if f := FP16ToFloat32(0x8001); f != -0x1p-24 {
		t.Errorf("negative subnormal decodes to %g", f)
	}
}

// Every half value survives a round trip through float32.
func TestFP16Exhaustive(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := FP16ToFloat32(h)
		if math.IsNaN(float64(f)) {
			if h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
				t.Fatalf("%#04x decoded to NaN", h)
			}
			continue
		}
		if got := Float32ToFP16(f); got != h {
			t.Fatalf("%#04x -> %g -> %#04x", h, f, got)
		}
	}
}

// Random float32s round to the nearest half, ties to even.
func TestFP16Nearest(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		f := math.Float32frombits(r.Uint32())
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) || math.Abs(float64(f)) > 65504 {
			continue
		}
		if i%2 == 0 { // bias towards the half range
			f = float32(math.Ldexp(r.Float64()*2-1, r.IntN(44)-28))
		}
		h := Float32ToFP16(f)
		got := float64(FP16ToFloat32(h))
		err := math.Abs(got - float64(f))
		for _, nb := range []uint16{h - 1, h + 1} {
			if nb&0x7fff >= 0x7c00 || (h&0x7fff == 0 && nb&0x7fff == 0x7fff) {
				continue
			}
			e2 := math.Abs(float64(FP16ToFloat32(nb)) - float64(f))
			if e2 < err || e2 == err && h&1 == 1 {
				t.Fatalf("Float32ToFP16(%g) = %#04x (%g) but %#04x (%g) is nearer or even", f, h, got, nb, FP16ToFloat32(nb))
			}
		}
	}
}

func TestBF16(t *testing.T) {
	cases := []struct {
		f float32
		h uint16
	}{
		{0, 0},
		{1, 0x3f80},
		{-1, 0xbf80},
		{math.Float32frombits(0x3f808000), 0x3f80}, // tie, even down
		{math.Float32frombits(0x3f818000), 0x3f82}, // tie, even up
		{math.Float32frombits(0x3f808001), 0x3f81},
		{math.Float32frombits(0x7f7fffff), 0x7f80}, // max float rounds to Inf
		{float32(math.Inf(1)), 0x7f80},
		{math.Float32frombits(0x00000001), 0x0000}, // tiny subnormal
	}
	for _, c := range cases {
		if got := Float32ToBF16(c.f); got != c.h {
			t.Errorf("Float32ToBF16(%g) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
	if h := Float32ToBF16(math.Float32frombits(0x7f800001)); BF16ToFloat32(h) == BF16ToFloat32(h) {
		t.Errorf("signalling NaN with low payload became %#04x", h)
	}
	for i := 0; i < 1<<16; i++ {
		f := BF16ToFloat32(uint16(i))
		if math.IsNaN(float64(f)) {
			continue
		}
		if got := Float32ToBF16(f); got != uint16(i) {
			t.Fatalf("%#04x -> %g -> %#04x", i, f, got)
		}
	}
}
