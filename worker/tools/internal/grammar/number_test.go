package grammar

import (
	"fmt"
	"math"
	"math/big"
	"math/rand"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/zerolayer/zerolayer/worker/tools/internal/limit"
)

// TestFastIntegerAgreesWithRationals: the int64 path for integers
// answers what the big.Rat path answers, for every prefix of every integer
// in a range and next to the ends of int64, over random bounds (or none),
// exclusivity and multipleOf.
func TestFastIntegerAgreesWithRationals(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(1))
	bound := func() *big.Rat {
		if rng.Intn(4) == 0 {
			return nil
		}
		if rng.Intn(3) == 0 {
			return big.NewRat(int64(rng.Intn(1200)-600), 2) // halves too
		}
		return big.NewRat(int64(rng.Intn(600)-300), 1)
	}
	for i := 0; i < 100; i++ {
		s := &NumSpec{Lo: bound(), Hi: bound(), LoExclusive: rng.Intn(2) == 0, HiExclusive: rng.Intn(2) == 0,
			MultipleOf: big.NewRat([]int64{1, 1, 2, 3, 7, 25}[rng.Intn(6)], 1)}
		s.prepare()
		if !s.ok {
			continue // no integer in the bounds: a KindNever node
		}
		if !s.fast {
			t.Fatalf("spec %d not on the fast path", i)
		}
		texts := []string{"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
			"9999999999999999999", "-9999999999999999999", "1000000000000000000"}
		for v := -700; v <= 700; v++ {
			texts = append(texts, strconv.Itoa(v))
		}
		for _, txt := range texts {
			neg := txt[0] == '-'
			var d uint64
			ph := nStart
			for k := 0; k < len(txt); k++ {
				c := txt[k]
				ph = numNext(ph, c, false)
				if c != '-' {
					d = d*10 + uint64(c-'0')
				}
				fast := s.fastLive(neg, ph, d)
				slow := s.live(txt[:k+1], ph)
				if fast != slow {
					t.Fatalf("lo %v (ex %v) hi %v (ex %v) mult %v: prefix %q live fast %v, rationals %v",
						s.Lo, s.LoExclusive, s.Hi, s.HiExclusive, s.MultipleOf, txt[:k+1], fast, slow)
				}
			}
			rem := int32(d % uint64(s.mult))
			if fast, slow := s.fastAccepts(neg, d, rem), s.accepts(txt); fast != slow {
				t.Fatalf("lo %v hi %v mult %v: %s accepted fast %v, rationals %v", s.Lo, s.Hi, s.MultipleOf, txt, fast, slow)
			}
		}
	}
}

// TestFastIntegerLimits: bounds past int64 that leave no int64 (so the
// digits grow), a multipleOf past int32 or a fractional one stay on the
// rational path; bounds past int64 that leave some are cut to it, fast.
func TestFastIntegerLimits(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s    *NumSpec
		fast bool
	}{
		{&NumSpec{Lo: ratOf(t, "1e20"), MultipleOf: big.NewRat(1, 1)}, false},
		{&NumSpec{Hi: ratOf(t, "-9223372036854775809"), MultipleOf: big.NewRat(1, 1)}, false},
		{&NumSpec{Lo: big.NewRat(0, 1), MultipleOf: big.NewRat(1, 2)}, false},
		{&NumSpec{MultipleOf: ratOf(t, "1e10")}, false},
		{&NumSpec{Lo: big.NewRat(0, 1), Hi: ratOf(t, "1e30"), MultipleOf: big.NewRat(1, 1)}, true},
		{&NumSpec{Lo: ratOf(t, "-1e30"), MultipleOf: big.NewRat(7, 1)}, true},
		{&NumSpec{MultipleOf: big.NewRat(1, 1)}, true},
	} {
		c.s.prepare()
		if c.s.fast != c.fast {
			t.Errorf("lo %v hi %v mult %v: on the fast path %v, want %v", c.s.Lo, c.s.Hi, c.s.MultipleOf, c.s.fast, c.fast)
		}
	}
}

