package producer

import (
	"testing"
	"time"
)

// TestKeptResultsForgetTheOldest: results carried with no waiter are kept
// keptFor and keptBytes at most, and a result carried again is kept from
// its latest arrival.
func TestKeptResultsForgetTheOldest(t *testing.T) {
	var w resultWatch
	t0 := time.Unix(1000, 0)
	w.keep("a", []byte("aa"), t0)
	w.keep("b", []byte("bb"), t0.Add(time.Second))
	w.keep("a", []byte("a2"), t0.Add(2*time.Second))
	if w.bytes != 4 || len(w.kept) != 2 {
		t.Fatalf("bytes %d, kept %d", w.bytes, len(w.kept))
	}
	// b's 10 s are up, a's latest arrival is not.
	w.keep("c", []byte("cc"), t0.Add(keptFor+time.Second))
	if w.recent("b") != nil || string(w.recent("a")) != "a2" || string(w.recent("c")) != "cc" || w.bytes != 4 {
		t.Fatalf("kept %v, bytes %d", w.kept, w.bytes)
	}
	big := make([]byte, keptBytes)
	w.keep("d", big, t0.Add(keptFor+2*time.Second))
	if w.recent("a") != nil || w.recent("c") != nil || w.bytes != keptBytes || len(w.order) != 1 {
		t.Fatalf("over keptBytes: kept %d results, %d bytes, order %d", len(w.kept), w.bytes, len(w.order))
	}
}
