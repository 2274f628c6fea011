package grammar

import (
	"math"
	"math/big"
	"strings"
)

// JSON numbers under bounds (minimum, maximum, exclusive*) and multipleOf
// (integer is multipleOf 1). The grammar follows the number text a byte at
// a time; after each byte it asks whether some completion of the text can
// still satisfy the constraints, so the mask never lets a number run into a
// dead end, and when the number ends it checks the value exactly. Numbers
// with constraints have no exponent (a completion set with exponents is not
// an interval), and are at most maxNumLen bytes long.

// maxNumLen bounds the text of a constrained number; maxFreeNumLen of any
// number.
const (
	maxNumLen     = 40
	maxFreeNumLen = 64
)

// Number phases.
const (
	nStart uint8 = iota
	nMinus
	nZero
	nInt
	nDot
	nFrac
	nE
	nESign
	nExp
)

// NumSpec constrains a number.
//
// A number whose multipleOf is an integer (every integer schema) is
// written as an integer: no fraction, no exponent, so that it decodes into
// an integer type. Integer bounds that fit in int64 arithmetic (see
// prepare) are followed without big.Rat or text, at the cost of an
// unbounded integer.
type NumSpec struct {
	Lo, Hi *big.Rat // nil: unbounded
	// LoExclusive and HiExclusive make the bounds exclusive.
	LoExclusive, HiExclusive bool
	MultipleOf               *big.Rat // nil: any; integer is 1
	// Free means no constraint at all: no text is tracked.
	Free bool
	// IntOnly means the only constraint is being an integer: the text is
	// not tracked.
	IntOnly bool

	// Set by prepare (NewMachine): integral means only integers are
	// written; fast that the bounds below stand for Lo, Hi and MultipleOf.
	integral, fast bool
	hasLo, hasHi   bool
	lo, hi, mult   int64 // inclusive integer bounds; mult >= 1
}

// maxFastBound bounds the integer bounds (and multipleOf) followed in
// int64: magnitudes up to ten times it cannot overflow.
const maxFastBound = 100_000_000_000_000_000 // 1e17

// prepare fills the derived fields of s; NewMachine calls it once per
// number node.
func (s *NumSpec) prepare() {
	s.integral = s.MultipleOf != nil && s.MultipleOf.IsInt()
	if !s.integral || s.Free || s.IntOnly {
		return
	}
	m := s.MultipleOf.Num()
	if !m.IsInt64() || m.Int64() < 1 || m.Int64() > math.MaxInt32 {
		return
	}
	s.mult = m.Int64()
	limit := big.NewInt(maxFastBound)
	if s.Lo != nil {
		// The least integer in the bound: ceil(Lo), or Lo+1 when exclusive.
		q, r := new(big.Int).DivMod(s.Lo.Num(), s.Lo.Denom(), new(big.Int))
		if r.Sign() != 0 || s.LoExclusive {
			q.Add(q, big.NewInt(1))
		}
		if q.CmpAbs(limit) > 0 {
			return
		}
		s.hasLo, s.lo = true, q.Int64()
	}
	if s.Hi != nil {
		// The greatest: floor(Hi), or Hi-1 when exclusive and integral.
		q, r := new(big.Int).DivMod(s.Hi.Num(), s.Hi.Denom(), new(big.Int))
		if r.Sign() == 0 && s.HiExclusive {
			q.Sub(q, big.NewInt(1))
		}
		if q.CmpAbs(limit) > 0 {
			return
		}
		s.hasHi, s.hi = true, q.Int64()
	}
	s.fast = true
}

