package tools

import (
	"bytes"

	"github.com/zerolayer/zerolayer/worker/tools/internal/grammar"
	"github.com/zerolayer/zerolayer/worker/tools/internal/limit"
	"github.com/zerolayer/zerolayer/worker/tools/internal/vocab"
)

// json_validator with a trigger (response_format.trigger): the schema
// binds only output that starts with the trigger. The output is either
// free text that does not start with it, or the trigger followed by a
// document valid for the schema. While the output is still a prefix of the
// trigger the run is undecided: the allowed tokens are those that keep it
// a prefix (ending exactly at the trigger's end at most) and those that
// leave it (the output becomes free text); a token that would run past the
// trigger's end is masked, so the switch to the grammar happens on a token
// boundary (byte tokens can always spell the trigger). Free text is
// constrained no more; after the trigger the grammar takes over.

// triggerMasks are the masks of the undecided states, built once per
// compiled tool: undecided[k] after k bytes of the trigger, and free, every
// token that carries text.
type triggerMasks struct {
	trigger   []byte
	undecided [][]uint64
	free      []uint64
}

func newTriggerMasks(trigger string, vi *vocab.Index, mem *limit.Meter) (*triggerMasks, error) {
	tm := &triggerMasks{trigger: []byte(trigger), free: make([]uint64, vi.Words)}
	if err := mem.Charge(int64(8 * vi.Words * (len(trigger) + 1))); err != nil {
		return nil, err
	}
	for t, p := range vi.Pieces {
		if p != nil && !vi.IsEOG(int32(t)) {
			tm.free[t>>6] |= 1 << (uint(t) & 63)
		}
	}
	for k := range tm.trigger {
		m := make([]uint64, vi.Words)
		rest := tm.trigger[k:]
		for t, p := range vi.Pieces {
			if p == nil || vi.IsEOG(int32(t)) {
				continue
			}
			if len(p) > len(rest) && bytes.HasPrefix(p, rest) {
				continue // runs past the trigger
			}
			m[t>>6] |= 1 << (uint(t) & 63)
		}
		tm.undecided = append(tm.undecided, m)
	}
	return tm, nil
}

// The phases of a triggerRun.
const (
	triggerUndecided = iota
	triggerFree
	triggerJSON
)

type triggerRun struct {
	tm    *triggerMasks
	g     *grammar.Run
	phase int
	k     int // trigger bytes seen, while undecided
}

func newTriggerRun(tm *triggerMasks, g *grammar.Run) *triggerRun {
	return &triggerRun{tm: tm, g: g}
}

func (r *triggerRun) Reset() {
	r.phase, r.k = triggerUndecided, 0
	r.g.Reset()
}

func (r *triggerRun) Mask(dst []uint64, f *limit.Fuel) (bool, error) {
	switch r.phase {
	case triggerUndecided:
		copy(dst, r.tm.undecided[r.k])
		return true, nil
	case triggerFree:
		copy(dst, r.tm.free)
		return true, nil
	}
	return r.g.Mask(dst, f)
}

func (r *triggerRun) Accept(p []byte, f *limit.Fuel) (bool, error) {
	switch r.phase {
	case triggerFree:
		return true, nil
	case triggerJSON:
		return r.g.Accept(p, f)
	}
	rest := r.tm.trigger[r.k:]
	switch {
	case len(p) <= len(rest) && bytes.Equal(p, rest[:len(p)]):
		r.k += len(p)
		if r.k == len(r.tm.trigger) {
			r.phase = triggerJSON
		}
		return true, nil
	case bytes.HasPrefix(p, rest):
		// Past the trigger (the mask leaves these out): the rest must
		// start the document.
		ok, err := r.g.Accept(p[len(rest):], f)
		if ok {
			r.phase = triggerJSON
		}
		return ok, err
	}
	r.phase = triggerFree
	return true, nil
}

// CanEnd: free text (a prefix of the trigger included) may end anywhere, a
// call where the document may.
func (r *triggerRun) CanEnd() bool {
	if r.phase == triggerJSON {
		return r.g.CanEnd()
	}
	return true
}

func (r *triggerRun) Complete() bool { return r.phase == triggerJSON && r.g.Complete() }

// triggered splits output into the document after the trigger, when it
// starts with the trigger.
func triggered(trigger string, output []byte) ([]byte, bool) {
	return bytes.CutPrefix(output, []byte(trigger))
}

// Forced: after the trigger, the document's forced bytes; before it
// nothing is forced (free text may begin anywhere).
func (r *triggerRun) Forced(max int, dst []byte) []byte {
	if r.phase == triggerJSON {
		return r.g.Forced(max, dst)
	}
	return dst
}
