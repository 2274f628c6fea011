package sample

import (
	"strings"
	"testing"
)

// pushAll feeds pieces to a new matcher for stops and returns each Push's
// output, the final Flush, and whether it stopped.
func pushAll(stops []string, pieces []string) (emits []string, flushed string, stopped bool) {
	m := NewStopMatcher(stops)
	for _, p := range pieces {
		e, s := m.Push(p)
		emits = append(emits, e)
		stopped = s
	}
	return emits, m.Flush(), stopped
}

func TestStopMatcher(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		stops       []string
		pieces      []string
		wantEmits   []string
		wantFlush   string
		wantStopped bool
	}{
		{name: "no stops passes through", stops: nil,
			pieces: []string{"a<", "b"}, wantEmits: []string{"a<", "b"}},
		{name: "empty stop ignored", stops: []string{""},
			pieces: []string{"ab"}, wantEmits: []string{"ab"}},
		{name: "stop inside one piece", stops: []string{"<|im_end|>"},
			pieces: []string{"Hello<|im_end|>junk"}, wantEmits: []string{"Hello"}, wantStopped: true},
		{name: "stop at the start", stops: []string{"</s>"},
			pieces: []string{"</s>"}, wantEmits: []string{""}, wantStopped: true},
		{name: "stop spanning three pieces", stops: []string{"<|eot_id|>"},
			pieces:      []string{"Hi there<|e", "ot", "_id|>more"},
			wantEmits:   []string{"Hi there", "", ""},
			wantStopped: true},
		{name: "false start released", stops: []string{"<|eot_id|>"},
			pieces:    []string{"a <|e", "nd", " b"},
			wantEmits: []string{"a ", "<|end", " b"}},
		{name: "held tail flushed at the end", stops: []string{"\nUser:"},
			pieces: []string{"done.\nUs"}, wantEmits: []string{"done."}, wantFlush: "\nUs"},
		{name: "overlapping prefix: tail restarts the stop", stops: []string{"abab"},
			pieces:      []string{"xaba", "bab"},
			wantEmits:   []string{"x", ""},
			wantStopped: true},
		{name: "self-overlap keeps the longest candidate", stops: []string{"aab"},
			pieces:      []string{"aa", "a", "b!"},
			wantEmits:   []string{"", "a", ""},
			wantStopped: true},
		{name: "first to complete wins", stops: []string{"abcd", "bc"},
			pieces: []string{"xab", "cd"}, wantEmits: []string{"x", "a"}, wantStopped: true},
		{name: "same end: earlier start wins", stops: []string{"cd", "bcd"},
			pieces: []string{"abcd"}, wantEmits: []string{"a"}, wantStopped: true},
		{name: "after stop nothing more", stops: []string{"."},
			pieces: []string{"a.b", "c"}, wantEmits: []string{"a", ""}, wantStopped: true},
		{name: "multibyte stop", stops: []string{"。終"},
			pieces: []string{"はい。", "終わり"}, wantEmits: []string{"はい", ""}, wantStopped: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			emits, flushed, stopped := pushAll(tt.stops, tt.pieces)
			if strings.Join(emits, "|") != strings.Join(tt.wantEmits, "|") || len(emits) != len(tt.wantEmits) {
				t.Errorf("emits = %q, want %q", emits, tt.wantEmits)
			}
			if flushed != tt.wantFlush {
				t.Errorf("Flush() = %q, want %q", flushed, tt.wantFlush)
			}
			if stopped != tt.wantStopped {
				t.Errorf("stopped = %v, want %v", stopped, tt.wantStopped)
			}
		})
	}
}

func TestStopMatcherStopped(t *testing.T) {
	t.Parallel()
	m := NewStopMatcher([]string{"\n\n"})
	if m.Stopped() {
		t.Fatal("Stopped() before any text")
	}
	m.Push("a\n")
	if m.Stopped() {
		t.Fatal("Stopped() after a partial stop")
	}
	m.Push("\nb")
	if !m.Stopped() {
		t.Error("Stopped() false after the stop completed")
	}
	if got := m.Flush(); got != "" {
		t.Errorf("Flush() after stop = %q, want empty", got)
	}
}

// FuzzStopMatcher checks that the output does not depend on how the text is
// cut into pieces, and that it agrees with a whole-text search.
func FuzzStopMatcher(f *testing.F) {
	f.Add("hello <|im_end|> world", "<|im_end|>", "\n", uint8(3))
	f.Add("xababab", "abab", "ba", uint8(1))
	f.Add("aaab", "aab", "", uint8(2))
	f.Fuzz(func(t *testing.T, text, stop1, stop2 string, step uint8) {
		stops := []string{stop1, stop2}
		whole, wholeFlush, wholeStopped := pushAll(stops, []string{text})
		want := whole[0] + wholeFlush

		n := int(step%7) + 1
		var pieces []string
		for i := 0; i < len(text); i += n {
			pieces = append(pieces, text[i:min(i+n, len(text))])
		}
		emits, flushed, stopped := pushAll(stops, pieces)
		if got := strings.Join(emits, "") + flushed; got != want || (len(pieces) > 0 && stopped != wholeStopped) {
			t.Fatalf("pieces of %d: %q (stopped %v), whole: %q (stopped %v)", n, got, stopped, want, wholeStopped)
		}

		// Whole-text reference: cut before the earliest-ending stop.
		ref, cut := text, len(text)+1
		for _, s := range stops {
			if i := strings.Index(text, s); s != "" && i >= 0 && i+len(s) < cut {
				cut, ref = i+len(s), text[:i]
			}
		}
		if len(want) > len(ref) || !strings.HasPrefix(ref, want) || (want != ref && !wholeStopped) {
			t.Fatalf("output %q, reference %q", want, ref)
		}
	})
}
