package model

import (
	"fmt"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
)

// gemma-embedding (EmbeddingGemma), as llama.cpp builds it
// (llm_build_gemma_embedding): gemma3's layers run as an encoder.
//
//	x = tok_embd[t] · √Dim
//	per layer (forward.go's projectQKV, attnOutput, feedForward):
//	  q, k = RoPE(RMSNorm_head(x'·Wq)), RoPE(RMSNorm_head(x'·Wk)), v = x'·Wv,
//	         x' = RMSNorm(x); local layers rotate with rope.freq_base_swa
//	  a = softmax(q·kᵀ/√head_dim)·v, not causal: a global layer sees the
//	      whole input, a local one the keys within SlidingWindow/2
//	      positions on either side (llama.cpp's LLAMA_SWA_TYPE_SYMMETRIC)
//	  x = x + RMSNorm(a·Wo)                                  post_attention_norm
//	  x = x + RMSNorm((gelu(x''·Wgate) ⊙ x''·Wup)·Wdown)     post_ffw_norm
//	out = RMSNorm(x)                                          output_norm
//
// Every SlidingPeriod-th layer is global (attention.sliding_window_pattern,
// default 6). An embedding pools out and then passes it through the
// sentence-transformers dense projections when the file has them
// (dense_2: Dim→DenseHidden, dense_3: DenseHidden→Dim, no bias, no
// activation; Project). There is no output head and no KV cache kept: an
// input is computed whole in one pass, its K and V (F32) in the caller's
// arena for the pass only, as bert's are.
//
// The attention kernels bound a query's keys above by its position and
// below by a window under it. A global layer puts every row at its
// input's last position (bert does the same). A local layer's symmetric
// window [p−h, p+h] is the kernel's window of 2h+1 below the position
// p+h, which is right wherever p+h is inside the input, or the window
// takes the whole input (p ≤ h). The rows near the end (p > h, p+h past
// the input's last position L−1) need [p−h, L−1]: mirrored (position
// L−1−p, keys stored in reverse order) that is a window reaching past
// position 0, which the kernel clips. Those rows run a second time over
// a reversed copy of the layer's K and V, written to a neighbouring
// layer's slot of the same blocks (the previous layer's, read already,
// or for layer 0 the next one's, not written yet), and their results
// replace the first pass's. What a row gets depends only on its input
// and position: batch invariance holds as for any other row.

// gemmaEmbeddingConfig reads what gemma-embedding adds to gemma3's
// hyper-parameters: the encoder flag, the global-layer period, the local
// layers' RoPE base and the dense projections' width.
func (c *Config) gemmaEmbeddingConfig(f *gguf.File) error {
	a := c.Arch
	c.Encoder = true
	// A per-layer array is not read, as llama.cpp does not (its loader
	// wants a scalar here and keeps 6).
	if v, ok := f.Uint(a + ".attention.sliding_window_pattern"); ok {
		c.SlidingPeriod = int(v)
	}
	if v, ok := f.Float(a + ".rope.freq_base_swa"); ok {
		c.LocalRoPE.Base = float32(v)
	}
	if c.Layers == 1 && c.LocalLayer(0) {
		return fmt.Errorf("%w: %s of one local layer (the symmetric window borrows a second layer's KV slot)", ErrBadConfig, a)
	}
	d2, has2 := f.Tensor("dense_2.weight")
	d3, has3 := f.Tensor("dense_3.weight")
	if has2 != has3 {
		return fmt.Errorf("%w: %s has one of dense_2.weight and dense_3.weight without the other", ErrBadConfig, a)
	}
	if !has2 {
		return nil
	}
	if len(d2.Dims) != 2 || int(d2.Dims[0]) != c.Dim || len(d3.Dims) != 2 || d3.Dims[0] != d2.Dims[1] || int(d3.Dims[1]) != c.Dim {
		return fmt.Errorf("%w: dense_2.weight %v and dense_3.weight %v do not project width %d out and back", ErrBadConfig, d2.Dims, d3.Dims, c.Dim)
	}
	c.DenseHidden = int(d2.Dims[1])
	for key, want := range map[string]int{"dense_2_feat_in": c.Dim, "dense_2_feat_out": c.DenseHidden, "dense_3_feat_in": c.DenseHidden, "dense_3_feat_out": c.Dim} {
		if v, ok := f.Uint(a + "." + key); ok && int(v) != want {
			return fmt.Errorf("%w: %s.%s is %d, its tensor says %d", ErrBadConfig, a, key, v, want)
		}
	}
	return nil
}

