package worker

import (
	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker/model/chat"
)

// SplitThinking wraps sink for a thinking job: the text of each Delta is
// split (chat.ReasoningSplitter) into the reasoning, passed to sink's
// Reasoning when it is a ReasoningSink, and the answer, passed to its
// Delta with all the token ids. Call finish when the output has ended: it
// passes on what was held back. The job's whole output splits the same way
// with chat.SplitReasoning.
func SplitThinking(sink Sink) (wrapped Sink, finish func()) {
	t := &thinkingSink{Sink: sink}
	return t, t.finish
}

type thinkingSink struct {
	Sink
	split chat.ReasoningSplitter
}

func (t *thinkingSink) Delta(text string, ids []int32, lps []contracts.TokenLogprob) {
	r, a := t.split.Push(text)
	t.pass(r, a, ids, lps)
}

func (t *thinkingSink) finish() {
	r, a := t.split.Flush()
	if r != "" || a != "" {
		t.pass(r, a, nil, nil)
	}
}

func (t *thinkingSink) pass(r, a string, ids []int32, lps []contracts.TokenLogprob) {
	if r != "" {
		if rs, ok := t.Sink.(ReasoningSink); ok {
			rs.Reasoning(r)
		}
	}
	t.Sink.Delta(a, ids, lps)
}
