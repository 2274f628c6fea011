package model_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
	"github.com/zerolayer/zerolayer/worker/model/synth"
)

// gemmaEmbeddingCase builds synth.EmbeddingGemmaSmall of type ty.
func gemmaEmbeddingCase(t *testing.T, ty gpu.DType) (*gguf.File, *model.Model) {
	t.Helper()
	c := synth.EmbeddingGemmaSmall(ty)
	c.Seed = 5
	return synthModel(t, c)
}

// gemmaInputs are inputs of every length class of the symmetric window
// (h = 12): within it (1, 5, 13), past it on one side or both (14, 20,
// 25, 26, 40), and much longer (100, 130).
func gemmaInputs() [][]int32 {
	var ins [][]int32
	for i, n := range []int{1, 5, 13, 14, 20, 25, 26, 40, 100, 130} {
		in := make([]int32, n)
		for j := range in {
			in[j] = int32(3 + (j*31+i*7)%500)
		}
		ins = append(ins, in)
	}
	return ins
}

func TestGemmaEmbeddingLoads(t *testing.T) {
	t.Parallel()
	_, m := gemmaEmbeddingCase(t, gpu.F16)
	c := m.Config
	if !c.Encoder || c.SlidingWindow != 24 || c.SlidingPeriod != 3 || c.LocalRoPE.Base != 20000 || c.RoPE.Base != 1e6 ||
		c.DenseHidden != 512 || c.Pooling != model.PoolMean || c.HeadDim != 48 || c.KVHeads != 2 || c.EmbedScale == 0 {
		t.Errorf("config %+v", c)
	}
	for i, want := range []bool{true, true, false, true} {
		if m.LocalLayer(i) != want {
			t.Errorf("layer %d local: %v, want %v", i, m.LocalLayer(i), want)
		}
	}
	if m.KVType() != gpu.F32 {
		t.Errorf("K and V kept as %v, want F32", m.KVType())
	}
	if l := m.KVLayout(); l.GroupLayers != 4 || len(l.Groups) != 1 {
		t.Errorf("layout %+v, want the whole model's", l)
	}
	// No output head among the matrices a token meets.
	if want := int64(4 * (2*128*192 + 2*128*96 + 3*128*384)); m.MatMulParams() != want || m.Type() != gpu.F16 {
		t.Errorf("%d params of type %v, want %d of F16", m.MatMulParams(), m.Type(), want)
	}
}

// The pass agrees with a plain float64 transcription of llama.cpp's
// llm_build_gemma_embedding, symmetric window and all, for inputs alone
// and together.
func TestGemmaEmbeddingMatchesReference(t *testing.T) {
	t.Parallel()
	f, m := gemmaEmbeddingCase(t, gpu.F32)
	ins := gemmaInputs()
	together := hidden(t, m, ins...)
	worst := 0.0
	for i, in := range ins {
		want := referenceGemmaEmbedding(t, f, m.Config, in)
		for j, w := range want {
			worst = max(worst, math.Abs(float64(together[i][j])-w))
		}
		if !slices.Equal(hidden(t, m, in)[0], together[i]) {
			t.Errorf("input %d (%d tokens): its states alone differ from those beside the others", i, len(in))
		}
	}
	t.Logf("max |Δ| %.2e", worst)
	if worst > 1e-3 {
		t.Errorf("max |Δ| %.2e against the reference", worst)
	}
}

// Project is dense_3·(dense_2·v).
func TestGemmaEmbeddingProject(t *testing.T) {
	t.Parallel()
	f, m := gemmaEmbeddingCase(t, gpu.F32)
	v := make([]float32, m.Dim)
	x := make([]float64, m.Dim)
	for i := range v {
		v[i] = float32(math.Sin(float64(i)))
		x[i] = float64(v[i])
	}
	want := refMatMul(refMatMul([][]float64{x}, refTensor(t, f, "dense_2.weight"), nil), refTensor(t, f, "dense_3.weight"), nil)[0]
	if err := m.Project(v); err != nil {
		t.Fatal(err)
	}
	for i := range v {
		if math.Abs(float64(v[i])-want[i]) > 1e-4 {
			t.Fatalf("component %d: %g, want %g", i, v[i], want[i])
		}
	}
	if err := m.Project(v[:3]); err == nil {
		t.Error("Project of 3 values: no error")
	}
	_, bert := encoderCase(t, "bert", gpu.F32)
	before := slices.Clone(v)
	if err := bert.Project(v); err != nil || !slices.Equal(v, before) {
		t.Errorf("a model without dense layers changed the vector: %v", err)
	}
}