// TestNumberWithin: when within says every completion of a prefix
// satisfies the spec, every number with that prefix is accepted (the
// frame then stops checking), over random decimal bounds.
func TestNumberWithin(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(2))
	bound := func() *big.Rat {
		switch rng.Intn(4) {
		case 0:
			return nil
		case 1:
			return big.NewRat(int64(rng.Intn(4000)-2000), 100)
		}
		return big.NewRat(int64(rng.Intn(60)-30), int64(1+rng.Intn(2)))
	}
	var nums []string
	for v := -400; v <= 400; v++ {
		nums = append(nums, strconv.Itoa(v))
	}
	for v := -3000; v <= 3000; v += 7 {
		nums = append(nums, strconv.FormatFloat(float64(v)/100, 'f', -1, 64), strconv.FormatFloat(float64(v)/1000, 'f', 3, 64))
	}
	nums = append(nums, "0", "-0", "0.0", "-0.5", "1234567", "-98765.4321")
	hits := 0
	for i := 0; i < 200; i++ {
		s := &NumSpec{Lo: bound(), Hi: bound(), LoExclusive: rng.Intn(2) == 0, HiExclusive: rng.Intn(2) == 0}
		s.prepare()
		for _, txt := range nums {
			ph := nStart
			for k := 0; k < len(txt); k++ {
				ph = numNext(ph, txt[k], false)
				if !s.within(txt[:k+1], ph) {
					continue
				}
				hits++
				if !s.live(txt[:k+1], ph) {
					t.Fatalf("lo %v (ex %v) hi %v (ex %v): prefix %q within but not live", s.Lo, s.LoExclusive, s.Hi, s.HiExclusive, txt[:k+1])
				}
				if !s.accepts(txt) {
					t.Fatalf("lo %v (ex %v) hi %v (ex %v): prefix %q within, %s refused", s.Lo, s.LoExclusive, s.Hi, s.HiExclusive, txt[:k+1], txt)
				}
			}
		}
	}
	if hits == 0 {
		t.Fatal("within never held")
	}
}

// numberRun returns a run whose whole document is one number of spec s
// (NewMachine prepares s).
func numberRun(s *NumSpec) *Run {
	n := &Node{Kind: KindNumber, Number: s}
	for _, c := range []byte("-0123456789") {
		n.SetFirst(c)
	}
	return NewRun(NewMachine(n, []*Node{n}, nil, nil, 8, Layout{}))
}

// feedText feeds text to r a byte at a time; false when a byte is refused.
func feedText(r *Run, text string) bool {
	for i := 0; i < len(text); i++ {
		if ok, err := r.Accept([]byte{text[i]}, limit.NewFuel(1<<40)); err != nil || !ok {
			return false
		}
	}
	return true
}

// numberAccepted reports whether text is a whole document of spec s.
func numberAccepted(s *NumSpec, text string) bool {
	r := numberRun(s)
	return feedText(r, text) && r.CanEnd()
}

func ratOf(t testing.TB, text string) *big.Rat {
	t.Helper()
	r, ok := new(big.Rat).SetString(text)
	if !ok {
		t.Fatalf("bad rational %q", text)
	}
	return r
}

// TestNumberExcludedBoundNoDeadEnd: a number equal to an excluded bound
// whose fraction grows a zero at a time (a sampled model wrote
// "0.00000000000000000000000000000000000000" under exclusiveMinimum 0 and
// the job failed: no token could continue) is refused the zero that would
// leave it no way to end; a non-zero digit can always follow.
func TestNumberExcludedBoundNoDeadEnd(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, prefix string
		s            *NumSpec
	}{
		{"exclusiveMinimum 0", "0.", &NumSpec{Lo: ratOf(t, "0"), LoExclusive: true}},
		{"exclusiveMaximum 0", "-0.", &NumSpec{Hi: ratOf(t, "0"), HiExclusive: true}},
		{"exclusiveMinimum 0, maximum 1", "0.", &NumSpec{Lo: ratOf(t, "0"), LoExclusive: true, Hi: ratOf(t, "1")}},
		{"exclusiveMinimum 2", "2.", &NumSpec{Lo: ratOf(t, "2"), LoExclusive: true}},
		{"exclusiveMaximum -3.5", "-3.5", &NumSpec{Hi: ratOf(t, "-3.5"), HiExclusive: true}},
		{"exclusiveMinimum 0, exclusiveMaximum 1e-20", "0.", &NumSpec{Lo: ratOf(t, "0"), LoExclusive: true,
			Hi: ratOf(t, "1e-20"), HiExclusive: true}},
	}
	for _, c := range cases {
		r := numberRun(c.s)
		if !feedText(r, c.prefix) {
			t.Fatalf("%s: %q refused", c.name, c.prefix)
		}
		text := c.prefix
		for len(text) < 200 && feedText(r.Clone(), "0") {
			feedText(r, "0")
			text += "0"
		}
		nonZero := false
		for d := byte('1'); d <= '9'; d++ {
			if feedText(r.Clone(), string(d)) {
				nonZero = true
			}
		}
		if !nonZero && !r.CanEnd() {
			t.Errorf("%s: %q (%d bytes) is a dead end: no digit may follow it and it cannot end", c.name, text, len(text))
		}
	}
}

