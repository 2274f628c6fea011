package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
)

func putH(b []byte, h uint16) { binary.LittleEndian.PutUint16(b, h) }

func expect(t *testing.T, name string, got []float32, want map[int]float32) {
	t.Helper()
	for i, g := range got {
		w := want[i] // unlisted elements must be zero
		if g != w {
			t.Errorf("%s: element %d = %g, want %g", name, i, g, w)
		}
	}
}

func TestDequantizeQ8_0Known(t *testing.T) {
	blk := make([]byte, BlockQ8_0)
	putH(blk, 0x3800) // 0.5
	blk[2+0] = 2
	blk[2+1] = 0xfd // -3
	blk[2+31] = 127
	blk[2+30] = 0x80 // -128
	y := make([]float32, 32)
	if err := Dequantize(gpu.Q8_0, blk, y); err != nil {
		t.Fatal(err)
	}
	expect(t, "q8_0", y, map[int]float32{0: 1, 1: -1.5, 31: 63.5, 30: -64})
}

func TestDequantizeQ4_0Known(t *testing.T) {
	blk := make([]byte, BlockQ4_0)
	putH(blk, 0x4000) // 2
	for i := 2; i < BlockQ4_0; i++ {
		blk[i] = 0x88 // zeros
	}
	blk[2+0] = 0x3f  // element 0: 15-8=7, element 16: 3-8=-5
	blk[2+15] = 0x80 // element 15: 0-8=-8, element 31: 0
	y := make([]float32, 32)
	if err := Dequantize(gpu.Q4_0, blk, y); err != nil {
		t.Fatal(err)
	}
	expect(t, "q4_0", y, map[int]float32{0: 14, 16: -10, 15: -16})
}

func TestDequantizeQ4_KKnown(t *testing.T) {
	blk := make([]byte, BlockQ4_K)
	putH(blk, 0x3c00)     // d = 1
	putH(blk[2:], 0x3800) // dmin = 0.5
	s := blk[4:16]
	s[0], s[4] = 2, 3 // sub-block 0: scale 2, min 3
	// Sub-block 5: scale 42 = 0b10_1010, min 21 = 0b01_0101.
	s[9] = 0xa | 5<<4
	s[1] |= 2 << 6
	s[5] |= 1 << 6
	// Sub-block 3: scale 63, min 1 (low layout, j < 4).
	s[3], s[7] = 63, 1
	qs := blk[16:]
	qs[0] = 0x07     // element 0 (sub-block 0) = 2·7 − 1.5
	qs[64+3] = 0xb0  // element 163 (sub-block 5, high nibble) = 42·11 − 10.5
	qs[32+31] = 0xf0 // element 127 (sub-block 3) = 63·15 − 0.5
	y := make([]float32, 256)
	if err := Dequantize(gpu.Q4_K, blk, y); err != nil {
		t.Fatal(err)
	}
	want := map[int]float32{0: 12.5, 163: 451.5, 127: 944.5}
	for i := 1; i < 32; i++ {
		want[i] = -1.5 // q = 0 in sub-block 0
	}
	for i := 160; i < 192; i++ {
		if i != 163 {
			want[i] = -10.5
		}
	}
	for i := 96; i < 127; i++ {
		want[i] = -0.5
	}
	expect(t, "q4_K", y, want)
	if sc, m := ScaleMinK4(5, s); sc != 42 || m != 21 {
		t.Errorf("ScaleMinK4(5) = %d, %d", sc, m)
	}
}

func TestDequantizeQ6_KKnown(t *testing.T) {
	blk := make([]byte, BlockQ6_K)
	ql, qh, sc := blk[0:128], blk[128:192], blk[192:208]
	putH(blk[208:], 0x3400) // d = 0.25
	sc[0], sc[3], sc[13] = 4, 0xfe, 8
	// All quants 32 (value 0) except the ones set below: low nibble 0, high 2.
	for i := range qh {
		qh[i] = 0xaa
	}
	// Element 0: q = 5 | 2<<4 = 37 → 5; scale sc[0] = 4 → 0.25·4·5.
	ql[0] = 0x05
	// Element 48 (chunk 0, second quarter, l = 16): ql[48] low, qh[16] bits 2-3, sc[3].
	ql[48] = 0x01
	qh[16] = 0xa2 // bits 2-3 = 0 → q = 1 → −31
	// Element 208 (chunk 1, third quarter, l = 16): ql[64+16] high, qh[32+16] bits 4-5, sc[13].
	ql[80] = 0xf0
	qh[48] = 0xba // bits 4-5 = 3 → q = 63 → 31
	y := make([]float32, 256)
	if err := Dequantize(gpu.Q6_K, blk, y); err != nil {
		t.Fatal(err)
	}
	expect(t, "q6_K", y, map[int]float32{0: 5, 48: 15.5, 208: 62})
}

