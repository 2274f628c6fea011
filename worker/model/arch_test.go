package model_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/model/synth"
)

// archSeq is one sequence of an archRun: its tokens so far (prompt, then
// greedy ids), how many of them are in the KV cache, and its blocks.
type archSeq struct {
	toks    []int32
	nPrompt int
	inKV    int
	table   []int32
	logits0 []float32
}

func (s *archSeq) gen() []int32 { return s.toks[s.nPrompt:] }

// archRun decodes sequences greedily, all of them in each step. A step
// feeds each sequence the tokens it has not yet put in the cache, at most
// chunk of them (0: all); a sequence whose tokens are then all in the
// cache gets a logits row and its greedy token.
type archRun struct {
	m       *model.Model
	kv      gpu.KV
	chunk   int
	seqs    []*archSeq
	nextBlk int32
	bt      int
}

func newArchRun(t *testing.T, m *model.Model, prompts [][]int32, steps, chunk int) *archRun {
	t.Helper()
	const bt = 16
	per := 0
	for _, p := range prompts {
		per = max(per, (len(p)+steps+bt-1)/bt)
	}
	// Room for every sequence twice over: a preempted sequence is
	// recomputed into fresh blocks.
	kv, err := m.NewKV(2*per*len(prompts), bt)
	if err != nil {
		t.Fatal(err)
	}
	r := &archRun{m: m, kv: kv, chunk: chunk, bt: bt}
	for _, p := range prompts {
		r.seqs = append(r.seqs, &archSeq{toks: append([]int32(nil), p...), nPrompt: len(p)})
	}
	// Interleave the first blocks of the sequences so tables matter.
	for j := 0; j < per; j++ {
		for _, s := range r.seqs {
			s.table = append(s.table, r.nextBlk)
			r.nextBlk++
		}
	}
	return r
}

// preempt drops sequence i's cache: its tokens are recomputed into fresh
// blocks by the next steps (the old blocks are zeroed, so nothing can be
// read from them).
func (r *archRun) preempt(i int) {
	s := r.seqs[i]
	zero := make([]byte, r.kv.Config().BlockBytes())
	for _, b := range s.table {
		r.kv.WriteBlock(int(b), zero)
	}
	n := len(s.table)
	s.table = s.table[:0]
	for j := 0; j < n; j++ {
		s.table = append(s.table, r.nextBlk)
		r.nextBlk++
	}
	s.inKV = 0
}

// step runs one forward step over every sequence that is not done.
func (r *archRun) step(t *testing.T, steps int) {
	t.Helper()
	var toks, pos, seq, rows []int32
	var who []int
	tables := make([][]int32, len(r.seqs))
	for i, s := range r.seqs {
		tables[i] = s.table
		if len(s.gen()) >= steps {
			continue
		}
		n := len(s.toks) - s.inKV
		if r.chunk > 0 {
			n = min(n, r.chunk)
		}
		for j := 0; j < n; j++ {
			toks, pos, seq = append(toks, s.toks[s.inKV]), append(pos, int32(s.inKV)), append(seq, int32(i))
			s.inKV++
		}
		if s.inKV == len(s.toks) {
			rows, who = append(rows, int32(len(toks)-1)), append(who, i)
		}
	}
	if len(toks) == 0 {
		return
	}
	v := r.m.Vocab
	out := make([]float32, len(rows)*v)
	if err := r.m.Forward(r.kv, toks, &gpu.Batch{Pos: pos, Seq: seq, Tables: tables}, rows, out); err != nil {
		t.Fatal(err)
	}
	for j, i := range who {
		s, l := r.seqs[i], out[j*v:(j+1)*v]
		if len(s.gen()) == 0 {
			s.logits0 = append([]float32(nil), l...)
		}
		s.toks = append(s.toks, modeltest.Argmax(l))
	}
}

func (r *archRun) done(steps int) bool {
	for _, s := range r.seqs {
		if len(s.gen()) < steps {
			return false
		}
	}
	return true
}

// archModel describes one model of shared/models/archs and the tolerance
// its step-0 logits are held to against llama.cpp's.
type archModel struct {
	file string
	tol  float64
}