// TestNumberDigitCaps: by default an integer is one an int64 holds, and
// any other number has at most 17 digits (a free one an exponent of at
// most 2), unless the schema's bounds leave no such number: then as few
// more digits as they need.
func TestNumberDigitCaps(t *testing.T) {
	t.Parallel()
	one := ratOf(t, "1")
	zeros38 := "0." + strings.Repeat("0", 38)
	cases := []struct {
		name string
		s    *NumSpec
		ok   []string
		not  []string
	}{
		{"integer", &NumSpec{MultipleOf: one},
			[]string{"0", "-0", "9223372036854775807", "-9223372036854775808", "1000000000000000000"},
			[]string{"9223372036854775808", "-9223372036854775809", "10000000000000000000",
				"9100000000000000000000000000000000000000", "5000000000000000000000000000000000000000"}},
		{"integer, minimum 0", &NumSpec{Lo: ratOf(t, "0"), MultipleOf: one},
			[]string{"9223372036854775807"}, []string{"9223372036854775808", "12345678901234567890"}},
		{"integer, maximum 1e30", &NumSpec{Lo: ratOf(t, "-5"), Hi: ratOf(t, "1e30"), MultipleOf: one},
			[]string{"9223372036854775807", "-5"}, []string{"9223372036854775808", "1000000000000000000000000000000"}},
		{"integer, multipleOf 1e10", &NumSpec{MultipleOf: ratOf(t, "1e10")},
			[]string{"9220000000000000000", "-9220000000000000000"}, []string{"9230000000000000000", "10000000000000000000"}},
		// Bounds past int64 need more digits: as few as they need.
		{"integer, minimum 1e20", &NumSpec{Lo: ratOf(t, "1e20"), MultipleOf: one},
			[]string{"100000000000000000000", "999999999999999999999"}, []string{"1000000000000000000000", "9223372036854775807"}},
		{"integer, exclusiveMaximum -1e20", &NumSpec{Hi: ratOf(t, "-1e20"), HiExclusive: true, MultipleOf: one},
			[]string{"-100000000000000000001"}, []string{"-100000000000000000000", "-1000000000000000000000"}},
		{"number", &NumSpec{Free: true},
			[]string{"0.12345678901234567", "12345678901234567", "1234567890.1234567", "0.00000000000000001", "-1.5e99", "1.5e-99", "1e+05", "2E7"},
			[]string{"0.123456789012345678", "123456789012345678", "1234567890.12345678", "0.000000000000000001", zeros38,
				"1e100", "1e005", "1.5e-100"}},
		{"number, minimum 0", &NumSpec{Lo: ratOf(t, "0")},
			[]string{"0.12345678901234567", "12345678901234567", "0.00000000000000000"},
			[]string{"0.123456789012345678", "123456789012345678", zeros38, "1e5"}},
		{"number, exclusiveMinimum 0", &NumSpec{Lo: ratOf(t, "0"), LoExclusive: true},
			[]string{"0.00000000000000001", "5"}, []string{"0.00000000000000000", "0.000000000000000001", zeros38}},
		{"number, multipleOf 0.25, maximum 1e16", &NumSpec{Hi: ratOf(t, "1e16"), MultipleOf: ratOf(t, "0.25")},
			[]string{"1234567890123456.5", "-1234567890123456.5", "-12345678901234567"}, []string{"1234567890123456.25", "-12345678901234567.5"}},
		{"number, multipleOf 1e-20, exclusiveMinimum 0", &NumSpec{Lo: ratOf(t, "0"), LoExclusive: true, MultipleOf: ratOf(t, "1e-20")},
			[]string{"0.00000000000000001", "0.5"}, []string{"0.00000000000000000001", "0.000000000000000002"}},
		// Between 0 and 1e-20 a number needs 21 digits.
		{"number, exclusiveMinimum 0, exclusiveMaximum 1e-20", &NumSpec{Lo: ratOf(t, "0"), LoExclusive: true, Hi: ratOf(t, "1e-20"), HiExclusive: true},
			[]string{"0.000000000000000000005", "0.000000000000000000009"}, []string{"0.0000000000000000000051", "0.00000000000000000001"}},
		{"number, minimum 1e20", &NumSpec{Lo: ratOf(t, "1e20")},
			[]string{"100000000000000000000", "999999999999999999999"}, []string{"100000000000000000000.5", "1000000000000000000000"}},
	}
	for _, c := range cases {
		for _, text := range c.ok {
			if !numberAccepted(c.s, text) {
				t.Errorf("%s: %s refused", c.name, text)
			}
		}
		for _, text := range c.not {
			if numberAccepted(c.s, text) {
				t.Errorf("%s: %s accepted", c.name, text)
			}
		}
	}
	// Up to maxDigits (38) digits; a spec that needs more is unsatisfiable
	// (the schema compiler makes it KindNever, a compile error).
	for _, c := range []struct {
		s  *NumSpec
		ok bool
	}{
		{&NumSpec{Lo: ratOf(t, "1e37"), MultipleOf: one}, true},
		{&NumSpec{Lo: ratOf(t, "1e38"), MultipleOf: one}, false},
		{&NumSpec{Lo: ratOf(t, "0"), LoExclusive: true, Hi: ratOf(t, "1e-37")}, true},
		{&NumSpec{Lo: ratOf(t, "0"), LoExclusive: true, Hi: ratOf(t, "1e-38"), HiExclusive: true}, false},
	} {
		if got := c.s.Satisfiable(); got != c.ok {
			t.Errorf("lo %v hi %v mult %v: satisfiable %v, want %v", c.s.Lo, c.s.Hi, c.s.MultipleOf, got, c.ok)
		}
	}
}

