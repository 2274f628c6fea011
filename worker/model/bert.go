package model

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/quant"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
)

// The BERT encoder family, as llama.cpp builds it (llm_build_bert):
//
//	x = LayerNorm(tok_embd[t] + token_types[0] + position_embd[p])   (bert)
//	x = LayerNorm(tok_embd[t] + token_types[0])                      (nomic-bert)
//	per layer:
//	  q, k, v = x·Wq + bq, x·Wk + bk, x·Wv + bv   (nomic-bert: one fused
//	            attn_qkv, no biases, then NeoX RoPE on q and k)
//	  a = softmax(q·kᵀ/√d)·v over every position of the input (no mask:
//	      attention is bidirectional, within the input only)
//	  x = LayerNorm(a·Wo + bo + x)                         attn_output_norm
//	  f = gelu(x·Wup + bup)·Wdown + bdown                  (nomic-bert:
//	      (silu(x·Wgate) ⊙ x·Wup)·Wdown, no biases)
//	  x = LayerNorm(f + x)                                 layer_output_norm
//
// There is no final norm and no classifier: the last x is what an
// embedding pools. An input is computed whole in one pass; its K and V
// go to the caller's arena for the pass only (F32, as llama.cpp keeps
// them uncached). Projections and attention run on the backend:
// attention is the causal kernel with every query row put at its input's
// last position, so that it sees every key of the input. The norms and
// GELU run on the host, in the order and precision of ggml's CPU kernels
// (sums of a norm in float64, GELU through ggml's float16 table), a row's
// results the same whatever rows run beside it.

// encoderArchs are the encoder architectures (general.architecture).
var encoderArchs = map[string]bool{"bert": true, "nomic-bert": true}

// encoderConfig reads what an encoder adds to the shared
// hyper-parameters: its LayerNorm epsilon, and refuses causal attention
// (llama.cpp's attention.causal, false for every BERT file).
func (c *Config) encoderConfig(f *gguf.File) error {
	c.Encoder = true
	eps, ok := f.Float(c.Arch + ".attention.layer_norm_epsilon")
	if !ok {
		return fmt.Errorf("%w: %s.attention.layer_norm_epsilon is missing", ErrBadConfig, c.Arch)
	}
	c.NormEps = float32(eps)
	if causal, ok := f.Bool(c.Arch + ".attention.causal"); ok && causal {
		return fmt.Errorf("%w: %s with causal attention (%s.attention.causal is true)", ErrUnsupportedArch, c.Arch, c.Arch)
	}
	if c.KVHeads != c.Heads {
		return fmt.Errorf("%w: %s with %d kv heads for %d heads", ErrBadConfig, c.Arch, c.KVHeads, c.Heads)
	}
	if c.Arch == "nomic-bert" {
		c.RoPE.NeoX = true
		if c.Pooling == PoolNone {
			return fmt.Errorf("%w: %s.pooling_type is missing", ErrBadConfig, c.Arch)
		}
	}
	return nil
}

// encoder holds the weights of a BERT-family model and the host buffers
// of its pass.
type encoder struct {
	pos          gpu.Matrix // position_embd: Context×Dim (bert); nil for nomic-bert
	typ          []float32  // token_types row 0, or nil
	normW, normB []float32  // token_embd_norm
	layers       []encLayer
	qkv          gpu.Tensor // the fused projection's output (nomic-bert)

	host encScratch
}

type encLayer struct {
	wq, wk, wv, wqkv gpu.Matrix
	bq, bk, bv       gpu.Tensor // 1×Dim; nil where the file has none
	bqkv             []float32  // nil where the file has none
	wo               gpu.Matrix
	bo               []float32
	attnW, attnB     []float32 // attn_output_norm
	up, gate, down   gpu.Matrix
	bUp, bDown       []float32
	outW, outB       []float32 // layer_output_norm
}

// encScratch holds the host copies of one pass's activations.
type encScratch struct {
	x, y, q, k, v []float32 // n×Dim
	h             []float32 // n×max(Hidden, 3·Dim): feed-forward, fused QKV
}

func (s *encScratch) ensure(n, dim, hidden int) {
	grow := func(b []float32, size int) []float32 {
		if cap(b) < size {
			return make([]float32, size)
		}
		return b[:size]
	}
	s.x, s.y = grow(s.x, n*dim), grow(s.y, n*dim)
	s.q, s.k, s.v = grow(s.q, n*dim), grow(s.k, n*dim), grow(s.v, n*dim)
	s.h = grow(s.h, n*max(hidden, 3*dim))
}