// The tolerances. qwen3 computes nothing llama.cpp rounds (F32 weights,
// F32 KV cache): only the summation order differs, and the step-0 logits
// agree to 9e-7 at most (measured over the five cases); 1e-5 leaves room
// for other CPUs' kernels (AVX2, AVX-512, NEON sum in other orders).
// gemma3 adds GELU, which llama.cpp's CPU backend takes from an fp16 table
// (input rounded to fp16, result stored in fp16) while we compute the exact
// tanh approximation: that moves llama.cpp's logits by up to about 1e-3
// (the README's note; measured up to 1.06e-3 here), so 1.5e-3. Greedy ids
// are compared exactly up to the first step whose llama.cpp margin is
// below twice the tolerance: the top logit may move by tol down and the
// runner-up by tol up, so below 2·tol the reference's choice is not
// determined by the computation we share with it. (With these numbers
// every qwen3 step is compared, and the gemma3 cases up to steps 37, 40,
// 2, 34 and 40; in fact all 40 ids of every case agree.)
var archModels = []archModel{
	{file: "qwen3-s-f32", tol: 1e-5},
	{file: "gemma3-s-f32", tol: 1.5e-3},
}

func loadArch(t *testing.T, am archModel) (*model.Model, []modeltest.ArchCase) {
	t.Helper()
	dir := "models/archs/"
	path := modeltest.SharedPath(t, dir+am.file+".gguf")
	refs := modeltest.ReadArchCases(t, modeltest.SharedPath(t, dir+"ref-"+am.file+".txt"))
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	be := cpu.New(cpu.Config{Threads: 1})
	t.Cleanup(func() { be.Close() })
	m, err := model.New(f, be)
	if err != nil {
		t.Fatal(err)
	}
	// llama.cpp's references were computed with an F32 KV cache.
	if err := m.SetKVType(gpu.F32); err != nil {
		t.Fatal(err)
	}
	return m, refs
}

// checkArchRef compares a sequence with llama.cpp's: step-0 logits within
// tol, and the ids up to the first step whose reference margin is below
// 2·tol. It returns that step (len(ids) when there is none) and the
// step-0 max difference.
func checkArchRef(t *testing.T, name string, s *archSeq, ref modeltest.ArchCase, tol float64) (int, float64) {
	t.Helper()
	if len(s.logits0) != len(ref.Logits0) {
		t.Fatalf("%s: %d step-0 logits, reference %d", name, len(s.logits0), len(ref.Logits0))
	}
	diff := modeltest.MaxAbsDiff(s.logits0, ref.Logits0)
	if diff > tol {
		t.Errorf("%s: step-0 logits differ from llama.cpp's by up to %.3g (> %g)", name, diff, tol)
	}
	upTo := len(ref.IDs)
	for i, mg := range ref.Margins {
		if mg < 2*tol {
			upTo = i
			break
		}
	}
	got := s.gen()
	for i := 0; i < upTo; i++ {
		if got[i] != ref.IDs[i] {
			t.Errorf("%s: step %d: id %d, llama.cpp %d (compared up to step %d)\n got  %v\n want %v", name, i, got[i], ref.IDs[i], upTo, got[:upTo], ref.IDs[:upTo])
			break
		}
	}
	return upTo, diff
}

// sameSeq checks that a sequence decoded another way has the very ids
// and step-0 logits (bit for bit) of the sequence decoded alone: batching,
// chunked prefill and recompute after preemption change nothing.
func sameSeq(t *testing.T, name string, got, want *archSeq) {
	t.Helper()
	for j := range want.logits0 {
		if math.Float32bits(got.logits0[j]) != math.Float32bits(want.logits0[j]) {
			t.Errorf("%s: step-0 logit %d is %v, alone %v", name, j, got.logits0[j], want.logits0[j])
			break
		}
	}
	g, w := got.gen(), want.gen()
	for i := range w {
		if g[i] != w[i] {
			t.Errorf("%s: step %d: id %d, alone %d\n got  %v\n want %v", name, i, g[i], w[i], g, w)
			break
		}
	}
}