// magRange returns the magnitudes a number of sign neg may have under the
// fast bounds: [lo, hi], hi < 0 for unbounded; ok false when none.
func (s *NumSpec) magRange(neg bool) (lo, hi int64, ok bool) {
	hi = -1
	if neg {
		// -M in [s.lo, s.hi]: M in [-s.hi, -s.lo].
		if s.hasHi && s.hi < 0 {
			lo = -s.hi
		}
		if s.hasLo {
			if s.lo > 0 {
				return 0, 0, false
			}
			hi = -s.lo
		}
	} else {
		if s.hasLo && s.lo > 0 {
			lo = s.lo
		}
		if s.hasHi {
			if s.hi < 0 {
				return 0, 0, false
			}
			hi = s.hi
		}
	}
	return lo, hi, hi < 0 || lo <= hi
}

// hasMultiple reports whether [a, b] (b < 0: unbounded) holds a multiple
// of m.
func hasMultiple(a, b, m int64) bool {
	if b < 0 {
		return true
	}
	if a > b {
		return false
	}
	first := (a + m - 1) / m * m
	return first <= b
}

// fastLive reports whether some completion of an integer prefix can
// satisfy the fast bounds: sign neg, phase ph, magnitude d so far (sat:
// it went past maxFastBound).
func (s *NumSpec) fastLive(neg bool, ph uint8, d uint64, sat bool) bool {
	lo, hi, ok := s.magRange(neg)
	if !ok {
		return false
	}
	switch ph {
	case nStart, nMinus:
		return hasMultiple(lo, hi, s.mult)
	case nZero:
		return lo == 0
	}
	if sat {
		return hi < 0
	}
	// Completions of d: [d*10^j, (d+1)*10^j - 1] for j >= 0.
	a, w := int64(d), int64(1)
	for {
		b := a + w - 1
		if hi >= 0 && a > hi {
			return false
		}
		if hi < 0 && a >= lo {
			return true // past every finite bound, and as wide as needed
		}
		x, y := a, b
		if x < lo {
			x = lo
		}
		if hi >= 0 && y > hi {
			y = hi
		}
		if x <= y && hasMultiple(x, y, s.mult) {
			return true
		}
		a, w = a*10, w*10
	}
}

// fastAccepts reports whether the complete integer (sign neg, magnitude d,
// remainder rem modulo mult, sat past maxFastBound) satisfies the bounds.
func (s *NumSpec) fastAccepts(neg bool, d uint64, rem int32, sat bool) bool {
	lo, hi, ok := s.magRange(neg)
	if !ok || rem != 0 {
		return false
	}
	if sat {
		return hi < 0
	}
	return int64(d) >= lo && (hi < 0 || int64(d) <= hi)
}

// numComplete reports whether phase ph ends a number.
func numComplete(ph uint8) bool {
	return ph == nZero || ph == nInt || ph == nFrac || ph == nExp
}

// numNext returns the phase after byte c, or 255 when c cannot continue a
// number in phase ph (allowExp: exponents allowed).
func numNext(ph uint8, c byte, allowExp bool) uint8 {
	digit := c >= '0' && c <= '9'
	switch ph {
	case nStart:
		switch {
		case c == '-':
			return nMinus
		case c == '0':
			return nZero
		case digit:
			return nInt
		}
	case nMinus:
		switch {
		case c == '0':
			return nZero
		case digit:
			return nInt
		}
	case nZero, nInt:
		switch {
		case digit && ph == nInt:
			return nInt
		case c == '.':
			return nDot
		case (c == 'e' || c == 'E') && allowExp:
			return nE
		}
	case nDot:
		if digit {
			return nFrac
		}
	case nFrac:
		switch {
		case digit:
			return nFrac
		case (c == 'e' || c == 'E') && allowExp:
			return nE
		}
	case nE:
		switch {
		case c == '+' || c == '-':
			return nESign
		case digit:
			return nExp
		}
	case nESign, nExp:
		if digit {
			return nExp
		}
	}
	return 255
}

// ratInterval is an interval of rationals; a nil end is infinite.
type ratInterval struct {
	lo, hi     *big.Rat
	loEx, hiEx bool
}

var ratTen = big.NewRat(10, 1)