// loadEncoder reads the encoder's tensors (llama.cpp's names).
func (m *Model) loadEncoder(ld *loader) error {
	c := &m.Config
	e := &encoder{}
	dim := c.Dim
	// hostVec reads a norm or bias vector into host memory; optional ones
	// may be absent.
	hostVec := func(name string, n int, optional bool) []float32 {
		if _, ok := ld.f.Tensor(name); !ok && optional {
			return nil
		}
		return ld.values(name, n)
	}
	// bias reads a bias onto the backend, when the file has it.
	bias := func(name string, n int) gpu.Tensor {
		if _, ok := ld.f.Tensor(name); !ok && c.Arch != "bert" {
			return nil
		}
		return ld.vector(name, n)
	}
	m.embed = ld.matrix("token_embd.weight", c.Vocab, dim)
	if c.Arch == "bert" {
		e.pos = ld.matrix("position_embd.weight", c.Context, dim)
	}
	if ti, ok := ld.f.Tensor("token_types.weight"); ok && ld.err == nil {
		all, err := ld.floats(ti, int(ti.Elements()))
		if err != nil {
			return err
		}
		if len(all) < dim || len(all)%dim != 0 {
			return fmt.Errorf("%w: token_types.weight has %d values for width %d", ErrBadConfig, len(all), dim)
		}
		e.typ = all[:dim] // llama.cpp takes every token as of type 0 ("sentence A")
	}
	e.normW = hostVec("token_embd_norm.weight", dim, false)
	e.normB = hostVec("token_embd_norm.bias", dim, false)
	for i := 0; i < c.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		l := encLayer{}
		if _, fused := ld.f.Tensor(p + "attn_qkv.weight"); fused {
			l.wqkv = ld.matrix(p+"attn_qkv.weight", 3*dim, dim)
			l.bqkv = hostVec(p+"attn_qkv.bias", 3*dim, true)
		} else {
			l.wq, l.bq = ld.matrix(p+"attn_q.weight", dim, dim), bias(p+"attn_q.bias", dim)
			l.wk, l.bk = ld.matrix(p+"attn_k.weight", dim, dim), bias(p+"attn_k.bias", dim)
			l.wv, l.bv = ld.matrix(p+"attn_v.weight", dim, dim), bias(p+"attn_v.bias", dim)
		}
		l.wo, l.bo = ld.matrix(p+"attn_output.weight", dim, dim), hostVec(p+"attn_output.bias", dim, c.Arch != "bert")
		l.attnW = hostVec(p+"attn_output_norm.weight", dim, false)
		l.attnB = hostVec(p+"attn_output_norm.bias", dim, false)
		l.up = ld.matrix(p+"ffn_up.weight", c.Hidden, dim)
		l.down = ld.matrix(p+"ffn_down.weight", dim, c.Hidden)
		if c.Arch == "bert" {
			l.bUp, l.bDown = hostVec(p+"ffn_up.bias", c.Hidden, false), hostVec(p+"ffn_down.bias", dim, false)
		} else {
			l.gate = ld.matrix(p+"ffn_gate.weight", c.Hidden, dim)
		}
		l.outW = hostVec(p+"layer_output_norm.weight", dim, false)
		l.outB = hostVec(p+"layer_output_norm.bias", dim, false)
		e.layers = append(e.layers, l)
	}
	if ld.err != nil {
		return ld.err
	}
	m.enc = e
	m.encoderKV()
	return nil
}

// encoderKV makes an encoder's arenas F32 where the backend has them: K
// and V as llama.cpp computes them, never stored.
func (m *Model) encoderKV() {
	if slices.Contains(gpu.KVTypes(m.be), gpu.F32) {
		m.kvType = gpu.F32
	}
}

// matrices lists the encoder's weight matrices a token is multiplied by.
func (e *encoder) matrices() []gpu.Matrix {
	var ws []gpu.Matrix
	for _, l := range e.layers {
		for _, w := range []gpu.Matrix{l.wq, l.wk, l.wv, l.wqkv, l.wo, l.up, l.gate, l.down} {
			if w != nil {
				ws = append(ws, w)
			}
		}
	}
	return ws
}