// numberForm matches a JSON number.
var numberForm = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// numberDigits counts the digits of a number's text the way the caps do:
// the integer part (a lone 0 not counted) and the fraction, then the
// exponent's.
func numberDigits(text string) (digits, exp int) {
	mant, e, _ := strings.Cut(strings.ToLower(strings.TrimPrefix(text, "-")), "e")
	ip, frac, _ := strings.Cut(mant, ".")
	if ip != "0" {
		digits = len(ip)
	}
	return digits + len(frac), len(strings.TrimLeft(e, "+-"))
}

// inSpec reports whether v satisfies the bounds and multipleOf of s.
func inSpec(s *NumSpec, v *big.Rat) bool {
	if s.Lo != nil {
		if c := v.Cmp(s.Lo); c < 0 || c == 0 && s.LoExclusive {
			return false
		}
	}
	if s.Hi != nil {
		if c := v.Cmp(s.Hi); c > 0 || c == 0 && s.HiExclusive {
			return false
		}
	}
	return s.MultipleOf == nil || new(big.Rat).Quo(v, s.MultipleOf).IsInt()
}

// int64Has reports whether an int64 satisfies s, whose multipleOf is an
// integer.
func int64Has(s *NumSpec) bool {
	lo, hi := big.NewInt(math.MinInt64), big.NewInt(math.MaxInt64)
	if s.Lo != nil {
		q, r := new(big.Int).DivMod(s.Lo.Num(), s.Lo.Denom(), new(big.Int)) // floor
		if r.Sign() != 0 || s.LoExclusive {
			q.Add(q, big.NewInt(1))
		}
		if q.Cmp(lo) > 0 {
			lo = q
		}
	}
	if s.Hi != nil {
		q, r := new(big.Int).DivMod(s.Hi.Num(), s.Hi.Denom(), new(big.Int))
		if r.Sign() == 0 && s.HiExclusive {
			q.Sub(q, big.NewInt(1))
		}
		if q.Cmp(hi) < 0 {
			hi = q
		}
	}
	m := s.MultipleOf.Num()
	first, r := new(big.Int).DivMod(lo, m, new(big.Int))
	if r.Sign() != 0 {
		first.Add(first, big.NewInt(1))
	}
	return first.Mul(first, m).Cmp(hi) <= 0
}

