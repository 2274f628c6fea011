package gateway

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// flushCounter is a ResponseWriter that counts its flushes.
type flushCounter struct {
	*httptest.ResponseRecorder
	flushes int
}

func (f *flushCounter) Flush() { f.flushes++; f.ResponseRecorder.Flush() }

// TestSSEHoldFlushesOncePerEvent: while held (syncCall.stream), what is
// written for one job event reaches the caller in one flush, and nothing
// is flushed when nothing was written; unheld, every event is flushed.
func TestSSEHoldFlushesOncePerEvent(t *testing.T) {
	t.Parallel()
	w := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
	out := newSSE(w)
	out.hold()
	for _, text := range []string{"thinking", "Once", " upon"} {
		if err := out.send("", "", map[string]any{"text": text}); err != nil {
			t.Fatal(err)
		}
	}
	if w.flushes != 0 {
		t.Fatalf("%d flushes while held", w.flushes)
	}
	out.flush()
	out.flush() // nothing new written
	if w.flushes != 1 {
		t.Fatalf("%d flushes for one event's writes: want 1", w.flushes)
	}
	out.release()
	out.send("", "", "[DONE]")
	if w.flushes != 2 {
		t.Fatalf("%d flushes after release: want every send flushed", w.flushes)
	}
	if got := strings.Count(w.Body.String(), "data: "); got != 4 {
		t.Fatalf("%d events written: want 4\n%s", got, w.Body.String())
	}
	var none *sse
	none.hold()
	none.flush()
	none.release()
}