func TestDequantizeFloatKnown(t *testing.T) {
	b := []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0}
	y := make([]float32, 2)
	if err := Dequantize(gpu.F32, b, y); err != nil || y[0] != 1 || y[1] != -2 {
		t.Errorf("f32: %v %v", y, err)
	}
	if err := Dequantize(gpu.F16, []byte{0, 0x3c, 0, 0xc2}, y); err != nil || y[0] != 1 || y[1] != -3 {
		t.Errorf("f16: %v %v", y, err)
	}
	if err := Dequantize(gpu.BF16, []byte{0x80, 0x3f, 0x40, 0xc0}, y); err != nil || y[0] != 1 || y[1] != -3 {
		t.Errorf("bf16: %v %v", y, err)
	}
}

func TestDequantizeErrors(t *testing.T) {
	y := make([]float32, 32)
	if err := Dequantize(gpu.Q8_0, make([]byte, 33), y); err == nil {
		t.Error("short Q8_0 data accepted")
	}
	if err := Dequantize(gpu.Q4_K, make([]byte, 144), y); err == nil {
		t.Error("32 elements of Q4_K accepted")
	}
	if err := Dequantize(gpu.DType(23), make([]byte, 20), y); err == nil {
		t.Error("unsupported type accepted")
	}
	if _, err := Quantize(gpu.Q6_K, y); err == nil {
		t.Error("Quantize accepted a partial super-block")
	}
}

// Round trips through every type stay within a bound on the RMS error
// relative to the RMS of the data, and dequantizing is deterministic.
func TestRoundTrip(t *testing.T) {
	bounds := map[gpu.DType]float64{
		gpu.F32: 0, gpu.F16: 0.0005, gpu.BF16: 0.004,
		gpu.Q8_0: 0.008, gpu.Q4_0: 0.12, gpu.Q4_K: 0.095, gpu.Q6_K: 0.027,
		gpu.Q4_1: 0.10, gpu.Q5_0: 0.06, gpu.Q5_1: 0.05, gpu.Q2_K: 0.33, gpu.Q3_K: 0.18, gpu.Q5_K: 0.046,
	}
	r := rand.New(rand.NewPCG(3, 4))
	const n = 256 * 64
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64()) * float32(math.Exp(r.NormFloat64()*0.3))
		if i%1000 == 7 {
			x[i] *= 8 // outliers
		}
	}
	for _, ty := range gpu.DTypes {
		b, err := Quantize(ty, x)
		if err != nil {
			t.Fatal(ty, err)
		}
		if want, _ := ty.RowBytes(n); len(b) != want {
			t.Fatalf("%v: %d bytes, want %d", ty, len(b), want)
		}
		y := make([]float32, n)
		if err := Dequantize(ty, b, y); err != nil {
			t.Fatal(ty, err)
		}
		var se, ss float64
		for i := range x {
			d := float64(y[i] - x[i])
			se += d * d
			ss += float64(x[i]) * float64(x[i])
		}
		rel := math.Sqrt(se / ss)
		t.Logf("%-5v relative RMS error %.5f", ty, rel)
		if rel > bounds[ty] {
			t.Errorf("%v: relative RMS error %.5f > %.5f", ty, rel, bounds[ty])
		}
	}
}

// Per-element bound for Q8_0: |err| ≤ d/2 plus the f16 rounding of d.
func TestQ8_0ElementBound(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	x := make([]float32, 32*100)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	b, _ := Quantize(gpu.Q8_0, x)
	y := make([]float32, len(x))
	if err := Dequantize(gpu.Q8_0, b, y); err != nil {
		t.Fatal(err)
	}
	for blk := 0; blk < 100; blk++ {
		var amax float32
		for _, v := range x[32*blk : 32*blk+32] {
			amax = max(amax, abs32(v))
		}
		d := float64(amax) / 127
		for i := 32 * blk; i < 32*blk+32; i++ {
			if e := math.Abs(float64(y[i] - x[i])); e > d*(0.5+127.0/2048)+1e-7 {
				t.Fatalf("element %d: error %g exceeds bound for d=%g", i, e, d)
			}
		}
	}
}

// Degenerate inputs: all zero, constant, one spike.
func TestQuantizeDegenerate(t *testing.T) {
	inputs := map[string]func(i int) float32{
		"zero":     func(int) float32 { return 0 },
		"constant": func(int) float32 { return 3 },
		"negative": func(int) float32 { return -2 },
		"spike": func(i int) float32 {
			if i == 77 {
				return 100
			}
			return 0
		},
	}
	for name, f := range inputs {
		x := make([]float32, 256)
		for i := range x {
			x[i] = f(i)
		}
		for _, ty := range gpu.DTypes {
			b, err := Quantize(ty, x)
			if err != nil {
				t.Fatal(err)
			}
			y := make([]float32, 256)
			if err := Dequantize(ty, b, y); err != nil {
				t.Fatal(err)
			}
			for i := range x {
				if math.IsNaN(float64(y[i])) || math.Abs(float64(y[i]-x[i])) > 0.05*math.Abs(float64(x[i]))+0.02 {
					t.Errorf("%s %v: element %d = %g, want ≈ %g", name, ty, i, y[i], x[i])
					break
				}
			}
		}
	}
}
