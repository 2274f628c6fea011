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
// an interval).
//
// A number takes no more digits than the types it is read into hold
// exactly, unless its schema needs more:
//
//   - an integer (a number whose multipleOf is an integer: every
//     "type": "integer") is an int64, -9223372036854775808 to
//     9223372036854775807;
//   - any other number has at most 17 digits, its integer part and its
//     fraction together (the lone 0 of "0.5" does not count), and a free
//     one (no bounds, no multipleOf) an exponent of at most 2 digits: 17
//     significant digits write any float64 so that it reads back the same
//     (its shortest round-trip form; leading zeros of a fraction count,
//     so a small number without exponent keeps fewer significant
//     digits), and such an exponent keeps the value a finite, normal
//     float64. A fraction of 38 zeros is refused.
//
// When the bounds and multipleOf leave no number within these, the
// digits grow to the fewest that leave one, up to maxDigits (an integer
// then has at most that many digits: minimum 1e20 gives 21, a number
// between 0 and 1e-20 exclusive 21); past that no number satisfies the
// spec (Satisfiable). The completions of a prefix are those within the
// digits, so a prefix whose every completion within them breaks a bound is
// dead: under exclusiveMinimum 0, "0." and 16 zeros takes a non-zero
// digit, never a 17th zero that would leave it no way to end.