// completions returns the intervals that completions of the number text txt
// (in phase ph, no exponent) cover, or nil with all=true when any number
// is possible. The union may be long for an integer prefix: it stops once
// the intervals start past hi, and after maxNumLen digits.
func (s *NumSpec) completions(txt string, ph uint8) (iv []ratInterval, all bool) {
	neg := strings.HasPrefix(txt, "-")
	body := strings.TrimPrefix(txt, "-")
	mirror := func(in []ratInterval) []ratInterval {
		if !neg {
			return in
		}
		out := make([]ratInterval, len(in))
		for i, x := range in {
			var lo, hi *big.Rat
			if x.hi != nil {
				lo = new(big.Rat).Neg(x.hi)
			}
			if x.lo != nil {
				hi = new(big.Rat).Neg(x.lo)
			}
			out[i] = ratInterval{lo: lo, hi: hi, loEx: x.hiEx, hiEx: x.loEx}
		}
		return out
	}
	switch ph {
	case nStart:
		return nil, true
	case nMinus:
		return []ratInterval{{lo: nil, hi: new(big.Rat)}}, false
	case nZero:
		// 0, or 0.xxx: [0, 1) (mirrored for -0).
		return mirror([]ratInterval{{lo: new(big.Rat), hi: big.NewRat(1, 1), hiEx: true}}), false
	case nDot, nFrac:
		dot := strings.IndexByte(body, '.')
		base, _ := new(big.Rat).SetString(body[:len(body)-boolInt(ph == nDot)])
		if base == nil {
			base = new(big.Rat)
		}
		k := len(body) - dot - 1
		width := new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(k)), nil))
		return mirror([]ratInterval{{lo: base, hi: new(big.Rat).Add(base, width), hiEx: true}}), false
	case nInt:
		d, _ := new(big.Rat).SetString(body)
		d1 := new(big.Rat).Add(d, big.NewRat(1, 1))
		var bound *big.Rat // largest magnitude worth considering
		if neg {
			if s.Lo != nil {
				bound = new(big.Rat).Abs(s.Lo)
			}
		} else if s.Hi != nil {
			bound = new(big.Rat).Abs(s.Hi)
		}
		if bound == nil {
			// The union grows without limit on the side nothing bounds:
			// large enough completions satisfy every other constraint.
			return nil, true
		}
		for j := 0; len(body)+j <= maxNumLen && d.Cmp(bound) <= 0; j++ {
			iv = append(iv, ratInterval{lo: new(big.Rat).Set(d), hi: new(big.Rat).Set(d1), hiEx: true})
			d.Mul(d, ratTen)
			d1.Mul(d1, ratTen)
		}
		return mirror(iv), false
	}
	return nil, true
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// live reports whether some completion of txt (phase ph) satisfies s.
func (s *NumSpec) live(txt string, ph uint8) bool {
	if s.Free {
		return true
	}
	iv, all := s.completions(txt, ph)
	if all {
		return true
	}
	for _, x := range iv {
		if s.intervalHas(x) {
			return true
		}
	}
	return false
}

// within reports whether every completion of txt (phase ph, no exponent)
// satisfies s, so that nothing after it needs checking: s has no
// multipleOf and the completions lie inside its bounds. The completions
// of a magnitude prefix span [lo, hi) (hi nil: unbounded); of a negative
// one, (-hi, -lo].
func (s *NumSpec) within(txt string, ph uint8) bool {
	if s.Free {
		return true
	}
	if s.MultipleOf != nil {
		return false
	}
	neg := strings.HasPrefix(txt, "-")
	body := strings.TrimPrefix(txt, "-")
	var lo, hi *big.Rat
	switch ph {
	case nZero:
		lo, hi = new(big.Rat), big.NewRat(1, 1)
	case nInt:
		if lo, _ = new(big.Rat).SetString(body); lo == nil {
			return false
		}
	case nDot, nFrac:
		iv, all := s.completions(body, ph)
		if all || len(iv) != 1 {
			return false
		}
		lo, hi = iv[0].lo, iv[0].hi
	default:
		return false
	}
	// inf and sup of the values (nil: infinite), and whether each is one
	// of them.
	inf, infIn, sup, supIn := lo, true, hi, false
	if neg {
		inf, infIn, sup, supIn = nil, false, new(big.Rat).Neg(lo), true
		if hi != nil {
			inf = new(big.Rat).Neg(hi)
		}
	}
	if s.Lo != nil {
		if inf == nil {
			return false
		}
		if c := inf.Cmp(s.Lo); c < 0 || c == 0 && infIn && s.LoExclusive {
			return false
		}
	}
	if s.Hi != nil {
		if sup == nil {
			return false
		}
		if c := sup.Cmp(s.Hi); c > 0 || c == 0 && supIn && s.HiExclusive {
			return false
		}
	}
	return true
}