// encode runs ForwardHidden on an encoder: each input of the batch (a
// run of rows of one sequence, positions 0, 1, … in order) must be whole
// in it, since its every position attends to every other. Its K and V
// are written to kv (whole-model layout) at the blocks of b.Tables and
// are of no use after.
func (m *Model) encode(kv gpu.KV, tokens []int32, b *gpu.Batch, out []float32) error {
	n, dim := len(tokens), m.Dim
	if n == 0 || len(b.Pos) != n || len(b.Seq) != n {
		return fmt.Errorf("%w: %d tokens, %d positions, %d sequence ids", errBatch, n, len(b.Pos), len(b.Seq))
	}
	if len(out) != n*dim {
		return fmt.Errorf("%w: hidden-state buffer of %d for %d rows", errBatch, len(out), n)
	}
	// starts[i] is the first row of input i; the last entry is n.
	starts := m.encStarts[:0]
	seen := map[int32]bool{}
	for i, t := range tokens {
		if t < 0 || int(t) >= m.Vocab {
			return fmt.Errorf("%w: token id %d out of range [0,%d)", errBatch, t, m.Vocab)
		}
		p := int(b.Pos[i])
		if p >= m.Context {
			return fmt.Errorf("%w: position %d (context %d)", ErrContextOverflow, p, m.Context)
		}
		if i == 0 || b.Seq[i] != b.Seq[i-1] {
			if seen[b.Seq[i]] || p != 0 {
				return fmt.Errorf("%w: sequence %d at row %d: an encoder input is one run of rows from position 0", errBatch, b.Seq[i], i)
			}
			seen[b.Seq[i]] = true
			starts = append(starts, i)
		} else if p != int(b.Pos[i-1])+1 {
			return fmt.Errorf("%w: position %d follows %d in sequence %d", errBatch, p, b.Pos[i-1], b.Seq[i])
		}
	}
	starts = append(starts, n)
	m.encStarts = starts
	if kv == nil || kv.Config().Layers != m.Layers {
		return fmt.Errorf("%w: an encoder needs an arena of its %d layers (NewKV)", errBatch, m.Layers)
	}
	bt := kv.Config().BlockTokens
	m.encLast = m.encLast[:0]
	for in := range starts[1:] {
		lo, hi := starts[in], starts[in+1]
		s := b.Seq[lo]
		if s < 0 || int(s) >= len(b.Tables) || (hi-lo-1)/bt >= len(b.Tables[s]) || slices.Contains(b.Tables[s][:(hi-lo-1)/bt+1], -1) {
			return fmt.Errorf("%w: sequence %d of %d rows has no block for some of them", errBatch, s, hi-lo)
		}
		for range hi - lo {
			m.encLast = append(m.encLast, int32(hi-lo-1))
		}
	}
	if err := m.ensure(n, 0); err != nil {
		return err
	}
	// Every row attends as if at its input's last position: to all of it.
	whole := &gpu.Batch{Pos: m.encLast, Seq: b.Seq, Tables: b.Tables, Group: b.Group}
	if m.enc == nil {
		return m.encodeGemma(kv, tokens, b, whole, out)
	}
	return m.encodeBERT(kv, tokens, b, whole, out)
}

// encodeBERT is encode's pass of a BERT-family encoder; whole is b with
// every row at its input's last position.
func (m *Model) encodeBERT(kv gpu.KV, tokens []int32, b, whole *gpu.Batch, out []float32) error {
	n, dim := len(tokens), m.Dim
	be, e := m.be, m.enc
	t := m.views(n)
	x, xb, q, k, v, att, o, g, u := t.x, t.xb, t.q, t.k, t.v, t.att, t.o, t.g, t.u
	hostFor := func(n int, fn func(lo, hi int)) { fn(0, n) }
	if hp, ok := be.(gpu.HostParallel); ok {
		hostFor = hp.HostFor
	}
	h := &e.host
	h.ensure(n, dim, m.Hidden)

	// Embeddings: token + type 0 + position, then LayerNorm.
	be.Embed(x, m.embed, tokens)
	if err := be.Read(x, h.x); err != nil {
		return err
	}
	if e.pos != nil {
		be.Embed(xb, e.pos, b.Pos)
		if err := be.Read(xb, h.y); err != nil {
			return err
		}
	}
	hostFor(n, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := h.x[r*dim : (r+1)*dim]
			for j := range row {
				if e.typ != nil {
					row[j] += e.typ[j]
				}
				if e.pos != nil {
					row[j] += h.y[r*dim+j]
				}
			}
			layerNorm(row, e.normW, e.normB, m.NormEps)
		}
	})

	for li := range e.layers {
		l := &e.layers[li]
		be.Write(x, h.x)
		if l.wqkv != nil {
			// Fused: split on the host, where the bias is added too.
			qkv := e.qkvView(m, n)
			be.MatMul(qkv, x, l.wqkv)
			buf := h.h[:n*3*dim]
			if err := be.Read(qkv, buf); err != nil {
				return err
			}
			for r := 0; r < n; r++ {
				row := buf[r*3*dim : (r+1)*3*dim]
				addBias(row, l.bqkv)
				copy(h.q[r*dim:], row[:dim])
				copy(h.k[r*dim:], row[dim:2*dim])
				copy(h.v[r*dim:], row[2*dim:])
			}
			be.Write(q, h.q)
			be.Write(k, h.k)
			be.Write(v, h.v)
		} else {
			be.MatMul(q, x, l.wq)
			be.MatMul(k, x, l.wk)
			be.MatMul(v, x, l.wv)
			if l.bq != nil {
				be.Add(q, l.bq)
				be.Add(k, l.bk)
				be.Add(v, l.bv)
			}
		}
		if m.Arch == "nomic-bert" {
			be.RoPE(q, m.Heads, b, m.RoPE)
			be.RoPE(k, m.KVHeads, b, m.RoPE)
		}
		be.StoreKV(kv, li, k, v, b)
		be.Attention(att, q, kv, li, m.Heads, whole)
		be.MatMul(o, att, l.wo)
		if err := m.residualNorm(o, l.bo, l.attnW, l.attnB, n, hostFor); err != nil {
			return err
		}

		// Feed-forward.
		be.Write(x, h.x)
		hid := m.Hidden
		if l.gate != nil {
			be.MatMul(g, x, l.gate)
			be.MatMul(u, x, l.up)
			be.SwiGLU(g, g, u)
		} else {
			be.MatMul(g, x, l.up)
			hh := h.h[:n*hid]
			if err := be.Read(g, hh); err != nil {
				return err
			}
			hostFor(n, func(lo, hi int) {
				for r := lo; r < hi; r++ {
					row := hh[r*hid : (r+1)*hid]
					addBias(row, l.bUp)
					geluRow(row)
				}
			})
			be.Write(g, hh)
		}
		be.MatMul(o, g, l.down)
		if err := m.residualNorm(o, l.bDown, l.outW, l.outB, n, hostFor); err != nil {
			return err
		}
	}
	copy(out, h.x[:n*dim])
	return nil
}

