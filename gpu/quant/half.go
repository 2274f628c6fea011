package quant

import "math"

// FP16ToFloat32 converts an IEEE 754 binary16 value to float32. Every half
// value, subnormals and NaN payloads included, is exactly representable.
func FP16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch exp {
	case 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: mant × 2⁻²⁴, exact in float32.
		f := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+(127-15))<<23 | mant<<13)
}

// Float32ToFP16 converts f to binary16, rounding to nearest with ties to
// even. Values too large become ±Inf, values too small become subnormals or
// ±0, and NaN stays a (quiet) NaN.
func Float32ToFP16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 | uint16(mant>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15 // biased half exponent
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Result is subnormal (or zero): value×2²⁴ = M × 2^(e-14).
		shift := uint32(14 - e)
		if shift > 24 {
			return sign
		}
		m := mant | 0x800000
		h := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || rem == half && h&1 == 1 {
			h++ // may carry into the smallest normal, which is correct
		}
		return sign | uint16(h)
	}
	h := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
		h++ // a carry into the exponent (up to Inf) is correct
	}
	return sign | uint16(h)
}

// BF16ToFloat32 converts a bfloat16 value (the top half of a float32) to
// float32.
func BF16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// Float32ToBF16 converts f to bfloat16, rounding to nearest with ties to
// even; NaN stays a quiet NaN.
func Float32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}
