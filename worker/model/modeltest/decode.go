package modeltest

import (
	"bytes"
	"math"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
	"github.com/zerolayer/zerolayer/worker/model/synth"
)

// Build generates the model c describes and parses it back.
func Build(t testing.TB, c synth.Config) *gguf.File {
	t.Helper()
	w, err := synth.Build(c)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Decoder runs greedy decoding of several sequences together on one
// model: a prefill step with every prompt, then one step per token.
// NewDecoder fills it; a test that wants another block layout may fill
// the fields itself.
type Decoder struct {
	Model *model.Model
	KV    gpu.KV
	// Tables is each sequence's block table.
	Tables [][]int32
	// Pos is each sequence's next position.
	Pos []int32
	// Next holds the tokens each sequence feeds at the next step: its
	// prompt, then its last greedy token. A test may overwrite it to
	// steer a sequence.
	Next [][]int32
}

// NewDecoder makes a decoder for prompts, with room for maxLen positions
// per sequence in blocks of 16 tokens. The sequences' blocks are
// interleaved so that block tables matter.
func NewDecoder(t testing.TB, m *model.Model, prompts [][]int32, maxLen int) *Decoder {
	t.Helper()
	const bt = 16
	per := (maxLen + bt - 1) / bt
	kv, err := m.NewKV(per*len(prompts), bt)
	if err != nil {
		t.Fatal(err)
	}
	d := &Decoder{Model: m, KV: kv, Tables: make([][]int32, len(prompts)), Pos: make([]int32, len(prompts))}
	for i := range prompts {
		for j := 0; j < per; j++ {
			// Interleave the sequences' blocks so block tables matter.
			d.Tables[i] = append(d.Tables[i], int32(j*len(prompts)+i))
		}
		d.Next = append(d.Next, prompts[i])
	}
	return d
}

// Step runs one step and returns each sequence's logits; Next then holds
// each sequence's greedy token.
func (d *Decoder) Step(t testing.TB) [][]float32 {
	t.Helper()
	var toks, pos, seq, rows []int32
	for i, ids := range d.Next {
		for _, id := range ids {
			toks, pos, seq = append(toks, id), append(pos, d.Pos[i]), append(seq, int32(i))
			d.Pos[i]++
		}
		rows = append(rows, int32(len(toks)-1))
	}
	v := d.Model.Vocab
	logits := make([]float32, len(rows)*v)
	if err := d.Model.Forward(d.KV, toks, &gpu.Batch{Pos: pos, Seq: seq, Tables: d.Tables}, rows, logits); err != nil {
		t.Fatal(err)
	}
	out := make([][]float32, len(rows))
	for i := range rows {
		out[i] = logits[i*v : (i+1)*v]
		d.Next[i] = []int32{Argmax(out[i])}
	}
	return out
}

// Greedy decodes the cases' prompts together for steps steps (at least
// the longest case's GeneratedIDs when steps is 0) and checks each with
// CheckGreedy.
func Greedy(t testing.TB, m *model.Model, cases []Case, steps int, tol float64) {
	t.Helper()
	maxLen, need := 0, 0
	var prompts [][]int32
	for _, c := range cases {
		prompts = append(prompts, c.PromptIDs)
		need = max(need, len(c.GeneratedIDs))
	}
	if steps == 0 {
		steps = need
	}
	for _, c := range cases {
		maxLen = max(maxLen, len(c.PromptIDs)+steps)
	}
	d := NewDecoder(t, m, prompts, maxLen)
	outs := make([][]int32, len(cases))
	logit0 := make([][]float32, len(cases))
	for s := 0; s < steps; s++ {
		l := d.Step(t)
		for i := range cases {
			if s == 0 {
				logit0[i] = append([]float32(nil), l[i]...)
			}
			outs[i] = append(outs[i], d.Next[i][0])
		}
	}
	for i, c := range cases {
		CheckGreedy(t, c, logit0[i], outs[i], tol)
	}
}

// CheckGreedy compares a decoded sequence with its reference case: the
// step-0 logits within tol (absolute) when the case records them, and the
// generated tokens exactly (out may be longer than the reference).
func CheckGreedy(t testing.TB, c Case, logit0 []float32, out []int32, tol float64) {
	t.Helper()
	if c.LogitsStep0 != nil {
		if worst := MaxAbsDiff(logit0, c.LogitsStep0); worst > tol {
			t.Errorf("%s: step-0 logits differ from the reference by up to %g (> %g)", c.Name, worst, tol)
		}
	}
	for i, want := range c.GeneratedIDs {
		if out[i] != want {
			t.Errorf("%s: generated token %d is %d, reference %d (got %v)", c.Name, i, out[i], want, out)
			return
		}
	}
}

// Argmax returns the index of the largest value (the first of equals).
func Argmax(v []float32) int32 {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return int32(best)
}

// MaxAbsDiff returns max|got−want| over want's indices.
func MaxAbsDiff(got, want []float32) float64 {
	var worst float64
	for i := range want {
		worst = math.Max(worst, math.Abs(float64(got[i]-want[i])))
	}
	return worst
}

// RelDiff returns max|got−want| / max|want|.
func RelDiff(got, want []float32) float64 {
	var norm float64
	for _, w := range want {
		norm = math.Max(norm, math.Abs(float64(w)))
	}
	return MaxAbsDiff(got, want) / norm
}