// residualNorm reads a sub-layer's output o (n rows), adds its bias and
// the layer input held in the host copy x, and replaces x by the
// LayerNorm (w, b) of the sum.
func (m *Model) residualNorm(o gpu.Tensor, bias, w, b []float32, n int, hostFor func(int, func(lo, hi int))) error {
	h, dim := &m.enc.host, m.Dim
	if err := m.be.Read(o, h.y); err != nil {
		return err
	}
	hostFor(n, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row, res := h.y[r*dim:(r+1)*dim], h.x[r*dim:(r+1)*dim]
			addBias(row, bias)
			for j := range row {
				row[j] += res[j]
			}
			layerNorm(row, w, b, m.NormEps)
			copy(res, row)
		}
	})
	return nil
}

// qkvView returns n rows of the fused projection's output tensor,
// allocating it (to the scratch's capacity) when it is short.
func (e *encoder) qkvView(m *Model, n int) gpu.Tensor {
	if e.qkv == nil || e.qkv.Rows() < n {
		if e.qkv != nil {
			m.be.Free(e.qkv)
		}
		t, err := m.be.NewTensor(max(n, m.scratch.cap), 3*m.Dim)
		if err != nil {
			panic(fmt.Sprintf("model: fused QKV buffer: %v", err))
		}
		e.qkv = t
	}
	return m.be.View(e.qkv, 0, n)
}

// addBias adds b (nil: nothing) to row.
func addBias(row, b []float32) {
	if b == nil {
		return
	}
	for j := range row {
		row[j] += b[j]
	}
}

// layerNorm normalises row in place to zero mean and unit variance, then
// scales by w and shifts by b, as ggml_norm followed by a multiply and an
// add: sums in float64, the rest in float32.
func layerNorm(row, w, b []float32, eps float32) {
	n := len(row)
	var sum float64
	for _, x := range row {
		sum += float64(x)
	}
	mean := float32(sum / float64(n))
	var sum2 float64
	for j, x := range row {
		v := x - mean
		row[j] = v
		sum2 += float64(v * v)
	}
	variance := float32(sum2 / float64(n))
	scale := 1 / float32(math.Sqrt(float64(variance+eps)))
	for j := range row {
		row[j] = row[j]*scale*w[j] + b[j]
	}
}

// gelu16 is ggml's GELU table: the tanh approximation of every float16
// input, rounded to float16.
var gelu16 = sync.OnceValue(func() []float32 {
	t := make([]float32, 1<<16)
	const k, a = float32(0.79788456080286535587989211986876), float32(0.044715)
	for i := range t {
		x := quant.FP16ToFloat32(uint16(i))
		y := 0.5 * x * (1 + float32(math.Tanh(float64(k*x*(1+a*x*x)))))
		t[i] = quant.FP16ToFloat32(quant.Float32ToFP16(y))
	}
	return t
})

// geluRow applies GELU in place as ggml's CPU kernel does: 0 at or below
// −10, the identity at or above 10, and in between the table entry of the
// input rounded to float16.
func geluRow(row []float32) {
	t := gelu16()
	for j, x := range row {
		switch {
		case x <= -10:
			row[j] = 0
		case x >= 10:
		default:
			row[j] = t[quant.Float32ToFP16(x)]
		}
	}
}