// dense holds the projections after pooling and a row of each width for
// their products.
type dense struct {
	up, down     gpu.Matrix // dense_2 (DenseHidden×Dim), dense_3 (Dim×DenseHidden)
	in, mid, out gpu.Tensor // 1×Dim, 1×DenseHidden, 1×Dim
}

// loadDense reads the dense projections, where Config.DenseHidden says
// the file has them.
func (m *Model) loadDense(ld *loader) {
	if m.DenseHidden == 0 {
		return
	}
	d := &dense{
		up:   ld.matrix("dense_2.weight", m.DenseHidden, m.Dim),
		down: ld.matrix("dense_3.weight", m.Dim, m.DenseHidden),
	}
	for _, r := range []struct {
		t    *gpu.Tensor
		cols int
	}{{&d.in, m.Dim}, {&d.mid, m.DenseHidden}, {&d.out, m.Dim}} {
		if ld.err != nil {
			return
		}
		t, err := m.be.NewTensor(1, r.cols)
		ld.fail(err)
		*r.t = t
	}
	m.dense = d
}

// Project applies the dense projections of an embedding model's file to
// a pooled vector v (Dim values) in place: dense_2 then dense_3, plain
// products in the weights' type, as llama.cpp does after pooling and
// before normalising. A model without them leaves v as it is. Like
// Forward, it runs on the model's backend and must not be called
// concurrently with the model's other calls.
func (m *Model) Project(v []float32) error {
	d := m.dense
	if d == nil {
		return nil
	}
	if len(v) != m.Dim {
		return fmt.Errorf("%w: a vector of %d to project, width %d", errBatch, len(v), m.Dim)
	}
	m.be.Write(d.in, v)
	m.be.MatMul(d.mid, d.in, d.up)
	m.be.MatMul(d.out, d.mid, d.down)
	return m.be.Read(d.out, v)
}

// encodeGemma is encode's pass of gemma-embedding; whole is b with every
// row at its input's last position.
func (m *Model) encodeGemma(kv gpu.KV, tokens []int32, b, whole *gpu.Batch, out []float32) error {
	n := len(tokens)
	t := m.views(n)
	if err := m.planSymmetric(b); err != nil {
		return err
	}
	m.embedTokens(&t, tokens)
	for li := range m.layers {
		window, rope := m.LayerAttention(li)
		m.projectQKV(li, &t, b, rope)
		m.be.StoreKV(kv, li, t.k, t.v, b)
		if window > 0 {
			m.attendSymmetric(li, &t, kv, b)
		} else {
			m.be.Attention(t.att, t.q, kv, li, m.Heads, whole)
		}
		m.attnOutput(li, &t)
		m.feedForward(li, &t)
	}
	m.be.RMSNorm(t.xb, t.x, m.outNorm, m.NormEps)
	return m.be.Read(t.xb, out)
}

// symScratch is a pass's plan of the local layers' symmetric attention
// (planSymmetric) and the tensors it uses.
type symScratch struct {
	// fwd puts each row at min(p+h, L−1) of its input; rev holds the
	// rows near the end at their mirrored positions L−1−p+h.
	fwd, rev gpu.Batch
	// revRows[i] is the row whose K and V row i of the reversed copy
	// holds: the same input's row at the mirrored position.
	revRows []int32
	// tail lists the rows the reversed pass answers, in its order.
	tail []int32
	// merge[i] is where row i's result is: i (the first pass) or n+j (row
	// j of the reversed pass).
	merge []int32

	cap            int
	kr, vr, qr, ab gpu.Tensor // cap rows (ab: 2·cap): reversed K, V, Q; both passes' results
}