const (
	// intDigits is the most digits an int64 has.
	intDigits = 19
	// floatDigits bounds the digits of a number that is not an integer.
	floatDigits = 17
	// expDigits bounds the exponent of a free number.
	expDigits = 2
	// maxDigits bounds the digits a schema's bounds may need.
	maxDigits = 38
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
// an integer type. Integers whose bounds fit in int64 (the default range
// does, see prepare) are followed without big.Rat or text.
type NumSpec struct {
	Lo, Hi *big.Rat // nil: unbounded
	// LoExclusive and HiExclusive make the bounds exclusive.
	LoExclusive, HiExclusive bool
	MultipleOf               *big.Rat // nil: any; integer is 1
	// Free means no constraint at all: no text is tracked.
	Free bool

	// Set by prepare (NewMachine): integral means only integers are
	// written; ok that some number within digits satisfies the spec;
	// digits bounds the digits a number takes (the integer part and the
	// fraction, see above); elo and ehi are Lo and Hi, cut for an integer
	// to the range its digits allow; grid[e] (not for integers) is what a
	// number satisfying MultipleOf with at most e fraction digits is a
	// multiple of; minusLive that a negative number satisfies the spec
	// (the completions of "-", asked once); fast that lo, hi and mult
	// stand for the bounds and MultipleOf.
	integral, ok, minusLive, fast bool
	digits                        int32
	elo, ehi                      *big.Rat
	eloEx, ehiEx                  bool
	grid                          []*big.Rat
	lo, hi, mult                  int64 // inclusive integer bounds; mult >= 1
}

// tenPow[e] is 10^e and fracUnit[e] 10^-e, for e up to maxDigits.
var tenPow, fracUnit = func() (p, u []*big.Rat) {
	x := big.NewInt(1)
	for e := 0; e <= maxDigits; e++ {
		p = append(p, new(big.Rat).SetInt(x))
		u = append(u, new(big.Rat).SetFrac(big.NewInt(1), x))
		x = new(big.Int).Mul(x, big.NewInt(10))
	}
	return p, u
}()

var (
	minInt64Rat = new(big.Rat).SetInt64(math.MinInt64)
	maxInt64Rat = new(big.Rat).SetInt64(math.MaxInt64)
)

// prepare fills the derived fields of s: the digits it may take and what
// follows from them. NewMachine calls it once per number node; it may be
// called again.
func (s *NumSpec) prepare() {
	s.integral = s.MultipleOf != nil && s.MultipleOf.IsInt()
	s.ok, s.fast, s.grid = false, false, nil
	s.elo, s.eloEx, s.ehi, s.ehiEx = s.Lo, s.LoExclusive, s.Hi, s.HiExclusive
	switch {
	case s.Free:
		s.digits, s.ok = floatDigits, true
	case s.integral:
		// The int64 range, or the fewest digits that hold a number of s.
		s.digits = intDigits
		s.cutTo(minInt64Rat, maxInt64Rat)
		s.ok = s.intervalHas(ratInterval{})
		for d := intDigits + 1; !s.ok && d <= maxDigits; d++ {
			top := new(big.Rat).Sub(tenPow[d], tenPow[0])
			s.digits = int32(d)
			s.cutTo(new(big.Rat).Neg(top), top)
			s.ok = s.intervalHas(ratInterval{})
		}
		if s.ok {
			s.prepareFast()
		}
	default:
		for d := floatDigits; !s.ok && d <= maxDigits; d++ {
			s.digits = int32(d)
			s.growGrid()
			s.ok = s.anyNumber()
		}
	}
	s.minusLive = false
	if s.ok && !s.Free {
		s.completions("-", nMinus, func(x ratInterval) bool {
			s.minusLive = s.intervalHas(x)
			return !s.minusLive
		})
	}
}

// cutTo cuts the bounds of s to [lo, hi] (inclusive).
func (s *NumSpec) cutTo(lo, hi *big.Rat) {
	s.elo, s.eloEx = lo, false
	if s.Lo != nil && s.Lo.Cmp(lo) >= 0 {
		s.elo, s.eloEx = s.Lo, s.LoExclusive
	}
	s.ehi, s.ehiEx = hi, false
	if s.Hi != nil && s.Hi.Cmp(hi) <= 0 {
		s.ehi, s.ehiEx = s.Hi, s.HiExclusive
	}
}

// growGrid extends s.grid up to s.digits fraction digits.
func (s *NumSpec) growGrid() {
	if s.MultipleOf == nil {
		s.grid = fracUnit[: s.digits+1 : s.digits+1]
		return
	}
	for e := len(s.grid); e <= int(s.digits); e++ {
		s.grid = append(s.grid, RationalLCM(s.MultipleOf, fracUnit[e]))
	}
}

// anyNumber reports whether some number within s.digits satisfies s.
func (s *NumSpec) anyNumber() bool {
	for _, x := range s.classes() {
		if s.intervalHas(x) || s.intervalHas(x.neg()) {
			return true
		}
	}
	return false
}

// prepareFast puts an integer spec whose bounds and multipleOf fit in
// int64 on the fast path.
func (s *NumSpec) prepareFast() {
	m := s.MultipleOf.Num()
	if !m.IsInt64() || m.Int64() < 1 || m.Int64() > math.MaxInt32 {
		return
	}
	// The least integer in the bounds: ceil(elo), or elo+1 when exclusive
	// and integral; the greatest: floor(ehi), or ehi-1.
	lo, r := new(big.Int).DivMod(s.elo.Num(), s.elo.Denom(), new(big.Int))
	if r.Sign() != 0 || s.eloEx {
		lo.Add(lo, big.NewInt(1))
	}
	hi, r := new(big.Int).DivMod(s.ehi.Num(), s.ehi.Denom(), new(big.Int))
	if r.Sign() == 0 && s.ehiEx {
		hi.Sub(hi, big.NewInt(1))
	}
	if !lo.IsInt64() || !hi.IsInt64() {
		return
	}
	s.mult, s.lo, s.hi = m.Int64(), lo.Int64(), hi.Int64()
	s.fast = true
}

// magRange returns the magnitudes [lo, hi] a number of sign neg may have
// under the fast bounds; ok false when none.
func (s *NumSpec) magRange(neg bool) (lo, hi uint64, ok bool) {
	if neg {
		// -M in [s.lo, s.hi]: M in [-s.hi, -s.lo].
		if s.lo > 0 {
			return 0, 0, false
		}
		hi = -uint64(s.lo) // |s.lo|, MinInt64 included
		if s.hi < 0 {
			lo = -uint64(s.hi)
		}
	} else {
		if s.hi < 0 {
			return 0, 0, false
		}
		hi = uint64(s.hi)
		if s.lo > 0 {
			lo = uint64(s.lo)
		}
	}
	return lo, hi, lo <= hi
}

// hasMultiple reports whether [a, b] (a <= b <= 2^63) holds a multiple of
// m.
func hasMultiple(a, b, m uint64) bool {
	return (a+m-1)/m*m <= b
}

// fastLive reports whether some completion of an integer prefix can
// satisfy the fast bounds: sign neg, phase ph, magnitude d so far.
func (s *NumSpec) fastLive(neg bool, ph uint8, d uint64) bool {
	lo, hi, ok := s.magRange(neg)
	if !ok {
		return false
	}
	m := uint64(s.mult)
	switch ph {
	case nStart, nMinus:
		return hasMultiple(lo, hi, m)
	case nZero:
		return lo == 0
	}
	// Completions of d (>= 1): [d*10^j, (d+1)*10^j - 1] for j >= 0, up to
	// hi; w = 10^j <= a, so nothing overflows.
	for a, w := d, uint64(1); a <= hi; a, w = a*10, w*10 {
		x, y := max(a, lo), hi
		if w-1 <= hi-a {
			y = a + w - 1
		}
		if x <= y && hasMultiple(x, y, m) {
			return true
		}
		if a > hi/10 {
			break
		}
	}
	return false
}

// fastAccepts reports whether the complete integer (sign neg, magnitude d,
// remainder rem modulo mult) satisfies the bounds.
func (s *NumSpec) fastAccepts(neg bool, d uint64, rem int32) bool {
	lo, hi, ok := s.magRange(neg)
	return ok && rem == 0 && d >= lo && d <= hi
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

// ratInterval is an interval of rationals; a nil end is infinite. step,
// when set, is what the numbers of the interval that count are multiples
// of (the fraction digits they have left, and MultipleOf); nil means
// MultipleOf.
type ratInterval struct {
	lo, hi     *big.Rat
	loEx, hiEx bool
	step       *big.Rat
}

// neg returns the interval of the negated numbers.
func (x ratInterval) neg() ratInterval {
	var lo, hi *big.Rat
	if x.hi != nil {
		lo = new(big.Rat).Neg(x.hi)
	}
	if x.lo != nil {
		hi = new(big.Rat).Neg(x.lo)
	}
	return ratInterval{lo: lo, hi: hi, loEx: x.hiEx, hiEx: x.loEx, step: x.step}
}

var ratTen = big.NewRat(10, 1)

// fracStep returns the step of the completions of a number of s with n
// integer digits: the fraction digits it has left, with MultipleOf (nil
// for an integer: MultipleOf alone).
func (s *NumSpec) fracStep(n int) *big.Rat {
	if s.integral {
		return nil
	}
	return s.grid[int(s.digits)-n]
}

// classes returns the non-negative numbers of s within its digits: for an
// integer [0, ∞) (its bounds are finite); otherwise one interval per count
// m of integer digits, [0, 1) then [10^(m-1), 10^m), each with the
// fraction digits left.
func (s *NumSpec) classes() []ratInterval {
	if s.integral {
		return []ratInterval{{lo: new(big.Rat)}}
	}
	iv := []ratInterval{{lo: new(big.Rat), hi: tenPow[0], hiEx: true, step: s.fracStep(0)}}
	for m := 1; m <= int(s.digits); m++ {
		iv = append(iv, ratInterval{lo: tenPow[m-1], hi: tenPow[m], hiEx: true, step: s.fracStep(m)})
	}
	return iv
}

// fracRange returns the value of the text body (unsigned, with a point:
// phase nDot or nFrac), the width of its completions (10^-k for k
// fraction digits) and the digits of its integer part.
func fracRange(body string) (base, width *big.Rat, n int) {
	ip, frac, _ := strings.Cut(body, ".")
	if base, _ = new(big.Rat).SetString(body); base == nil {
		base = new(big.Rat)
	}
	if ip != "0" {
		n = len(ip)
	}
	return base, fracUnit[min(len(frac), maxDigits)], n
}

// completions calls yield with the intervals that completions of the
// number text txt (in phase ph, no exponent) within the digits of s
// cover, until it returns false; all is true, and yield not called, when
// any number of s is possible. An integer prefix yields one interval per
// count of digits it may grow to, up to the far bound.
func (s *NumSpec) completions(txt string, ph uint8, yield func(ratInterval) bool) (all bool) {
	neg := strings.HasPrefix(txt, "-")
	body := strings.TrimPrefix(txt, "-")
	sign := func(x ratInterval) ratInterval {
		if neg {
			return x.neg()
		}
		return x
	}
	switch ph {
	case nStart:
		return true // prepare made sure some number satisfies s
	case nMinus:
		for _, x := range s.classes() {
			if !yield(x.neg()) {
				break
			}
		}
	case nZero:
		// 0, or 0.xxx: [0, 1) (mirrored for -0).
		yield(sign(ratInterval{lo: new(big.Rat), hi: tenPow[0], hiEx: true, step: s.fracStep(0)}))
	case nDot, nFrac:
		base, width, n := fracRange(body)
		yield(sign(ratInterval{lo: base, hi: new(big.Rat).Add(base, width), hiEx: true, step: s.fracStep(n)}))
	case nInt:
		d, _ := new(big.Rat).SetString(body)
		d1 := new(big.Rat).Add(d, tenPow[0])
		bound := s.ehi // largest magnitude worth considering
		if neg {
			bound = s.elo
		}
		if bound != nil {
			bound = new(big.Rat).Abs(bound)
		}
		for j := 0; len(body)+j <= int(s.digits) && (bound == nil || d.Cmp(bound) <= 0); j++ {
			x := ratInterval{lo: new(big.Rat).Set(d), hi: new(big.Rat).Set(d1), hiEx: true, step: s.fracStep(len(body) + j)}
			if !yield(sign(x)) {
				break
			}
			d.Mul(d, ratTen)
			d1.Mul(d1, ratTen)
		}
	default:
		return true
	}
	return false
}

// live reports whether some completion of txt (phase ph) within the
// digits of s satisfies s.
func (s *NumSpec) live(txt string, ph uint8) bool {
	if s.Free {
		return true
	}
	if ph == nMinus {
		return s.minusLive // asked once, by prepare
	}
	found := false
	all := s.completions(txt, ph, func(x ratInterval) bool {
		found = s.intervalHas(x)
		return !found
	})
	return all || found
}

// within reports whether every completion of txt (phase ph, no exponent)
// satisfies s, so that nothing after it needs checking but its digits: s
// has no multipleOf and the completions lie inside its bounds. The
// completions of a magnitude prefix span [lo, hi) (hi nil: unbounded); of
// a negative one, (-hi, -lo].
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
		lo, hi = new(big.Rat), tenPow[0]
	case nInt:
		if lo, _ = new(big.Rat).SetString(body); lo == nil {
			return false
		}
	case nDot, nFrac:
		base, width, _ := fracRange(body)
		lo, hi = base, new(big.Rat).Add(base, width)
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
	if s.elo != nil {
		if inf == nil {
			return false
		}
		if c := inf.Cmp(s.elo); c < 0 || c == 0 && infIn && s.eloEx {
			return false
		}
	}
	if s.ehi != nil {
		if sup == nil {
			return false
		}
		if c := sup.Cmp(s.ehi); c > 0 || c == 0 && supIn && s.ehiEx {
			return false
		}
	}
	return true
}

// intervalHas reports whether x, cut to the bounds of s, holds a number
// that is a multiple of its step (MultipleOf when it has none).
func (s *NumSpec) intervalHas(x ratInterval) bool {
	lo, loEx := x.lo, x.loEx
	if s.elo != nil && (lo == nil || s.elo.Cmp(lo) > 0 || s.elo.Cmp(lo) == 0 && s.eloEx) {
		lo, loEx = s.elo, s.eloEx
	}
	hi, hiEx := x.hi, x.hiEx
	if s.ehi != nil && (hi == nil || s.ehi.Cmp(hi) < 0 || s.ehi.Cmp(hi) == 0 && s.ehiEx) {
		hi, hiEx = s.ehi, s.ehiEx
	}
	if lo != nil && hi != nil {
		c := lo.Cmp(hi)
		if c > 0 || c == 0 && (loEx || hiEx) {
			return false
		}
	}
	step := s.MultipleOf
	if x.step != nil {
		step = x.step
	}
	if step == nil || lo == nil || hi == nil {
		return true
	}
	// The least multiple k*step at or after lo: lo itself, most often.
	q := new(big.Rat).Quo(lo, step)
	if q.IsInt() && !loEx {
		return true
	}
	k := new(big.Int).Quo(q.Num(), q.Denom()) // truncates toward zero
	kr := new(big.Rat).SetInt(k)
	if kr.Cmp(q) < 0 || kr.Cmp(q) == 0 && loEx {
		k.Add(k, big.NewInt(1))
	}
	x0 := new(big.Rat).Mul(new(big.Rat).SetInt(k), step)
	c := x0.Cmp(hi)
	return c < 0 || c == 0 && !hiEx
}

// accepts reports whether the complete number text txt satisfies s (its
// digits are counted as it is read).
func (s *NumSpec) accepts(txt string) bool {
	if s.Free {
		return true
	}
	v, ok := new(big.Rat).SetString(txt)
	if !ok {
		return false
	}
	if s.elo != nil {
		c := v.Cmp(s.elo)
		if c < 0 || c == 0 && s.eloEx {
			return false
		}
	}
	if s.ehi != nil {
		c := v.Cmp(s.ehi)
		if c > 0 || c == 0 && s.ehiEx {
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

// Satisfiable reports whether some number satisfies s within the digits
// a number may take (at most maxDigits; see above).
func (s *NumSpec) Satisfiable() bool {
	c := *s
	c.prepare()
	return c.ok
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
