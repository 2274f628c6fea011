package grammar

import (
	"math/big"
	"math/rand"
	"strconv"
	"testing"
)

// TestFastIntegerAgreesWithRationals: the int64 path for bounded integers
// answers what the big.Rat path answers, for every prefix of every integer
// in a range, over random bounds, exclusivity and multipleOf.
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
		if s.Lo == nil && s.Hi == nil {
			s.Lo = big.NewRat(0, 1)
		}
		s.prepare()
		if !s.fast {
			t.Fatalf("spec %d not on the fast path", i)
		}
		for v := -700; v <= 700; v++ {
			txt := strconv.Itoa(v)
			neg := v < 0
			var d uint64
			ph := nStart
			for k := 0; k < len(txt); k++ {
				c := txt[k]
				ph = numNext(ph, c, false)
				if c != '-' {
					d = d*10 + uint64(c-'0')
				}
				fast := s.fastLive(neg, ph, d, false)
				slow := s.live(txt[:k+1], ph)
				if fast != slow {
					t.Fatalf("lo %v (ex %v) hi %v (ex %v) mult %v: prefix %q live fast %v, rationals %v",
						s.Lo, s.LoExclusive, s.Hi, s.HiExclusive, s.MultipleOf, txt[:k+1], fast, slow)
				}
			}
			rem := int32(d % uint64(s.mult))
			if fast, slow := s.fastAccepts(neg, d, rem, false), s.accepts(txt); fast != slow {
				t.Fatalf("lo %v hi %v mult %v: %s accepted fast %v, rationals %v", s.Lo, s.Hi, s.MultipleOf, txt, fast, slow)
			}
		}
	}
}

// TestFastIntegerLimits: bounds past 1e17, or a fractional multipleOf,
// stay on the rational path.
func TestFastIntegerLimits(t *testing.T) {
	t.Parallel()
	huge, _ := new(big.Rat).SetString("1000000000000000001")
	for _, s := range []*NumSpec{
		{Lo: big.NewRat(0, 1), Hi: huge, MultipleOf: big.NewRat(1, 1)},
		{Lo: big.NewRat(0, 1), MultipleOf: big.NewRat(1, 2)},
	} {
		s.prepare()
		if s.fast {
			t.Errorf("lo %v hi %v mult %v: on the fast path", s.Lo, s.Hi, s.MultipleOf)
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