// TestArchReference runs the qwen3 and gemma3 models of
// shared/models/archs against llama.cpp's greedy outputs: each case alone,
// the five batched together, batched with prefill in chunks of 7 tokens,
// and batched with each sequence preempted (its cache dropped and
// recomputed, in chunks) once mid-generation. Every way must agree with
// llama.cpp (checkArchRef) and with the case decoded alone bit for bit.
func TestArchReference(t *testing.T) {
	t.Parallel()
	const steps = 40
	for _, am := range archModels {
		t.Run(am.file, func(t *testing.T) {
			m, refs := loadArch(t, am)
			var prompts [][]int32
			for _, r := range refs {
				prompts = append(prompts, r.Prompt)
			}
			// (a) alone.
			alone := make([]*archSeq, len(refs))
			for i, ref := range refs {
				r := newArchRun(t, m, prompts[i:i+1], steps, 0)
				for !r.done(steps) {
					r.step(t, steps)
				}
				alone[i] = r.seqs[0]
				upTo, diff := checkArchRef(t, fmt.Sprintf("alone case %d", i), alone[i], ref, am.tol)
				same := 0
				for same < len(ref.IDs) && alone[i].gen()[same] == ref.IDs[same] {
					same++
				}
				t.Logf("case %d (%d prompt tokens): step-0 max |Δlogit| %.3g; compared through step %d (first margin < %g); the ids agree with llama.cpp's for %d of %d steps", i, len(ref.Prompt), diff, upTo, 2*am.tol, same, len(ref.IDs))
			}
			ways := []struct {
				name    string
				chunk   int
				preempt bool
			}{
				{"batched", 0, false},
				{"chunked prefill", 7, false},
				{"preempted", 7, true},
			}
			for _, w := range ways {
				r := newArchRun(t, m, prompts, steps, w.chunk)
				dropped := make([]bool, len(prompts))
				for !r.done(steps) {
					if w.preempt {
						// Sequence i is preempted after 5+4i generated
						// tokens, each at a different step.
						for i, s := range r.seqs {
							if !dropped[i] && len(s.gen()) == 5+4*i && s.inKV == len(s.toks)-1 {
								r.preempt(i)
								dropped[i] = true
							}
						}
					}
					r.step(t, steps)
				}
				for i, s := range r.seqs {
					name := fmt.Sprintf("%s case %d", w.name, i)
					if w.preempt && !dropped[i] {
						t.Errorf("%s: never preempted", name)
					}
					checkArchRef(t, name, s, refs[i], am.tol)
					sameSeq(t, name, s, alone[i])
				}
			}
		})
	}
}

// archTiny is synth.Tiny in the given architecture: for gemma3 with heads
// of 128 (twice width/heads, so Q and the attention output are wider than
// the model), a window of 5, 6 layers (five local, one global) and the
// classifier tied to the embedding.
func archTiny(arch string, dt gpu.DType) synth.Config {
	c := synth.Tiny(dt)
	c.Arch, c.Seed = arch, 9
	if arch == "gemma3" {
		c.HeadDim, c.Window, c.Layers, c.RopeBase, c.Tied = 128, 5, 6, 1e6, true
	}
	return c
}

// TestArchBatchInvariance is TestBatchInvariance for generated qwen3 and
// gemma3 models: a row's logits are bit-identical whether its sequence is
// prefilled at once or decoded token by token beside two others, with
// sliding-window layers and per-head norms.
func TestArchBatchInvariance(t *testing.T) {
	t.Parallel()
	for _, arch := range []string{"qwen3", "gemma3"} {
		for _, dt := range []gpu.DType{gpu.F32, gpu.Q8_0, gpu.Q4_0, gpu.Q4_K} {
			f := modeltest.Build(t, archTiny(arch, dt))
			be := cpu.New(cpu.Config{Threads: 2})
			m, err := model.New(f, be)
			if err != nil {
				t.Fatalf("%s %v: %v", arch, dt, err)
			}
			if arch == "gemma3" && (m.HeadDim != 128 || m.SlidingWindow != 5 || !m.LocalLayer(4) || m.LocalLayer(5)) {
				t.Fatalf("gemma3 config %+v", m.Config)
			}
			ids := []int32{1, 40, 7, 290, 3, 100, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}
			n := len(ids)
			kv, _ := m.NewKV(8, 16)
			pos := make([]int32, n)
			rows := make([]int32, n)
			for i := range pos {
				pos[i], rows[i] = int32(i), int32(i)
			}
			all := make([]float32, n*m.Vocab)
			if err := m.Forward(kv, ids, &gpu.Batch{Pos: pos, Seq: make([]int32, n), Tables: [][]int32{{0, 1}}}, rows, all); err != nil {
				t.Fatal(err)
			}
			kv2, _ := m.NewKV(8, 16)
			one := make([]float32, 3*m.Vocab)
			for i := 0; i < n; i++ {
				b := &gpu.Batch{Pos: []int32{int32(i), int32(i), 0}, Seq: []int32{0, 1, 2}, Tables: [][]int32{{4, 5}, {0, 1}, {6}}}
				if err := m.Forward(kv2, []int32{ids[(i+3)%n], ids[i], 9}, b, []int32{0, 1, 2}, one); err != nil {
					t.Fatal(err)
				}
				got, want := one[m.Vocab:2*m.Vocab], all[i*m.Vocab:(i+1)*m.Vocab]
				for j := range got {
					if math.IsNaN(float64(got[j])) || math.Float32bits(got[j]) != math.Float32bits(want[j]) {
						t.Fatalf("%s %v: position %d logit %d: decoded %v, prefilled %v", arch, dt, i, j, got[j], want[j])
					}
				}
			}
			be.Close()
		}
	}
}

