package sample

import "strings"

// StopMatcher finds stop sequences in streamed text. Text goes in piece by
// piece with Push; what comes out is the same text, delayed only where its
// tail could still grow into a stop sequence, and cut before the first stop
// sequence to complete. The result does not depend on how the text is split
// into pieces. A StopMatcher is not safe for concurrent use.
type StopMatcher struct {
	stops   []string
	held    string
	stopped bool
	matched string
}

// NewStopMatcher returns a matcher for stops. Empty strings are ignored;
// with no stop sequences every Push returns its text at once.
func NewStopMatcher(stops []string) *StopMatcher {
	m := &StopMatcher{}
	for _, s := range stops {
		if s != "" {
			m.stops = append(m.stops, s)
		}
	}
	return m
}

// Push adds text and returns what can now be passed on. When a stop sequence
// completes, Push returns the text before it and stopped = true; the stop
// sequence and anything after it are dropped, and later calls return "",
// true. Of several stop sequences the one that completes first wins, and of
// those completing at the same point the one that starts first.
func (m *StopMatcher) Push(text string) (emit string, stopped bool) {
	if m.stopped {
		return "", true
	}
	if len(m.stops) == 0 {
		return text, false
	}
	buf := m.held + text
	start, end := -1, -1
	for _, s := range m.stops {
		i := strings.Index(buf, s)
		if i < 0 {
			continue
		}
		if e := i + len(s); end < 0 || e < end || (e == end && i < start) {
			start, end = i, e
		}
	}
	if start >= 0 {
		m.stopped, m.held, m.matched = true, "", buf[start:end]
		return buf[:start], true
	}
	h := m.holdLen(buf)
	m.held = buf[len(buf)-h:]
	return buf[:len(buf)-h], false
}

// Matched returns the stop sequence that stopped the text, or "" while
// none has.
func (m *StopMatcher) Matched() string { return m.matched }

// holdLen returns the length of the longest suffix of buf that is a proper
// prefix of some stop sequence.
func (m *StopMatcher) holdLen(buf string) int {
	hold := 0
	for _, s := range m.stops {
		for l := min(len(s)-1, len(buf)); l > hold; l-- {
			if strings.HasSuffix(buf, s[:l]) {
				hold = l
				break
			}
		}
	}
	return hold
}

// Flush returns the held-back text at the end of generation, when it can no
// longer become a stop sequence, and empties the matcher. After a stop it
// returns "".
func (m *StopMatcher) Flush() string {
	h := m.held
	m.held = ""
	return h
}

// Stopped reports whether a stop sequence has been seen.
func (m *StopMatcher) Stopped() bool { return m.stopped }
