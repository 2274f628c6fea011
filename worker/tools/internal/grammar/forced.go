package grammar

import "slices"

// ProbeOrder is the bytes Forced tries, the likeliest to be allowed
// first, so that a position where several are allowed is found out after
// a few probes: JSON's punctuation, then letters, digits and the rest of
// printable ASCII, newline and tab. Other bytes are not tried: a forced
// run is a draft, verified by the model, so a byte left out costs at most
// a draft, never a wrong token.
var ProbeOrder = func() []byte {
	var b []byte
	seen := [256]bool{}
	add := func(s string) {
		for i := 0; i < len(s); i++ {
			if !seen[s[i]] {
				seen[s[i]] = true
				b = append(b, s[i])
			}
		}
	}
	add(`"eaoitnsrlcdu:,{}[]0123456789-.`)
	for c := byte(' '); c <= '~'; c++ {
		add(string(c))
	}
	add("\n\t")
	return b
}()

// Forced appends to dst the bytes that every output the grammar allows
// from here begins with, at most max of them: while exactly one byte can
// come next and the value cannot end before it, that byte. It leaves the
// run as it was.
func (r *Run) Forced(max int, dst []byte) []byte {
	cur := r.threads
	var work int64
	var nxt, only []thread
	for n := 0; n < max && len(cur) > 0; n++ {
		for _, th := range cur {
			if r.m.canEnd(th) {
				return dst
			}
		}
		found := -1
		for _, c := range ProbeOrder {
			nxt = nxt[:0]
			for _, th := range cur {
				nxt = r.m.step(th, c, nxt, &work)
			}
			if len(nxt) == 0 {
				continue
			}
			if found >= 0 {
				return dst // two bytes may come next
			}
			found = int(c)
			only = append(only[:0], nxt...)
		}
		if found < 0 {
			return dst
		}
		dst = append(dst, byte(found))
		cur = dedupe(slices.Clone(only))
		if len(cur) > r.m.maxThreads {
			return dst
		}
	}
	return dst
}
