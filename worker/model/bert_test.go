package model_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/gpu/quant"
	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/model/synth"
)

// encoderCase builds a small generated encoder of arch and type ty.
func encoderCase(t *testing.T, arch string, ty gpu.DType) (*gguf.File, *model.Model) {
	t.Helper()
	c := synth.BERTSmall(ty)
	c.Arch, c.Layers, c.Seed = arch, 2, 7
	if arch == "nomic-bert" {
		c.Pooling = 1
	}
	return synthModel(t, c)
}

// synthModel builds the generated model c on the CPU backend.
func synthModel(t *testing.T, c synth.Config) (*gguf.File, *model.Model) {
	t.Helper()
	f := modeltest.Build(t, c)
	m, err := model.New(f, cpu.New(cpu.Config{Threads: 2}))
	if err != nil {
		t.Fatal(err)
	}
	return f, m
}

// hidden runs inputs through ForwardHidden in one pass and returns each
// input's states.
func hidden(t *testing.T, m *model.Model, inputs ...[]int32) [][]float32 {
	t.Helper()
	var toks, pos, seq []int32
	var tables [][]int32
	blocks := int32(0)
	for i, in := range inputs {
		var tab []int32
		for j, id := range in {
			toks, pos, seq = append(toks, id), append(pos, int32(j)), append(seq, int32(i))
			if j%16 == 0 {
				tab, blocks = append(tab, blocks), blocks+1
			}
		}
		tables = append(tables, tab)
	}
	kv, err := m.NewKV(int(blocks), 16)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(toks)*m.Dim)
	if err := m.ForwardHidden(kv, toks, &gpu.Batch{Pos: pos, Seq: seq, Tables: tables}, out); err != nil {
		t.Fatal(err)
	}
	res := make([][]float32, len(inputs))
	for i, in := range inputs {
		res[i], out = out[:len(in)*m.Dim], out[len(in)*m.Dim:]
	}
	return res
}

func TestEncoderLoads(t *testing.T) {
	t.Parallel()
	for _, arch := range []string{"bert", "nomic-bert"} {
		_, m := encoderCase(t, arch, gpu.F16)
		if m.KVType() != gpu.F32 {
			t.Errorf("%s: K and V kept as %v, want F32 (llama.cpp's)", arch, m.KVType())
		}
		if !m.Encoder || m.Dim != 128 || m.Heads != 4 || m.HeadDim != 32 || m.Context != 512 || m.NormEps != 1e-12 {
			t.Errorf("%s: config %+v", arch, m.Config)
		}
		if want := map[string]model.Pooling{"bert": model.PoolCLS, "nomic-bert": model.PoolMean}[arch]; m.Pooling != want {
			t.Errorf("%s: pooling %v, want %v", arch, m.Pooling, want)
		}
		if m.Type() != gpu.F16 || m.WeightBytes() <= 0 || m.MatMulParams() != 2*(4*128*128+2*128*512)+int64(map[string]int{"nomic-bert": 2 * 128 * 512}[arch]) {
			t.Errorf("%s: type %v, %d weight bytes, %d params", arch, m.Type(), m.WeightBytes(), m.MatMulParams())
		}
	}
}

// The pass agrees with a plain float64 transcription of the architecture
// (exact GELU where the model takes ggml's float16 table).
func TestEncoderMatchesReference(t *testing.T) {
	t.Parallel()
	for _, arch := range []string{"bert", "nomic-bert"} {
		f, m := encoderCase(t, arch, gpu.F32)
		in := []int32{101, 300, 301, 302, 350, 400, 999, 102}
		got := hidden(t, m, in)[0]
		want := referenceEncode(t, f, m.Config, in)
		worst := 0.0
		for i, w := range want {
			worst = max(worst, math.Abs(float64(got[i])-w))
		}
		t.Logf("%s: max |Δ| %.2e over %d values", arch, worst, len(want))
		if worst > 2e-3 {
			t.Errorf("%s: max |Δ| %.2e against the reference", arch, worst)
		}
	}
}

// An input's states have the same bits alone and beside other inputs.
func TestEncoderBatchInvariance(t *testing.T) {
	t.Parallel()
	for _, arch := range []string{"bert", "nomic-bert"} {
		_, m := encoderCase(t, arch, gpu.Q8_0)
		a, b, c := []int32{101, 500, 600, 102}, []int32{101, 700, 701, 702, 703, 704, 102}, []int32{101, 102}
		alone := hidden(t, m, b)[0]
		together := hidden(t, m, a, b, c)
		if !slices.Equal(alone, together[1]) {
			t.Errorf("%s: an input's states change with the inputs beside it", arch)
		}
		if !slices.Equal(hidden(t, m, a)[0], together[0]) || !slices.Equal(hidden(t, m, c)[0], together[2]) {
			t.Errorf("%s: first or last input changes in a batch", arch)
		}
	}
}