// referenceGemmaEmbedding computes an input's final states in float64
// from the file's tensors, written out from llama.cpp's
// llm_build_gemma_embedding and its symmetric sliding-window mask.
func referenceGemmaEmbedding(t *testing.T, f *gguf.File, c model.Config, in []int32) []float64 {
	t.Helper()
	get := func(name string) []float64 { return refTensor(t, f, name) }
	d, n, hd := c.Dim, len(in), c.HeadDim
	rms := func(row, w []float64) {
		var ss float64
		for _, v := range row {
			ss += v * v
		}
		s := 1 / math.Sqrt(ss/float64(len(row))+float64(c.NormEps))
		for j := range row {
			row[j] *= s * w[j]
		}
	}
	norm := func(x [][]float64, name string) [][]float64 {
		w := get(name)
		y := make([][]float64, len(x))
		for r, row := range x {
			y[r] = slices.Clone(row)
			rms(y[r], w)
		}
		return y
	}
	// headNormRoPE normalises each head of each row and rotates it (NeoX
	// pairs j, j+hd/2) at the row's position.
	headNormRoPE := func(x [][]float64, heads int, w []float64, base float32) {
		for p, row := range x {
			for h := 0; h < heads; h++ {
				head := row[h*hd : (h+1)*hd]
				rms(head, w)
				for j := 0; j < hd/2; j++ {
					th := float64(p) * math.Pow(float64(base), -2*float64(j)/float64(hd))
					a, b := head[j], head[j+hd/2]
					head[j], head[j+hd/2] = a*math.Cos(th)-b*math.Sin(th), a*math.Sin(th)+b*math.Cos(th)
				}
			}
		}
	}
	emb := get("token_embd.weight")
	x := make([][]float64, n)
	for i, id := range in {
		x[i] = make([]float64, d)
		for j := range x[i] {
			x[i][j] = emb[int(id)*d+j] * math.Sqrt(float64(d))
		}
	}
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		local := c.LocalLayer(l)
		base := c.RoPE.Base
		if local {
			base = c.LocalRoPE.Base
		}
		xn := norm(x, p+"attn_norm.weight")
		q, k, v := refMatMul(xn, get(p+"attn_q.weight"), nil), refMatMul(xn, get(p+"attn_k.weight"), nil), refMatMul(xn, get(p+"attn_v.weight"), nil)
		headNormRoPE(q, c.Heads, get(p+"attn_q_norm.weight"), base)
		headNormRoPE(k, c.KVHeads, get(p+"attn_k_norm.weight"), base)
		att := refAttention(q, k, v, c.Heads, c.KVHeads, hd, func(i, j int) bool {
			return !local || (i-j <= c.SlidingWindow/2 && j-i <= c.SlidingWindow/2)
		})
		a := norm(refMatMul(att, get(p+"attn_output.weight"), nil), p+"post_attention_norm.weight")
		refAdd(x, a)
		xn = norm(x, p+"ffn_norm.weight")
		gate, up := refMatMul(xn, get(p+"ffn_gate.weight"), nil), refMatMul(xn, get(p+"ffn_up.weight"), nil)
		for r := range up {
			for j, g := range gate[r] {
				up[r][j] *= 0.5 * g * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(g+0.044715*g*g*g)))
			}
		}
		refAdd(x, norm(refMatMul(up, get(p+"ffn_down.weight"), nil), p+"post_ffw_norm.weight"))
	}
	var out []float64
	for _, row := range norm(x, "output_norm.weight") {
		out = append(out, row...)
	}
	return out
}
