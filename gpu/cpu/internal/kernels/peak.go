package kernels

import (
	"time"

	"github.com/zerolayer/zerolayer/gpu/quant"
)

// ToHalf sets dst[i] to src[i] as binary16, rounded to nearest even (the
// conversion of quant.Float32ToFP16, with F16C where the CPU has it).
func ToHalf(dst []uint16, src []float32) {
	n := len(src)
	_ = dst[:n]
	i := 0
	if useAsm && n >= 8 {
		i = n &^ 7
		toHalfAVX2(&dst[0], &src[0], i)
	}
	for ; i < n; i++ {
		dst[i] = quant.Float32ToFP16(src[i])
	}
}

// Peak is what one thread of this machine's vector units can do at most:
// F32 multiply-adds per second (FMA) and 8-bit integer multiply-adds per
// second (VPDPBUSD where the CPU has AVX512-VNNI, else the AVX2 kernels'
// VPMADDUBSW, VPMADDWD and VPADDD), each measured over independent chains
// that nothing else bounds; zero where the CPU lacks the instructions. A kernel's
// share of it says how far it is from the silicon.
type Peak struct {
	F32  float64 `json:"f32_macs_per_s"`
	Int8 float64 `json:"int8_macs_per_s"`
}

// MeasurePeak measures Peak on the calling goroutine in about 0.3 s: the
// best of several runs of each loop.
func MeasurePeak() Peak {
	var p Peak
	best := func(iters int, macs float64, loop func(int)) float64 {
		var r float64
		for range 5 {
			t0 := time.Now()
			loop(iters)
			r = max(r, float64(iters)*macs/time.Since(t0).Seconds())
		}
		return r
	}
	const iters = 2_000_000
	switch {
	case useAsm && hasWide:
		p.F32 = best(iters, 12*16, fmaLoopAVX512)
	case useAsm:
		p.F32 = best(iters, 12*8, fmaLoopAVX2)
	}
	switch {
	case useAsm && hasVNNI:
		p.Int8 = best(iters, 12*64, vnniLoopAVX512)
	case useAsm:
		p.Int8 = best(iters, 6*32, int8LoopAVX2)
	}
	return p
}
