package tools

import "strings"

// retry_on_fail: the engine regenerates the output when it contains one of
// the markers, up to max times; the retries share the job's budget.
type retrySpec struct {
	markers []string
	max     int
}

// match returns the first marker output contains, or "".
func (s *retrySpec) match(output string) string {
	for _, m := range s.markers {
		if strings.Contains(output, m) {
			return m
		}
	}
	return ""
}