// intervalHas reports whether x, cut to s's bounds, holds a number that is
// a multiple of s.mult (when set).
func (s *NumSpec) intervalHas(x ratInterval) bool {
	lo, loEx := x.lo, x.loEx
	if s.Lo != nil && (lo == nil || s.Lo.Cmp(lo) > 0 || s.Lo.Cmp(lo) == 0 && s.LoExclusive) {
		lo, loEx = s.Lo, s.LoExclusive
	}
	hi, hiEx := x.hi, x.hiEx
	if s.Hi != nil && (hi == nil || s.Hi.Cmp(hi) < 0 || s.Hi.Cmp(hi) == 0 && s.HiExclusive) {
		hi, hiEx = s.Hi, s.HiExclusive
	}
	if lo != nil && hi != nil {
		c := lo.Cmp(hi)
		if c > 0 || c == 0 && (loEx || hiEx) {
			return false
		}
	}
	if s.MultipleOf == nil {
		return true
	}
	if lo == nil || hi == nil {
		return true
	}
	// The least multiple k*m at or after lo.
	q := new(big.Rat).Quo(lo, s.MultipleOf)
	k := new(big.Int).Quo(q.Num(), q.Denom()) // truncates toward zero
	kr := new(big.Rat).SetInt(k)
	if kr.Cmp(q) < 0 || kr.Cmp(q) == 0 && loEx {
		k.Add(k, big.NewInt(1))
	}
	x0 := new(big.Rat).Mul(new(big.Rat).SetInt(k), s.MultipleOf)
	c := x0.Cmp(hi)
	return c < 0 || c == 0 && !hiEx
}

// accepts reports whether the complete number text txt satisfies s.
func (s *NumSpec) accepts(txt string) bool {
	if s.Free {
		return true
	}
	v, ok := new(big.Rat).SetString(txt)
	if !ok {
		return false
	}
	if s.Lo != nil {
		c := v.Cmp(s.Lo)
		if c < 0 || c == 0 && s.LoExclusive {
			return false
		}
	}
	if s.Hi != nil {
		c := v.Cmp(s.Hi)
		if c > 0 || c == 0 && s.HiExclusive {
			return false
		}
	}
	if s.MultipleOf != nil {
		q := new(big.Rat).Quo(v, s.MultipleOf)
		if !q.IsInt() {
			return false
		}
	}
	return true
}

// Satisfiable reports whether some number satisfies s.
func (s *NumSpec) Satisfiable() bool {
	return s.intervalHas(ratInterval{})
}

// RatLCM returns the least positive rational that is a multiple of a and b
// (both positive).
func RationalLCM(a, b *big.Rat) *big.Rat {
	// lcm(p/q, r/s) = lcm(p, r) / gcd(q, s) for fractions in lowest terms.
	num := new(big.Int).Mul(a.Num(), b.Num())
	g := new(big.Int).GCD(nil, nil, a.Num(), b.Num())
	num.Quo(num, g)
	den := new(big.Int).GCD(nil, nil, a.Denom(), b.Denom())
	return new(big.Rat).SetFrac(num, den)
}
