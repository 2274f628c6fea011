package model_test

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
)

func sharedPath(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join("..", "..", "..", "shared", rel)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared fixture %s not present: %v", rel, err)
	}
	return p
}

type refCase struct {
	Name         string    `json:"name"`
	PromptIDs    []int32   `json:"prompt_ids"`
	GeneratedIDs []int32   `json:"generated_ids"`
	LogitsStep0  []float32 `json:"logits_step0"`
}

type reference struct {
	Cases     []refCase `json:"cases"`
	LongCases []refCase `json:"long_cases"`
}

func loadStories(t *testing.T, threads int) (*model.Model, reference) {
	t.Helper()
	f, err := gguf.Open(sharedPath(t, "models/stories260K/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	be := cpu.New(cpu.Config{Threads: threads})
	t.Cleanup(func() { be.Close() })
	m, err := model.New(f, be)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(sharedPath(t, "models/stories260K/reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref reference
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	return m, ref
}

func argmax(v []float32) int32 {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return int32(best)
}

// seqState is one sequence decoded by runBatch.
type seqState struct {
	ids    []int32 // tokens to feed this step
	pos    int32
	out    []int32
	logit0 []float32
}

// runBatch decodes all cases together greedily: one prefill step with every
// prompt, then one decode step per token with every sequence.
func runBatch(t *testing.T, m *model.Model, cases []refCase, steps int) []seqState {
	t.Helper()
	const bt = 16
	maxLen := 0
	for _, c := range cases {
		maxLen = max(maxLen, len(c.PromptIDs)+steps)
	}
	per := (maxLen + bt - 1) / bt
	kv, err := m.NewKV(per*len(cases), bt)
	if err != nil {
		t.Fatal(err)
	}
	tables := make([][]int32, len(cases))
	seqs := make([]seqState, len(cases))
	for i, c := range cases {
		for j := 0; j < per; j++ {
			// Interleave the sequences' blocks so block tables matter.
			tables[i] = append(tables[i], int32(j*len(cases)+i))
		}
		seqs[i].ids = c.PromptIDs
	}
	for step := 0; step < steps; step++ {
		var toks, pos, seq, rows []int32
		for i := range seqs {
			s := &seqs[i]
			for _, id := range s.ids {
				toks, pos, seq = append(toks, id), append(pos, s.pos), append(seq, int32(i))
				s.pos++
			}
			rows = append(rows, int32(len(toks)-1))
		}
		logits := make([]float32, len(rows)*m.Vocab)
		if err := m.Forward(kv, toks, &gpu.Batch{Pos: pos, Seq: seq, Tables: tables}, rows, logits); err != nil {
			t.Fatal(err)
		}
		for i := range seqs {
			l := logits[i*m.Vocab : (i+1)*m.Vocab]
			if step == 0 {
				seqs[i].logit0 = append([]float32(nil), l...)
			}
			next := argmax(l)
			seqs[i].out = append(seqs[i].out, next)
			seqs[i].ids = []int32{next}
		}
	}
	return seqs
}

func checkCase(t *testing.T, c refCase, s seqState) {
	t.Helper()
	if c.LogitsStep0 != nil {
		var worst float64
		for i, want := range c.LogitsStep0 {
			worst = math.Max(worst, math.Abs(float64(s.logit0[i]-want)))
		}
		if worst > 1e-4 {
			t.Errorf("%s: step-0 logits differ from the reference by up to %g (> 1e-4)", c.Name, worst)
		}
	}
	for i, want := range c.GeneratedIDs {
		if s.out[i] != want {
			t.Errorf("%s: generated token %d is %d, reference %d (got %v)", c.Name, i, s.out[i], want, s.out)
			return
		}
	}
}

func TestStories260KReference(t *testing.T) {
	t.Parallel()
	m, ref := loadStories(t, 2)
	for _, c := range ref.Cases {
		seqs := runBatch(t, m, []refCase{c}, len(c.GeneratedIDs))
		checkCase(t, c, seqs[0])
	}
}

func TestStories260KBatched(t *testing.T) {
	t.Parallel()
	m, ref := loadStories(t, 2)
	seqs := runBatch(t, m, ref.Cases, 64)
	for i, c := range ref.Cases {
		checkCase(t, c, seqs[i])
	}
}

func TestStories260KLong(t *testing.T) {
	t.Parallel()
	m, ref := loadStories(t, 1)
	if len(ref.LongCases) == 0 {
		t.Fatal("reference has no long cases")
	}
	for _, c := range ref.LongCases {
		seqs := runBatch(t, m, []refCase{c}, len(c.GeneratedIDs))
		checkCase(t, c, seqs[0])
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	m, _ := loadStories(t, 1)
	kv, err := m.NewKV(1, 16)
	if err != nil {
		t.Fatal(err)
	}
	logits := make([]float32, m.Vocab)
	tab := [][]int32{{0}}
	if err := m.Forward(kv, []int32{9999}, &gpu.Batch{Pos: []int32{0}, Seq: []int32{0}, Tables: tab}, []int32{0}, logits); err == nil {
		t.Error("out-of-vocabulary token accepted")
	}
	if err := m.Forward(kv, []int32{1}, &gpu.Batch{Pos: []int32{int32(m.Context)}, Seq: []int32{0}, Tables: tab}, []int32{0}, logits); !errors.Is(err, model.ErrContextOverflow) {
		t.Errorf("position past the context: %v", err)
	}
	if err := m.Forward(kv, []int32{1}, &gpu.Batch{Pos: []int32{16}, Seq: []int32{0}, Tables: tab}, []int32{0}, logits); err == nil {
		t.Error("position past the block table accepted")
	}
}