// numberAllowed says whether text should be a whole document of the
// prepared spec s: a JSON number in the form of s (an integer without
// fraction or exponent, an exponent only when free) that satisfies its
// bounds and multipleOf within its digits: an int64 for an integer, 17
// digits (and 2 of exponent) for any other number, unless s needs more
// (s.digits then).
func numberAllowed(s *NumSpec, text string) bool {
	if !numberForm.MatchString(text) {
		return false
	}
	frac, exp := strings.Contains(text, "."), strings.ContainsAny(text, "eE")
	if s.integral && (frac || exp) || !s.Free && exp {
		return false
	}
	v, ok := new(big.Rat).SetString(text)
	if !ok || !inSpec(s, v) {
		return false
	}
	digits, expDigits := numberDigits(text)
	if s.integral && int64Has(s) {
		return v.IsInt() && v.Num().IsInt64()
	}
	return digits <= int(s.digits) && expDigits <= 2
}

// randomNumber returns a random number text, most digits 0 or 9.
func randomNumber(rng *rand.Rand) string {
	digit := func() byte {
		switch rng.Intn(4) {
		case 0:
			return '0'
		case 1:
			return '9'
		}
		return byte('0' + rng.Intn(10))
	}
	var b []byte
	if rng.Intn(2) == 0 {
		b = append(b, '-')
	}
	if n := rng.Intn(24); n == 0 {
		b = append(b, '0')
	} else {
		b = append(b, byte('1'+rng.Intn(9)))
		for ; n > 1; n-- {
			b = append(b, digit())
		}
	}
	if rng.Intn(2) == 0 {
		b = append(b, '.')
		for n := 1 + rng.Intn(24); n > 0; n-- {
			b = append(b, digit())
		}
	}
	if rng.Intn(8) == 0 {
		b = append(b, "e+-"[rng.Intn(3)])
		if b[len(b)-1] == 'e' {
			b[len(b)-1] = 'E'
		} else {
			b = append(b[:len(b)-1], 'e', b[len(b)-1])
		}
		for n := 1 + rng.Intn(3); n > 0; n-- {
			b = append(b, digit())
		}
	}
	return string(b)
}

// decimalText writes v (a decimal of at most 40 fraction digits) as a
// JSON number.
func decimalText(v *big.Rat) string {
	s := v.FloatString(40)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		s = "0"
	}
	return s
}