func TestEncoderRefuses(t *testing.T) {
	t.Parallel()
	_, gemma := gemmaEmbeddingCase(t, gpu.F32)
	_, m := encoderCase(t, "bert", gpu.F32)
	b := &gpu.Batch{Pos: []int32{0, 1}, Seq: []int32{0, 0}, Tables: [][]int32{{0}}}
	for _, m := range []*model.Model{m, gemma} {
		kv, err := m.NewKV(4, 16)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Forward(kv, []int32{101, 102}, b, []int32{1}, make([]float32, m.Vocab)); !errors.Is(err, model.ErrEncoderOnly) {
			t.Errorf("%s: Forward: %v, want ErrEncoderOnly", m.Arch, err)
		}
		if err := m.ForwardGroupsHidden(kv, []int32{101, 102}, []gpu.Batch{*b}, nil, nil, []int32{1}, make([]float32, m.Dim), nil); !errors.Is(err, model.ErrEncoderOnly) {
			t.Errorf("%s: ForwardGroupsHidden: %v, want ErrEncoderOnly", m.Arch, err)
		}
	}
	kv, err := m.NewKV(4, 16)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		pos, seq []int32
		tables   [][]int32
		wantErr  error
	}{
		{"not from 0", []int32{1, 2}, []int32{0, 0}, [][]int32{{0}}, nil},
		{"a gap", []int32{0, 2}, []int32{0, 0}, [][]int32{{0}}, nil},
		{"split sequence", []int32{0, 0, 1}, []int32{0, 1, 0}, [][]int32{{0}, {1}}, nil},
		{"past the context", []int32{0, 512}, []int32{0, 0}, [][]int32{{0}}, model.ErrContextOverflow},
		{"no table", []int32{0, 1}, []int32{0, 0}, nil, nil},
		{"a block short", []int32{0, 1}, []int32{1, 1}, [][]int32{{0}, {}}, nil},
		{"a missing block", []int32{0, 1}, []int32{0, 0}, [][]int32{{-1}}, nil},
	}
	for _, tt := range tests {
		toks := make([]int32, len(tt.pos))
		err := m.ForwardHidden(kv, toks, &gpu.Batch{Pos: tt.pos, Seq: tt.seq, Tables: tt.tables}, make([]float32, len(toks)*m.Dim))
		if err == nil || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.wantErr)
		}
	}
}

func TestEncoderLoadErrors(t *testing.T) {
	t.Parallel()
	bert := synth.BERTSmall(gpu.F32)
	bert.Layers = 1
	gemma := synth.EmbeddingGemmaSmall(gpu.F32)
	oneLayer := gemma
	oneLayer.Layers = 1
	for _, tt := range []struct {
		c       synth.Config
		key     string // set to val, or deleted (val nil); "": as generated
		val     any
		wantErr error
	}{
		{bert, "bert.attention.causal", true, model.ErrUnsupportedArch},
		{bert, "bert.attention.layer_norm_epsilon", nil, model.ErrBadConfig},
		{gemma, "gemma-embedding.dense_2_feat_out", uint32(256), model.ErrBadConfig},
		{gemma, "gemma-embedding.attention.sliding_window", nil, model.ErrBadConfig},
		{oneLayer, "", nil, model.ErrBadConfig}, // the symmetric window needs a second layer's slot
	} {
		f := modeltest.Build(t, tt.c)
		if tt.val != nil {
			f.Metadata[tt.key] = tt.val
		} else if tt.key != "" {
			delete(f.Metadata, tt.key)
		}
		if _, err := model.New(f, cpu.New(cpu.Config{Threads: 1})); !errors.Is(err, tt.wantErr) {
			t.Errorf("%s %s=%v: %v, want %v", tt.c.Arch, tt.key, tt.val, err, tt.wantErr)
		}
	}
}

