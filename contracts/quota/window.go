package quota

import "sort"

// window is the length of the rate windows, in seconds.
const window = 60

// slot is what was admitted in one second of submit time.
type slot struct {
	sec  int64
	reqs int64
	toks int64
}

// slots holds a tenant's admissions per second of submit time, sorted by
// second. Jobs usually arrive in submit order (an append); a worker
// pulling several classes sees them a little out of order (an insert).
type slots []slot

// span returns the index range [lo, hi) of the seconds in the window
// ending at sec: (sec-60, sec].
func (s slots) span(sec int64) (lo, hi int) {
	lo = sort.Search(len(s), func(i int) bool { return s[i].sec > sec-window })
	hi = lo + sort.Search(len(s)-lo, func(i int) bool { return s[lo+i].sec > sec })
	return lo, hi
}

// sum returns the requests and tokens admitted in the window ending at
// sec.
func (s slots) sum(sec int64) (reqs, toks int64) {
	lo, hi := s.span(sec)
	for _, x := range s[lo:hi] {
		reqs += x.reqs
		toks += x.toks
	}
	return reqs, toks
}

// peak returns the most requests and the most tokens admitted in any
// 60-second window that holds sec: the windows ending at sec and at each
// later second admitted within a minute of it. A job judged by its own
// submit time must also fit the windows that end after it, which hold
// jobs submitted later but admitted earlier (a worker pulling several
// classes sees jobs slightly out of order).
func (s slots) peak(sec int64) (reqs, toks int64) {
	reqs, toks = s.sum(sec)
	_, hi := s.span(sec)
	for _, x := range s[hi:] {
		if x.sec >= sec+window {
			break
		}
		r, k := s.sum(x.sec)
		reqs, toks = max(reqs, r), max(toks, k)
	}
	return reqs, toks
}

// freeAt returns the second at which at least need units (of requests
// when toks is false, else of tokens) have left the window ending at sec,
// or false when the window does not hold that many.
func (s slots) freeAt(sec, need int64, toks bool) (int64, bool) {
	lo, hi := s.span(sec)
	var got int64
	for _, x := range s[lo:hi] {
		if toks {
			got += x.toks
		} else {
			got += x.reqs
		}
		if got >= need {
			return x.sec + window, true
		}
	}
	return 0, false
}

// add records reqs and toks at sec (negative to take back).
func (s *slots) add(sec, reqs, toks int64) {
	v := *s
	if n := len(v); n > 0 && v[n-1].sec == sec {
		v[n-1].reqs += reqs
		v[n-1].toks += toks
		return
	}
	i := sort.Search(len(v), func(i int) bool { return v[i].sec >= sec })
	if i < len(v) && v[i].sec == sec {
		v[i].reqs += reqs
		v[i].toks += toks
		return
	}
	v = append(v, slot{})
	copy(v[i+1:], v[i:])
	v[i] = slot{sec: sec, reqs: reqs, toks: toks}
	*s = v
}

// trim drops the seconds before oldest.
func (s *slots) trim(oldest int64) {
	v := *s
	i := sort.Search(len(v), func(i int) bool { return v[i].sec >= oldest })
	if i > 0 {
		*s = append(v[:0], v[i:]...)
	}
}