// TestArchEveryType is TestEveryType for qwen3 and gemma3: each storage
// type against the same model dequantized to F32.
func TestArchEveryType(t *testing.T) {
	t.Parallel()
	ids := []int32{1, 40, 7, 290, 3, 100, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}
	for _, arch := range []string{"qwen3", "gemma3"} {
		for _, dt := range gpu.DTypes {
			f := modeltest.Build(t, archTiny(arch, dt))
			be := cpu.New(cpu.Config{Threads: 1})
			m, err := model.New(f, be)
			if err != nil {
				t.Fatalf("%s %v: %v", arch, dt, err)
			}
			got := prefillLogits(t, m, ids)
			ref := prefillLogits(t, dequantizedCopy(t, f, be), ids)
			var worst, norm float64
			for i := range got {
				if math.IsNaN(float64(got[i])) {
					t.Fatalf("%s %v: NaN logit", arch, dt)
				}
				worst = math.Max(worst, math.Abs(float64(got[i]-ref[i])))
				norm = math.Max(norm, math.Abs(float64(ref[i])))
			}
			tol := 1e-4
			if dt != gpu.F32 && dt != gpu.F16 && dt != gpu.BF16 {
				tol = 0.05
			}
			if worst > tol*(1+norm) {
				t.Errorf("%s %v: logits differ from the dequantized F32 model by %g (max |logit| %g)", arch, dt, worst, norm)
			}
			be.Close()
		}
	}
}

// noArchOps hides the cpu backend's gpu.ArchOps, as a backend without the
// kernels (CUDA today) is.
type noArchOps struct{ gpu.Backend }