// planSymmetric plans the local layers' attention of a pass whose inputs
// encode validated (m.encStarts).
func (m *Model) planSymmetric(b *gpu.Batch) error {
	s := &m.sym
	n, h := len(b.Pos), int32(m.SlidingWindow/2)
	s.fwd = gpu.Batch{Pos: s.fwd.Pos[:0], Seq: b.Seq, Tables: b.Tables, Group: b.Group}
	s.rev = gpu.Batch{Pos: s.rev.Pos[:0], Seq: s.rev.Seq[:0], Tables: b.Tables, Group: b.Group}
	s.revRows, s.tail, s.merge = s.revRows[:0], s.tail[:0], s.merge[:0]
	starts := m.encStarts
	for in := range starts[1:] {
		lo, hi := starts[in], starts[in+1]
		last := int32(hi - lo - 1)
		for p := int32(0); p <= last; p++ {
			s.fwd.Pos = append(s.fwd.Pos, min(p+h, last))
			s.revRows = append(s.revRows, int32(hi-1)-p)
			s.merge = append(s.merge, int32(lo)+p)
		}
		// From the last position down: the mirrored positions 0, 1, … in
		// order, as the kernel's rows of one sequence must be.
		for p := last; p > max(h, last-h); p-- {
			s.merge[lo+int(p)] = int32(n + len(s.tail))
			s.tail = append(s.tail, int32(lo)+p)
			s.rev.Pos = append(s.rev.Pos, last-p+h)
			s.rev.Seq = append(s.rev.Seq, b.Seq[lo])
		}
	}
	if len(s.tail) == 0 || s.cap >= m.scratch.cap {
		return nil
	}
	for _, t := range []gpu.Tensor{s.kr, s.vr, s.qr, s.ab} {
		if t != nil {
			m.be.Free(t)
		}
	}
	s.cap = 0
	var err error
	alloc := func(rows, cols int) gpu.Tensor {
		if err != nil {
			return nil
		}
		var t gpu.Tensor
		t, err = m.be.NewTensor(rows, cols)
		return t
	}
	c, qDim := m.scratch.cap, m.Heads*m.HeadDim
	s.kr, s.vr, s.qr, s.ab = alloc(c, m.KVDim()), alloc(c, m.KVDim()), alloc(c, qDim), alloc(2*c, qDim)
	if err != nil {
		return err
	}
	s.cap = c
	return nil
}

// attendSymmetric computes local layer li's attention of the pass's rows
// into t.att, its K and V stored at slot li of b's blocks: the kernel's
// window of 2h+1 below min(p+h, L−1), and for the rows near the end the
// same over a reversed copy of K and V (see the top of this file).
func (m *Model) attendSymmetric(li int, t *stepViews, kv gpu.KV, b *gpu.Batch) {
	s, be := &m.sym, m.be
	w := 2*(m.SlidingWindow/2) + 1
	if len(s.tail) == 0 {
		m.ops.AttentionWindow(t.att, t.q, kv, li, m.Heads, w, &s.fwd)
		return
	}
	n, nt := len(b.Pos), len(s.tail)
	spare := li - 1
	if li == 0 {
		spare = 1
	}
	kr, vr, qr := be.View(s.kr, 0, n), be.View(s.vr, 0, n), be.View(s.qr, 0, nt)
	be.Gather(kr, t.k, s.revRows)
	be.Gather(vr, t.v, s.revRows)
	be.StoreKV(kv, spare, kr, vr, b) // row lo+r holds position L−1−r, stored at r
	be.Gather(qr, t.q, s.tail)
	m.ops.AttentionWindow(be.View(s.ab, 0, n), t.q, kv, li, m.Heads, w, &s.fwd)
	m.ops.AttentionWindow(be.View(s.ab, n, nt), qr, kv, spare, m.Heads, w, &s.rev)
	be.Gather(t.att, be.View(s.ab, 0, n+nt), s.merge)
}
