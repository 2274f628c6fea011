package cpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu"
)

// Attention matches a float64 reference for head sizes on and off the
// vector kernels' multiple of 8, for prompts (chunks of consecutive rows)
// and single rows of several sequences, serial and in parallel.
func TestAttentionShapes(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(21, 22))
	for _, sh := range []struct{ heads, kvHeads, hd, bt int }{
		{8, 4, 8, 16}, {4, 4, 16, 5}, {12, 3, 64, 16}, {6, 2, 12, 7}, {2, 1, 4, 3},
	} {
		for _, threads := range []int{1, 3} {
			name := fmt.Sprintf("%+v/threads=%d", sh, threads)
			be := cpu.New(cpu.Config{Threads: threads})
			kvDim := sh.kvHeads * sh.hd
			const layers = 2
			lens := []int{70, 1, 23}
			var tables [][]int32
			next := int32(0)
			for _, n := range lens {
				var tab []int32
				for j := 0; j < (n+sh.bt-1)/sh.bt; j++ {
					tab = append(tab, next)
					next += 2 // every other block, so that tables are not contiguous
				}
				tables = append(tables, tab)
			}
			kv, err := be.NewKV(gpu.KVConfig{Layers: layers, KVDim: kvDim, BlockTokens: sh.bt, Blocks: int(next)})
			if err != nil {
				t.Fatal(err)
			}
			// Every position of every sequence, stored with one StoreKV per layer.
			var pos, seq []int32
			for s, n := range lens {
				for p := 0; p < n; p++ {
					pos, seq = append(pos, int32(p)), append(seq, int32(s))
				}
			}
			b := &gpu.Batch{Pos: pos, Seq: seq, Tables: tables}
			ks := make([][]float32, layers)
			vs := make([][]float32, layers)
			for l := range ks {
				ks[l], vs[l] = randVec(r, len(pos)*kvDim), randVec(r, len(pos)*kvDim)
				kt, _ := be.NewTensor(len(pos), kvDim)
				vt, _ := be.NewTensor(len(pos), kvDim)
				be.Write(kt, ks[l])
				be.Write(vt, vs[l])
				be.StoreKV(kv, l, kt, vt, b)
			}
			cols := sh.heads * sh.hd
			qs := randVec(r, len(pos)*cols)
			q, _ := be.NewTensor(len(pos), cols)
			be.Write(q, qs)
			dst, _ := be.NewTensor(len(pos), cols)
			for l := 0; l < layers; l++ {
				be.Attention(dst, q, kv, l, sh.heads, b)
				got := make([]float32, len(pos)*cols)
				if err := be.Read(dst, got); err != nil {
					t.Fatal(err)
				}
				want := refAttention(qs, ks[l], vs[l], pos, seq, sh.heads, sh.kvHeads, sh.hd)
				for i := range want {
					if d := math.Abs(float64(got[i]) - want[i]); d > 2e-5*(1+math.Abs(want[i])) {
						t.Fatalf("%s layer %d: out[%d] = %g, want %g", name, l, i, got[i], want[i])
					}
				}
			}
			be.Close()
		}
	}
}

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// refAttention: row i attends to the rows j of its sequence with
// pos[j] <= pos[i] (k and v are given per row).
func refAttention(q, k, v []float32, pos, seq []int32, heads, kvHeads, hd int) []float64 {
	cols, kvDim := heads*hd, kvHeads*hd
	out := make([]float64, len(pos)*cols)
	for i := range pos {
		for h := 0; h < heads; h++ {
			kh := h / (heads / kvHeads) * hd
			var rows []int
			var sc []float64
			mx := math.Inf(-1)
			for j := range pos {
				if seq[j] != seq[i] || pos[j] > pos[i] {
					continue
				}
				var s float64
				for d := 0; d < hd; d++ {
					s += float64(q[i*cols+h*hd+d]) * float64(k[j*kvDim+kh+d])
				}
				s /= math.Sqrt(float64(hd))
				rows, sc = append(rows, j), append(sc, s)
				mx = math.Max(mx, s)
			}
			var sum float64
			for n := range sc {
				sc[n] = math.Exp(sc[n] - mx)
				sum += sc[n]
			}
			for d := 0; d < hd; d++ {
				var acc float64
				for n, j := range rows {
					acc += sc[n] / sum * float64(v[j*kvDim+kh+d])
				}
				out[i*cols+h*hd+d] = acc
			}
		}
	}
	return out
}

// A row's attention output does not depend on the rows batched with it:
// a whole prompt at once (rows in chunks), each row alone, and rows beside
// another sequence give the same bits.
func TestAttentionBatchInvariant(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(23, 24))
	for _, sh := range []struct{ heads, kvHeads, hd, bt int }{
		{8, 4, 8, 16}, {4, 2, 16, 5}, {4, 4, 64, 16}, {6, 2, 12, 7},
	} {
		for _, threads := range []int{1, 2} {
			be := cpu.New(cpu.Config{Threads: threads})
			kvDim, cols := sh.kvHeads*sh.hd, sh.heads*sh.hd
			const n = 45
			tab := make([]int32, (n+sh.bt-1)/sh.bt)
			for i := range tab {
				tab[i] = int32(2*len(tab) - 1 - 2*i) // scattered, descending
			}
			kv, err := be.NewKV(gpu.KVConfig{Layers: 1, KVDim: kvDim, BlockTokens: sh.bt, Blocks: 2 * len(tab)})
			if err != nil {
				t.Fatal(err)
			}
			pos := make([]int32, n)
			for i := range pos {
				pos[i] = int32(i)
			}
			b := &gpu.Batch{Pos: pos, Seq: make([]int32, n), Tables: [][]int32{tab}}
			kt, _ := be.NewTensor(n, kvDim)
			vt, _ := be.NewTensor(n, kvDim)
			be.Write(kt, randVec(r, n*kvDim))
			be.Write(vt, randVec(r, n*kvDim))
			be.StoreKV(kv, 0, kt, vt, b)
			qs := randVec(r, n*cols)
			q, _ := be.NewTensor(n, cols)
			be.Write(q, qs)
			all, _ := be.NewTensor(n, cols)
			be.Attention(all, q, kv, 0, sh.heads, b)
			want := make([]float32, n*cols)
			if err := be.Read(all, want); err != nil {
				t.Fatal(err)
			}
			q1, _ := be.NewTensor(2, cols)
			d1, _ := be.NewTensor(2, cols)
			got := make([]float32, 2*cols)
			for i := 0; i < n; i++ {
				// Row i after the last row of the prompt as another sequence
				// sharing its blocks.
				q2 := append(append([]float32(nil), qs[(n-1)*cols:]...), qs[i*cols:(i+1)*cols]...)
				be.Write(q1, q2)
				b1 := &gpu.Batch{Pos: []int32{n - 1, int32(i)}, Seq: []int32{1, 0}, Tables: [][]int32{tab, tab}}
				be.Attention(d1, q1, kv, 0, sh.heads, b1)
				if err := be.Read(d1, got); err != nil {
					t.Fatal(err)
				}
				for j := 0; j < cols; j++ {
					if math.Float32bits(got[cols+j]) != math.Float32bits(want[i*cols+j]) {
						t.Fatalf("%+v threads=%d: row %d [%d] = %g alone, %g in the prompt", sh, threads, i, j, got[cols+j], want[i*cols+j])
					}
				}
			}
			be.Close()
		}
	}
}