// TestNumberRandomWalks walks the bytes a number may take at random
// (seeded), for random bounds (inclusive and exclusive, at and near zero,
// past int64 and float64 digits), multipleOf, integers or not: the walk
// never reaches a state that neither takes a byte nor ends (so every state
// it reaches is completed, by the rest of the walk), and every number it
// completes satisfies the bounds and the digit caps. Random numbers, and
// numbers next to the bounds, are accepted exactly when they do.
func TestNumberRandomWalks(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(38))
	named := []string{"0", "0", "1", "-1", "2.5", "-7", "0.1", "-0.35", "1e-20", "-1e-20", "5e-18", "1e-17", "123.456",
		"1e20", "-1e20", "9223372036854775807", "-9223372036854775808", "9223372036854775808", "1e16", "-99999999999999999"}
	mults := []string{"1", "3", "0.5", "0.01", "0.3", "1e-20", "1e10", "7", "2.5", "1e-17"}
	bound := func() *big.Rat {
		switch rng.Intn(3) {
		case 0:
			return nil
		case 1:
			return big.NewRat(int64(rng.Intn(20001)-10000), []int64{1, 10, 100, 1000}[rng.Intn(4)])
		}
		return ratOf(t, named[rng.Intn(len(named))])
	}
	const alphabet = "0123456789-.eE+"
	specs, walks, checked := 0, 0, 0
	for i := 0; i < 120; i++ {
		s := &NumSpec{Lo: bound(), Hi: bound(), LoExclusive: rng.Intn(2) == 0, HiExclusive: rng.Intn(2) == 0}
		switch rng.Intn(3) {
		case 0:
			s.MultipleOf = ratOf(t, mults[rng.Intn(len(mults))])
		case 1:
			s.MultipleOf = big.NewRat(1, 1)
		}
		if s.Lo != nil && s.Hi != nil && s.Lo.Cmp(s.Hi) > 0 {
			s.Lo, s.Hi = s.Hi, s.Lo
		}
		s.Free = s.Lo == nil && s.Hi == nil && s.MultipleOf == nil
		if !s.Satisfiable() {
			continue
		}
		specs++
		name := fmt.Sprintf("lo %v (ex %v) hi %v (ex %v) mult %v", s.Lo, s.LoExclusive, s.Hi, s.HiExclusive, s.MultipleOf)
		m := numberRun(s).m
		short := false // a number of at most 17 digits was completed
		for w := 0; w < 18; w++ {
			// Styles: any allowed byte; mostly the lowest (zeros, as a
			// model that likes them); mostly the highest digit.
			style := w % 3
			r := NewRun(m)
			text := ""
			for {
				var next []byte
				for _, c := range []byte(alphabet) {
					if feedText(r.Clone(), string(c)) {
						next = append(next, c)
					}
				}
				end := r.CanEnd()
				if len(next) == 0 && !end {
					t.Fatalf("%s: dead end after %q", name, text)
				}
				if len(next) == 0 || end && rng.Intn(8) == 0 {
					break
				}
				c := next[rng.Intn(len(next))]
				if rng.Intn(10) > 0 {
					switch style {
					case 1:
						c = next[0]
					case 2:
						for _, x := range next {
							if x <= '9' {
								c = x
							}
						}
					}
				}
				feedText(r, string(c))
				if text += string(c); len(text) > 64 {
					t.Fatalf("%s: %q runs on", name, text)
				}
			}
			walks++
			if !numberAllowed(s, text) {
				t.Fatalf("%s: walk completed %q, which breaks the bounds or the digit caps (digits %d)", name, text, s.digits)
			}
			if d, _ := numberDigits(text); d <= 17 {
				short = true
			}
		}
		if short && !s.integral && s.digits != 17 {
			t.Errorf("%s: %d digits allowed, but a number of 17 satisfies it", name, s.digits)
		}
		if s.integral && int64Has(s) && s.digits > 19 {
			t.Errorf("%s: %d digits allowed, but an int64 satisfies it", name, s.digits)
		}
		texts := []string{"0", "-0", "9223372036854775807", "-9223372036854775808", "9223372036854775808", "0.00000000000000001", "0.000000000000000001"}
		for k := 0; k < 60; k++ {
			texts = append(texts, randomNumber(rng))
		}
		for _, b := range []*big.Rat{s.Lo, s.Hi} {
			if b == nil {
				continue
			}
			for _, e := range []int64{0, 1, 2, 5, 16, 17, 18, 20, 21, 22} {
				step := new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Exp(big.NewInt(10), big.NewInt(e), nil))
				texts = append(texts, decimalText(b), decimalText(new(big.Rat).Add(b, step)), decimalText(new(big.Rat).Sub(b, step)))
			}
		}
		for _, text := range texts {
			checked++
			if got, want := numberAccepted(s, text), numberAllowed(s, text); got != want {
				t.Fatalf("%s: %s accepted %v, want %v (digits %d)", name, text, got, want, s.digits)
			}
		}
	}
	if specs < 80 {
		t.Fatalf("only %d satisfiable specs", specs)
	}
	t.Logf("%d specs, %d walks, %d numbers checked", specs, walks, checked)
}
