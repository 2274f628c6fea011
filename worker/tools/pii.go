package tools

import (
	"fmt"
	"math/big"
	"regexp/syntax"
	"sort"
	"strings"

	"github.com/zerolayer/zerolayer/worker/tools/internal/automaton"
	"github.com/zerolayer/zerolayer/worker/tools/internal/limit"
)

// pii_redactor: the decoded text stream is scanned by detectors (a pattern,
// boundary rules and a checksum each) and matches are replaced by a label
// ("[EMAIL]") as the text streams. A detector run starts at every position
// where its pattern may start; text is emitted only up to the earliest
// position where some run is still alive or has a match that a longer one
// may replace, so what is held back is exactly what could still become a
// match (bounded by the longest entity). Leftmost match wins, then the
// longest. At the end everything is decided and flushed. When a run would
// hold back more than the budget allows, the held text is redacted (fails
// closed); on a step-budget error nothing more is emitted.

// detectorDef describes one kind of entity.
type detectorDef struct {
	label   string
	pattern string
	maxLen  int // longest match in bytes; 0: the hold-back budget
	startOK func(prev byte, atStart bool) bool
	endOK   func(next byte, atEnd bool) bool
	check   func(match []byte) bool
}

type piiSpec struct {
	defs []detectorDef
	dfas []*automaton.DFA
	mem  *limit.Meter
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

func isAlnum(b byte) bool { return isDigit(b) || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }

func notDigitBefore(prev byte, atStart bool) bool { return atStart || !isDigit(prev) }
func notDigitAfter(next byte, atEnd bool) bool    { return atEnd || !isDigit(next) }
func notAlnumBefore(prev byte, atStart bool) bool { return atStart || !isAlnum(prev) }
func notAlnumAfter(next byte, atEnd bool) bool    { return atEnd || !isAlnum(next) }

func digitsOf(b []byte) []byte {
	var d []byte
	for _, c := range b {
		if isDigit(c) {
			d = append(d, c)
		}
	}
	return d
}

// luhn reports whether the digits of b pass the Luhn checksum.
func luhn(b []byte) bool {
	d := digitsOf(b)
	if len(d) < 13 || len(d) > 19 {
		return false
	}
	sum := 0
	for i := len(d) - 1; i >= 0; i-- {
		v := int(d[i] - '0')
		if (len(d)-1-i)%2 == 1 {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
	}
	return sum%10 == 0
}

// ibanOK checks the ISO 13616 mod-97 checksum.
func ibanOK(b []byte) bool {
	var s []byte
	for _, c := range b {
		if c != ' ' {
			s = append(s, c)
		}
	}
	if len(s) < 15 || len(s) > 34 {
		return false
	}
	s = append(s[4:], s[:4]...)
	var num strings.Builder
	for _, c := range s {
		switch {
		case isDigit(c):
			num.WriteByte(c)
		case c >= 'A' && c <= 'Z':
			fmt.Fprintf(&num, "%d", int(c-'A')+10)
		default:
			return false
		}
	}
	n, ok := new(big.Int).SetString(num.String(), 10)
	return ok && new(big.Int).Mod(n, big.NewInt(97)).Int64() == 1
}

// cnIDOK checks the GB 11643 check character of an 18-character Chinese
// resident identity number.
func cnIDOK(b []byte) bool {
	if len(b) != 18 {
		return false
	}
	w := [17]int{7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2}
	sum := 0
	for i := 0; i < 17; i++ {
		if !isDigit(b[i]) {
			return false
		}
		sum += int(b[i]-'0') * w[i]
	}
	want := "10X98765432"[sum%11]
	got := b[17]
	if got == 'x' {
		got = 'X'
	}
	return got == want
}

// ssnOK rules out never-issued US social security numbers.
func ssnOK(b []byte) bool {
	d := digitsOf(b)
	if len(d) != 9 {
		return false
	}
	area, group, serial := string(d[:3]), string(d[3:5]), string(d[5:])
	return area != "000" && area != "666" && area[0] != '9' && group != "00" && serial != "0000"
}

// builtinDetectors are the entities pii_redactor knows, by name.
var builtinDetectors = map[string]detectorDef{
	"email": {label: "EMAIL", maxLen: 254,
		pattern: `[A-Za-z0-9._%+\-]{1,64}@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,24}`,
		startOK: func(prev byte, atStart bool) bool {
			return atStart || !(isAlnum(prev) || strings.IndexByte("._%+-", prev) >= 0)
		},
		endOK: func(next byte, atEnd bool) bool { return atEnd || !(isAlnum(next) || next == '-' || next == '_') }},
	"phone": {label: "PHONE", maxLen: 32,
		pattern: `(?:\+[0-9]{1,3}[ .\-]?)?(?:\([0-9]{3}\)|[0-9]{3})[ .\-]?[0-9]{3}[ .\-]?[0-9]{4}|\+[1-9][0-9]{7,14}`,
		startOK: func(prev byte, atStart bool) bool { return atStart || !(isAlnum(prev) || prev == '+') },
		endOK:   notAlnumAfter},
	"credit_card": {label: "CREDIT_CARD", maxLen: 40,
		pattern: `[0-9](?:[ \-]?[0-9]){12,18}`,
		startOK: notDigitBefore, endOK: notDigitAfter, check: luhn},
	"iban": {label: "IBAN", maxLen: 42,
		pattern: `[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]){11,30}`,
		startOK: notAlnumBefore, endOK: notAlnumAfter, check: ibanOK},
	"cn_id": {label: "CN_ID", maxLen: 18,
		pattern: `[1-9][0-9]{16}[0-9Xx]`,
		startOK: notDigitBefore, endOK: notAlnumAfter, check: cnIDOK},
	"us_ssn": {label: "US_SSN", maxLen: 11,
		pattern: `[0-9]{3}-[0-9]{2}-[0-9]{4}|[0-9]{3} [0-9]{2} [0-9]{4}`,
		startOK: func(prev byte, atStart bool) bool { return atStart || !(isDigit(prev) || prev == '-') },
		endOK:   func(next byte, atEnd bool) bool { return atEnd || !(isDigit(next) || next == '-') }, check: ssnOK},
}

// entityAliases maps accepted entity names (lower case) to builtins.
var entityAliases = map[string]string{
	"email": "email", "email_address": "email",
	"phone": "phone", "phone_number": "phone",
	"credit_card": "credit_card", "creditcard": "credit_card", "card": "credit_card",
	"iban": "iban", "iban_code": "iban",
	"cn_id": "cn_id", "cn_resident_id": "cn_id", "chinese_id": "cn_id", "national_id": "cn_id",
	"us_ssn": "us_ssn", "ssn": "us_ssn",
}

// builtinOrder is the default entity list.
var builtinOrder = []string{"email", "phone", "credit_card", "iban", "cn_id", "us_ssn"}

// compilePII builds the detectors: the named entities (all when entities
// is nil) and the custom patterns.
func compilePII(entities, patterns []string, b Budget, clock *limit.Clock) (*piiSpec, error) {
	var defs []detectorDef
	names := entities
	if names == nil {
		names = builtinOrder
	}
	seen := map[string]bool{}
	for _, e := range names {
		k, ok := entityAliases[strings.ToLower(e)]
		if !ok {
			known := append([]string(nil), builtinOrder...)
			sort.Strings(known)
			return nil, fmt.Errorf("unknown entity %q; known: %s", e, strings.Join(known, ", "))
		}
		if !seen[k] {
			seen[k] = true
			defs = append(defs, builtinDetectors[k])
		}
	}
	for _, p := range patterns {
		defs = append(defs, detectorDef{label: "REDACTED", pattern: p})
	}
	return compileDetectors(defs, b, clock)
}

func compileDetectors(defs []detectorDef, b Budget, clock *limit.Clock) (*piiSpec, error) {
	mem := limit.NewMeter(b.MaxMemoryBytes)
	s := &piiSpec{mem: mem}
	lim := automaton.Limits{MaxBytes: b.MaxPatternBytes, MaxInsts: b.MaxRegexInsts}
	for _, d := range defs {
		if len(d.pattern) > lim.MaxBytes && lim.MaxBytes < len(d.pattern) {
			lim.MaxBytes = len(d.pattern) // word lists are bounded by their own limits
		}
		re, err := automaton.Parse(d.pattern, lim)
		if err != nil {
			return nil, err
		}
		prog, err := automaton.Compile([]*syntax.Regexp{re}, []automaton.Mode{automaton.ModeFull}, lim, clock)
		if err != nil {
			return nil, &automaton.PatternError{Pattern: d.pattern, Message: err.Error()}
		}
		if d.startOK == nil {
			d.startOK = func(byte, bool) bool { return true }
		}
		if d.endOK == nil {
			d.endOK = func(byte, bool) bool { return true }
		}
		s.defs = append(s.defs, d)
		s.dfas = append(s.dfas, automaton.NewDFA(prog, b.MaxDFAStates, b.MaxMemoryBytes/8, mem))
	}
	return s, nil
}

// cand is one detector run.
type cand struct {
	det   int
	start int // absolute offset of the first byte
	st    *automaton.State
	alive bool
	// capped: the run was stopped by the length limit while it could still
	// go on; the stream then fails closed.
	capped bool
	best   int // end of the longest accepted match so far, -1
	pend   int // end of a match waiting for the next byte's boundary check, -1
}

// piiRun is the streaming redactor of one generation.
type piiRun struct {
	s     *piiSpec
	hold  int
	buf   []byte // text not yet emitted; buf[0] is at absolute offset base
	base  int
	last  byte // the byte before buf (emitted)
	begun bool // some byte was seen
	cands []cand
	reds  []string
	work  int64
	// sup, when set, is a run that outgrew the hold-back budget: the bytes
	// it still matches are dropped (they were redacted with it).
	sup    *automaton.State
	supDet int
}

func newPIIRun(s *piiSpec, hold int) *piiRun { return &piiRun{s: s, hold: hold} }

func (r *piiRun) Reset() {
	r.buf, r.base, r.last, r.begun, r.cands, r.reds = r.buf[:0], 0, 0, false, r.cands[:0], nil
	r.sup = nil
}

func (r *piiRun) redactions() []string {
	out := r.reds
	r.reds = nil
	return out
}

// maxLenOf returns detector i's longest match.
func (r *piiRun) maxLenOf(i int) int {
	if m := r.s.defs[i].maxLen; m > 0 && m < r.hold {
		return m
	}
	return r.hold
}

func (r *piiRun) write(chunk string, f *limit.Fuel) (string, error) {
	var out []byte
	for i := 0; i < len(chunk); i++ {
		b := chunk[i]
		if r.sup != nil {
			d := r.s.dfas[r.supDet]
			r.sup = d.Step(r.sup, b, &r.work)
			if d.LiveAll(r.sup) {
				r.last, r.begun = b, true
				r.base++
				continue
			}
			r.sup = nil
		}
		pos := r.base + len(r.buf)
		prev, atStart := r.last, !r.begun
		if len(r.buf) > 0 {
			prev = r.buf[len(r.buf)-1]
		}
		// Matches that ended before b: now their right boundary is known.
		for k := range r.cands {
			c := &r.cands[k]
			if c.pend == pos {
				d := &r.s.defs[c.det]
				if d.endOK(b, false) && (d.check == nil || d.check(r.slice(c.start, pos))) {
					c.best = pos
				}
				c.pend = -1
			}
		}
		// Advance the live runs, and start new ones here.
		for k := range r.cands {
			c := &r.cands[k]
			if !c.alive {
				continue
			}
			r.advance(c, b, pos)
		}
		for di := range r.s.defs {
			if !r.s.defs[di].startOK(prev, atStart) {
				continue
			}
			c := cand{det: di, start: pos, st: r.s.dfas[di].Start, alive: true, best: -1, pend: -1}
			r.advance(&c, b, pos)
			if c.alive || c.pend >= 0 {
				r.cands = append(r.cands, c)
			}
		}
		r.buf = append(r.buf, b)
		r.begun = true
		if err := f.Spend(int64(len(r.cands)) + 1 + r.work); err != nil {
			return "", err
		}
		r.work = 0
		for _, c := range r.cands {
			if c.capped {
				// A match longer than the budget: redact everything held
				// and drop what the match goes on with.
				r.sup, r.supDet = c.st, c.det
				out = r.redactAll(out)
				break
			}
		}
		out = r.emit(out, false)
	}
	return string(out), nil
}

// advance feeds b (at absolute pos) to run c.
func (r *piiRun) advance(c *cand, b byte, pos int) {
	d := r.s.dfas[c.det]
	c.st = d.Step(c.st, b, &r.work)
	if !d.LiveAll(c.st) {
		c.alive = false
		return
	}
	if pos+1-c.start > r.maxLenOf(c.det) {
		c.alive = false
		c.capped = true
		return
	}
	if d.AcceptAll(c.st) {
		c.pend = pos + 1
	}
}

// slice returns the buffered bytes [from, to) (absolute offsets).
func (r *piiRun) slice(from, to int) []byte { return r.buf[from-r.base : to-r.base] }

// emit moves decided text from buf to out.
func (r *piiRun) emit(out []byte, final bool) []byte {
	for {
		// Drop runs that are over and matched nothing.
		live := r.cands[:0]
		for _, c := range r.cands {
			if c.alive || c.pend >= 0 || c.best >= 0 || c.capped {
				live = append(live, c)
			}
		}
		r.cands = live
		end := r.base + len(r.buf)
		if len(r.cands) == 0 {
			out = append(out, r.buf...)
			r.advanceBase(len(r.buf))
			return out
		}
		m := end
		for _, c := range r.cands {
			if c.start < m {
				m = c.start
			}
		}
		if m > r.base {
			out = append(out, r.buf[:m-r.base]...)
			r.advanceBase(m - r.base)
		}
		// Every run starting at m must be decided.
		bestEnd, bestDet := -1, -1
		for _, c := range r.cands {
			if c.start != m {
				continue
			}
			if c.alive || c.pend >= 0 {
				if len(r.buf) > r.hold {
					// Over the hold-back budget: redact what is held.
					return r.redactAll(out)
				}
				return out
			}
			if c.best > bestEnd {
				bestEnd, bestDet = c.best, c.det
			}
		}
		if bestEnd < 0 {
			kept := r.cands[:0]
			for _, c := range r.cands {
				if c.start != m {
					kept = append(kept, c)
				}
			}
			r.cands = kept
			continue
		}
		label := r.s.defs[bestDet].label
		out = append(out, '[')
		out = append(out, label...)
		out = append(out, ']')
		r.reds = append(r.reds, label)
		r.advanceBase(bestEnd - r.base)
		kept := r.cands[:0]
		for _, c := range r.cands {
			if c.start >= bestEnd {
				kept = append(kept, c)
			}
		}
		r.cands = kept
	}
}

// redactAll replaces everything held back by a label and forgets the runs.
func (r *piiRun) redactAll(out []byte) []byte {
	out = append(out, "[REDACTED]"...)
	r.reds = append(r.reds, "REDACTED (hold-back budget)")
	r.advanceBase(len(r.buf))
	r.cands = r.cands[:0]
	return out
}

func (r *piiRun) advanceBase(n int) {
	if n <= 0 {
		return
	}
	r.last = r.buf[n-1]
	r.buf = append(r.buf[:0], r.buf[n:]...)
	r.base += n
}

// flush decides every run as if the text ended here and returns the rest.
func (r *piiRun) flush(f *limit.Fuel) (string, error) {
	end := r.base + len(r.buf)
	for k := range r.cands {
		c := &r.cands[k]
		if c.pend == end {
			d := &r.s.defs[c.det]
			if d.endOK(0, true) && (d.check == nil || d.check(r.slice(c.start, end))) {
				c.best = end
			}
		}
		c.pend = -1
		c.alive = false
	}
	if err := f.Spend(int64(len(r.cands)) + 1); err != nil {
		return "", err
	}
	return string(r.emit(nil, true)), nil
}
