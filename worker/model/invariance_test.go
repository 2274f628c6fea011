package model_test

import (
	"math"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/model/synth"
)

// TestBatchInvariance checks that a row's logits do not depend on how the
// rows are batched: one prefill of n tokens, token-by-token decoding, and
// the same sequence batched beside others give bit-identical logits. The
// scheduler relies on this to resume a preempted sequence (recompute) and
// to batch jobs without changing their greedy output.
func TestBatchInvariance(t *testing.T) {
	t.Parallel()
	for _, dt := range gpu.DTypes {
		f := modeltest.Build(t, synthTiny(dt))
		be := cpu.New(cpu.Config{Threads: 2})
		m, err := model.New(f, be)
		if err != nil {
			t.Fatal(err)
		}
		ids := []int32{1, 40, 7, 290, 3, 100, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}
		n := len(ids)
		// Prefill: all rows at once, logits for every row.
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
		// Decode: one token per step, with two other sequences beside it.
		kv2, _ := m.NewKV(8, 16)
		one := make([]float32, 3*m.Vocab)
		for i := 0; i < n; i++ {
			b := &gpu.Batch{Pos: []int32{int32(i), int32(i), 0}, Seq: []int32{0, 1, 2}, Tables: [][]int32{{4, 5}, {0, 1}, {6}}}
			if err := m.Forward(kv2, []int32{ids[(i+3)%n], ids[i], 9}, b, []int32{0, 1, 2}, one); err != nil {
				t.Fatal(err)
			}
			got, want := one[m.Vocab:2*m.Vocab], all[i*m.Vocab:(i+1)*m.Vocab]
			for j := range got {
				if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
					t.Fatalf("%v: position %d logit %d: decoded %v, prefilled %v", dt, i, j, got[j], want[j])
				}
			}
		}
		be.Close()
	}
}

// TestForwardInterruptible stops a step at every check in turn (before
// each layer's attention and its feed-forward half, and the output head),
// then runs it again: the logits must equal those of an uninterrupted run
// (the partial K/V writes of the abandoned step are overwritten with the
// same values).
func TestForwardInterruptible(t *testing.T) {
	t.Parallel()
	f := modeltest.Build(t, synthTiny(gpu.Q8_0))
	be := cpu.New(cpu.Config{Threads: 1})
	defer be.Close()
	m, err := model.New(f, be)
	if err != nil {
		t.Fatal(err)
	}
	ids := []int32{1, 40, 7, 290, 3}
	b := &gpu.Batch{Pos: []int32{0, 1, 2, 3, 4}, Seq: make([]int32, 5), Tables: [][]int32{{0}}}
	run := func(kv gpu.KV, stopAt int) ([]float32, error) {
		out := make([]float32, m.Vocab)
		asked := 0
		stop := func() bool { asked++; return asked == stopAt }
		return out, m.ForwardInterruptible(kv, ids, b, []int32{4}, out, stop)
	}
	fresh, _ := m.NewKV(1, 16)
	want, err := run(fresh, -1)
	if err != nil {
		t.Fatal(err)
	}
	// Layers ask twice each, and once more before the output head.
	for at := 1; at <= 2*m.Layers+1; at++ {
		kv, _ := m.NewKV(1, 16)
		if _, err := run(kv, at); err != model.ErrInterrupted {
			t.Fatalf("stop at check %d: err %v, want ErrInterrupted", at, err)
		}
		got, err := run(kv, -1)
		if err != nil {
			t.Fatal(err)
		}
		for j := range got {
			if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
				t.Fatalf("after a stop at check %d: logit %d = %v, want %v", at, j, got[j], want[j])
			}
		}
	}
}

// TestLongInvariance is TestBatchInvariance across attention's key tiles
// (64 positions) with an F16, an F32 and a Q8_0 KV cache, for llama and gemma3
// (sliding-window layers, window 5 and a window of 100 across tiles): a
// 300-token sequence prefilled at once, in chunks of 37, and decoded token
// by token from position 250 beside another sequence gives bit-identical
// logits for its last rows.
func TestLongInvariance(t *testing.T) {
	t.Parallel()
	const n, chunk, from = 300, 37, 250
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(3 + (i*131)%290)
	}
	for _, c := range []struct {
		name string
		cfg  synth.Config
	}{
		{"llama Q8_0", synthTiny(gpu.Q8_0)},
		{"llama Q4_0", synthTiny(gpu.Q4_0)},
		// One query head per kv head: decode rows take kv heads in pairs.
		{"llama MHA", func() synth.Config { c := synthTiny(gpu.Q8_0); c.KVHeads = c.Heads; return c }()},
		{"gemma3 F32", archTiny("gemma3", gpu.F32)},
		{"gemma3 window 100", func() synth.Config { c := archTiny("gemma3", gpu.F32); c.Window = 100; return c }()},
	} {
		for _, kvType := range []gpu.DType{gpu.F16, gpu.F32, gpu.Q8_0} {
			be := cpu.New(cpu.Config{Threads: 2})
			m, err := model.New(modeltest.Build(t, c.cfg), be)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.SetKVType(kvType); err != nil {
				t.Fatal(err)
			}
			blocks := (n + 15) / 16
			run := func(steps [][2]int, other bool) []float32 {
				kv, err := m.NewKV(2*blocks, 16)
				if err != nil {
					t.Fatal(err)
				}
				tab := make([]int32, blocks)
				tab2 := make([]int32, blocks)
				for i := range tab {
					tab[i], tab2[i] = int32(2*i+1), int32(2*i) // interleaved with the other sequence's
				}
				out := make([]float32, (n-from)*m.Vocab)
				for _, s := range steps {
					lo, hi := s[0], s[1]
					var toks, pos, seq []int32
					for p := lo; p < hi; p++ {
						toks, pos, seq = append(toks, ids[p]), append(pos, int32(p)), append(seq, 0)
					}
					if other && hi-lo == 1 { // another sequence's row beside it
						toks, pos, seq = append(toks, 7), append(pos, int32(lo%50)), append(seq, 1)
					}
					var rows []int32
					for p := max(lo, from); p < hi; p++ {
						rows = append(rows, int32(p-lo))
					}
					buf := make([]float32, len(rows)*m.Vocab)
					if err := m.Forward(kv, toks, &gpu.Batch{Pos: pos, Seq: seq, Tables: [][]int32{tab, tab2}}, rows, buf); err != nil {
						t.Fatal(err)
					}
					for i, r := range rows {
						copy(out[(int(r)+lo-from)*m.Vocab:], buf[i*m.Vocab:(i+1)*m.Vocab])
					}
				}
				return out
			}
			whole := run([][2]int{{0, n}}, false)
			var chunks, decode [][2]int
			for lo := 0; lo < n; lo += chunk {
				chunks = append(chunks, [2]int{lo, min(n, lo+chunk)})
			}
			decode = append(decode, [2]int{0, from})
			for p := from; p < n; p++ {
				decode = append(decode, [2]int{p, p + 1})
			}
			for name, got := range map[string][]float32{"chunks of 37": run(chunks, false), "token by token": run(decode, true)} {
				for i := range whole {
					if math.Float32bits(got[i]) != math.Float32bits(whole[i]) {
						t.Fatalf("%s, %v KV: %s: logit %d of row %d is %g, prefilled at once %g", c.name, kvType, name, i%m.Vocab, from+i/m.Vocab, got[i], whole[i])
					}
				}
			}
			be.Close()
		}
	}
}