// TestArchConfig checks the configuration read from qwen3 and gemma3
// files, and the refusals: a backend without gpu.ArchOps, a value_length
// that differs from key_length, a gemma3 file without a window, and a
// sliding window on llama.
func TestArchConfig(t *testing.T) {
	t.Parallel()
	be := cpu.New(cpu.Config{Threads: 1})
	defer be.Close()
	build := func(c synth.Config, edit func(w *gguf.Writer)) *gguf.File {
		w, err := synth.Build(c)
		if err != nil {
			t.Fatal(err)
		}
		if edit != nil {
			edit(w)
		}
		var buf bytes.Buffer
		w.WriteTo(&buf)
		f, err := gguf.Parse(buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	g, err := model.ConfigFromGGUF(build(archTiny("gemma3", gpu.F32), nil))
	if err != nil {
		t.Fatal(err)
	}
	if !g.QKNorm || !g.PostNorms || !g.GELU || g.EmbedScale != 16 || g.HeadDim != 128 || g.SlidingWindow != 5 ||
		!g.RoPE.NeoX || g.RoPE.Base != 1e6 || g.LocalRoPE.Base != 10000 || !g.LocalRoPE.NeoX || !g.TiedOutput {
		t.Errorf("gemma3 config %+v", g)
	}
	for i, local := range []bool{true, true, true, true, true, false, true, true, true, true, true, false} {
		w, r := g.LayerAttention(i)
		if g.LocalLayer(i) != local || (local && (w != 5 || r.Base != 10000)) || (!local && (w != 0 || r.Base != 1e6)) {
			t.Errorf("gemma3 layer %d: local %v, window %d, rope base %g", i, g.LocalLayer(i), w, r.Base)
		}
	}
	q, err := model.ConfigFromGGUF(build(archTiny("qwen3", gpu.F32), nil))
	if err != nil {
		t.Fatal(err)
	}
	if !q.QKNorm || q.PostNorms || q.GELU || q.EmbedScale != 0 || q.SlidingWindow != 0 || !q.RoPE.NeoX || q.HeadDim != 64 {
		t.Errorf("qwen3 config %+v", q)
	}
	if w, _ := q.LayerAttention(0); w != 0 {
		t.Errorf("qwen3 layer 0 has window %d", w)
	}
	if _, err := model.New(build(archTiny("qwen3", gpu.F32), nil), noArchOps{be}); !errors.Is(err, model.ErrUnsupportedArch) {
		t.Errorf("qwen3 on a backend without ArchOps: %v", err)
	}
	bad := []struct {
		name string
		c    synth.Config
		edit func(w *gguf.Writer)
	}{
		{"value_length", archTiny("gemma3", gpu.F32), func(w *gguf.Writer) { w.Set("gemma3.attention.value_length", uint32(64)) }},
		{"no window", archTiny("gemma3", gpu.F32), func(w *gguf.Writer) { w.Set("gemma3.attention.sliding_window", uint32(0)) }},
		{"llama window", synth.Tiny(gpu.F32), func(w *gguf.Writer) { w.Set("llama.attention.sliding_window", uint32(8)) }},
		{"llama key_length", synth.Tiny(gpu.F32), func(w *gguf.Writer) { w.Set("llama.attention.key_length", uint32(128)) }},
	}
	for _, b := range bad {
		if _, err := model.ConfigFromGGUF(build(b.c, b.edit)); !errors.Is(err, model.ErrBadConfig) {
			t.Errorf("%s: err %v, want ErrBadConfig", b.name, err)
		}
	}
}

// TestArchShapes checks the synth shapes of the real models by their
// parameter counts (Qwen3-0.6B: 596M with the tied embedding; Gemma 3
// 270M: 268M) without generating them.
func TestArchShapes(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]float64{"qwen3-0.6b": 596e6, "gemma3-270m": 268e6, "134m": 134e6} {
		c, ok := synth.Shape(name, gpu.Q8_0)
		if !ok {
			t.Fatalf("shape %s unknown", name)
		}
		if p := float64(c.Params()); math.Abs(p-want) > 0.01*want {
			t.Errorf("%s: %.1fM parameters, want about %.0fM", name, p/1e6, want/1e6)
		}
	}
	if _, ok := synth.Shape("7b", gpu.F32); ok {
		t.Error("shape 7b known")
	}
}

// TestArchQ8KV runs the reference cases on a Q8_0 KV cache (int8 values,
// a float16 scale per 32 of a head's components, as llama.cpp's
// --cache-type-k/-v q8_0): the step-0 logits move from llama.cpp's F32-KV
// ones by the cache's rounding (each K and V value by up to half a step,
// 1/254 of its block's largest), and the greedy ids agree wherever the
// reference's margin exceeds that.
func TestArchQ8KV(t *testing.T) {
	t.Parallel()
	const steps = 40
	for _, am := range archModels {
		t.Run(am.file, func(t *testing.T) {
			m, refs := loadArch(t, am)
			if err := m.SetKVType(gpu.Q8_0); err != nil {
				t.Fatal(err)
			}
			for i, ref := range refs {
				r := newArchRun(t, m, [][]int32{ref.Prompt}, steps, 0)
				for !r.done(steps) {
					r.step(t, steps)
				}
				upTo, diff := checkArchRef(t, fmt.Sprintf("case %d", i), r.seqs[0], ref, q8KVTol)
				t.Logf("case %d: step-0 max |Δlogit| %.3g against llama.cpp's F32 KV; ids compared through step %d", i, diff, upTo)
			}
		})
	}
}

// q8KVTol bounds the step-0 logits of TestArchQ8KV against the F32-KV
// reference (see there): measured 0.014–0.022 (qwen3) and 0.021–0.035
// (gemma3) on these models, against 1e-5 and 1.5e-3 with an F32 cache.
const q8KVTol = 0.05