// referenceEncode computes an input's final states in float64 from the
// file's tensors, written out from llama.cpp's llm_build_bert.
func referenceEncode(t *testing.T, f *gguf.File, c model.Config, in []int32) []float64 {
	t.Helper()
	get := func(name string) []float64 { return refTensor(t, f, name) }
	matmul := refMatMul
	d, n := c.Dim, len(in)
	norm := func(x [][]float64, name string) {
		w, b := get(name+".weight"), get(name+".bias")
		for _, row := range x {
			var mean, vr float64
			for _, v := range row {
				mean += v
			}
			mean /= float64(len(row))
			for _, v := range row {
				vr += (v - mean) * (v - mean)
			}
			s := 1 / math.Sqrt(vr/float64(len(row))+float64(c.NormEps))
			for j := range row {
				row[j] = (row[j]-mean)*s*w[j] + b[j]
			}
		}
	}
	add := refAdd
	rope := func(x [][]float64) {
		half := c.HeadDim / 2
		for p, row := range x {
			for h := 0; h < c.Heads; h++ {
				for j := 0; j < half; j++ {
					th := float64(p) * math.Pow(float64(c.RoPE.Base), -2*float64(j)/float64(c.HeadDim))
					a, b := row[h*c.HeadDim+j], row[h*c.HeadDim+j+half]
					row[h*c.HeadDim+j] = a*math.Cos(th) - b*math.Sin(th)
					row[h*c.HeadDim+j+half] = a*math.Sin(th) + b*math.Cos(th)
				}
			}
		}
	}
	emb, typ, pos := get("token_embd.weight"), get("token_types.weight"), get("position_embd.weight")
	x := make([][]float64, n)
	for i, id := range in {
		x[i] = make([]float64, d)
		for j := range x[i] {
			x[i][j] = emb[int(id)*d+j] + typ[j]
			if pos != nil {
				x[i][j] += pos[i*d+j]
			}
		}
	}
	norm(x, "token_embd_norm")
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		var q, k, v [][]float64
		if qkv := get(p + "attn_qkv.weight"); qkv != nil {
			all := matmul(x, qkv, get(p+"attn_qkv.bias"))
			for _, row := range all {
				q, k, v = append(q, row[:d]), append(k, row[d:2*d]), append(v, row[2*d:])
			}
		} else {
			q = matmul(x, get(p+"attn_q.weight"), get(p+"attn_q.bias"))
			k = matmul(x, get(p+"attn_k.weight"), get(p+"attn_k.bias"))
			v = matmul(x, get(p+"attn_v.weight"), get(p+"attn_v.bias"))
		}
		if c.Arch == "nomic-bert" {
			rope(q)
			rope(k)
		}
		att := refAttention(q, k, v, c.Heads, c.Heads, c.HeadDim, func(i, j int) bool { return true })
		a := matmul(att, get(p+"attn_output.weight"), get(p+"attn_output.bias"))
		add(a, x)
		norm(a, p+"attn_output_norm")
		x = a
		up := matmul(x, get(p+"ffn_up.weight"), get(p+"ffn_up.bias"))
		if gw := get(p + "ffn_gate.weight"); gw != nil {
			gate := matmul(x, gw, nil)
			for r := range up {
				for j, g := range gate[r] {
					up[r][j] *= g / (1 + math.Exp(-g))
				}
			}
		} else {
			for _, row := range up {
				for j, u := range row {
					row[j] = 0.5 * u * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(u+0.044715*u*u*u)))
				}
			}
		}
		ff := matmul(up, get(p+"ffn_down.weight"), get(p+"ffn_down.bias"))
		add(ff, x)
		norm(ff, p+"layer_output_norm")
		x = ff
	}
	var out []float64
	for _, row := range x {
		out = append(out, row...)
	}
	return out
}

// refTensor returns a tensor of f in float64 (nil when f has none).
func refTensor(t *testing.T, f *gguf.File, name string) []float64 {
	t.Helper()
	ti, ok := f.Tensor(name)
	if !ok {
		return nil
	}
	data, err := f.Data(ti)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, ti.Elements())
	if err := quant.Dequantize(ti.Type, data, v); err != nil {
		t.Fatal(err)
	}
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// refMatMul returns x·Wᵀ + b for each row of x (W stored out×in; b nil:
// none).
func refMatMul(x [][]float64, w, b []float64) [][]float64 {
	outDim := len(w) / len(x[0])
	y := make([][]float64, len(x))
	for r, row := range x {
		y[r] = make([]float64, outDim)
		for o := range y[r] {
			var s float64
			for i, v := range row {
				s += w[o*len(row)+i] * v
			}
			if b != nil {
				s += b[o]
			}
			y[r][o] = s
		}
	}
	return y
}

// refAdd adds y to x, row by row.
func refAdd(x, y [][]float64) {
	for r := range x {
		for j := range x[r] {
			x[r][j] += y[r][j]
		}
	}
}

// refAttention is softmax(q·kᵀ/√hd)·v for each row and head of q, over
// the rows j of k and v that visible(i, j) allows, a query head h taking
// kv head h/(heads/kvHeads).
func refAttention(q, k, v [][]float64, heads, kvHeads, hd int, visible func(i, j int) bool) [][]float64 {
	att := make([][]float64, len(q))
	for i := range att {
		att[i] = make([]float64, heads*hd)
		for h := 0; h < heads; h++ {
			o, ko := h*hd, h/(heads/kvHeads)*hd
			s := make([]float64, len(k))
			mx := math.Inf(-1)
			for j := range s {
				s[j] = math.Inf(-1)
				if !visible(i, j) {
					continue
				}
				s[j] = 0
				for e := 0; e < hd; e++ {
					s[j] += q[i][o+e] * k[j][ko+e]
				}
				s[j] /= math.Sqrt(float64(hd))
				mx = max(mx, s[j])
			}
			var sum float64
			for j := range s {
				s[j] = math.Exp(s[j] - mx)
				sum += s[j]
			}
			for j := range s {
				for e := 0; e < hd; e++ {
					att[i][o+e] += s[j] / sum * v[j][ko+e]
				}
			}
		}
	}
	return att
}
