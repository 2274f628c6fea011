package model

import (
	"fmt"

	"github.com/zerolayer/zerolayer/gpu"
)

// scratch holds the activation tensors of one step, sized for cap rows.
type scratch struct {
	cap                    int
	x, xb, q, k, v, att, o gpu.Tensor
	g, u                   gpu.Tensor
	sel                    gpu.Tensor // gathered rows that need logits
	logits                 gpu.Tensor
	logitCap               int
}

func (m *Model) ensure(rows, logitRows int) error {
	s := &m.scratch
	be := m.be
	if rows > s.cap {
		for _, t := range []gpu.Tensor{s.x, s.xb, s.q, s.k, s.v, s.att, s.o, s.g, s.u} {
			if t != nil {
				be.Free(t)
			}
		}
		n := max(rows, 2*s.cap)
		var err error
		alloc := func(cols int) gpu.Tensor {
			if err != nil {
				return nil
			}
			var t gpu.Tensor
			t, err = be.NewTensor(n, cols)
			return t
		}
		qDim, kvDim := m.Heads*m.HeadDim, m.KVDim()
		s.x, s.xb, s.o = alloc(m.Dim), alloc(m.Dim), alloc(m.Dim)
		s.q, s.att = alloc(qDim), alloc(qDim)
		s.k, s.v = alloc(kvDim), alloc(kvDim)
		s.g, s.u = alloc(m.Hidden), alloc(m.Hidden)
		if err != nil {
			s.cap = 0
			return err
		}
		s.cap = n
	}
	if logitRows > s.logitCap {
		if s.sel != nil {
			be.Free(s.sel)
			be.Free(s.logits)
		}
		n := max(logitRows, 2*s.logitCap)
		var err error
		if s.sel, err = be.NewTensor(n, m.Dim); err != nil {
			s.logitCap = 0
			return err
		}
		if s.logits, err = be.NewTensor(n, m.Vocab); err != nil {
			s.logitCap = 0
			return err
		}
		s.logitCap = n
	}
	return nil
}

// Forward runs one step: row i of the batch is token tokens[i] at position
// b.Pos[i] of sequence b.Seq[i]. Every row's K and V are written to kv.
// For each entry of logitRows (row indices), the logits of that row are
// written to out[j*Vocab:(j+1)*Vocab]. Rows of one sequence must be
// consecutive and in position order, and each sequence's earlier positions
// must already be in kv.
func (m *Model) Forward(kv gpu.KV, tokens []int32, b *gpu.Batch, logitRows []int32, out []float32) error {
	return m.ForwardInterruptible(kv, tokens, b, logitRows, out, nil)
}

// ForwardInterruptible is Forward that, on a synchronous backend
// (gpu.Synchronous), asks stop before each layer's attention and its
// feed-forward half and before the output head, and abandons the step
// with ErrInterrupted when it says so (an arrival then waits for half a
// layer at most). The
// rows' K and V may then be partly written, which is harmless: running
// the same rows again writes the same values. On a backend that queues
// work, stop is not asked (the step is queued in microseconds).
func (m *Model) ForwardInterruptible(kv gpu.KV, tokens []int32, b *gpu.Batch, logitRows []int32, out []float32, stop func() bool) error {
	m.one[0] = *b // not a new slice a step: decode allocates nothing
	return m.ForwardGroups(kv, tokens, m.one[:], logitRows, out, stop)
}

// ForwardGroups is ForwardInterruptible on an arena of either layout: the
// whole-model one (NewKV; bs holds one batch) or the grouped one
// (NewGroupedKV; bs[g] carries group g's block tables, and every batch
// the same positions and sequences). A windowed group's table may hold −1
// for the blocks before the window of the sequence's first row: they are
// never read.
func (m *Model) ForwardGroups(kv gpu.KV, tokens []int32, bs []gpu.Batch, logitRows []int32, out []float32, stop func() bool) error {
	return m.forward(kv, tokens, bs, logitRows, out, nil, nil, stop, false)
}

// ForwardGroupsHidden is ForwardGroups that also writes the final
// normalised hidden state (as ForwardHidden does) of each row of
// hiddenRows to hidden[j·Dim : (j+1)·Dim]: a step can carry embedding
// inputs beside generations. A row's state has the bits ForwardHidden
// gives it.
func (m *Model) ForwardGroupsHidden(kv gpu.KV, tokens []int32, bs []gpu.Batch, logitRows []int32, out []float32, hiddenRows []int32, hidden []float32, stop func() bool) error {
	return m.forward(kv, tokens, bs, logitRows, out, hiddenRows, hidden, stop, false)
}

// ForwardHidden runs the rows as Forward does and writes every row's final
// normalised hidden state (the output head's input, what embedding models
// pool) to out[i·Dim : (i+1)·Dim]. On an encoder (Config.Encoder) each
// sequence's rows must be the whole input, positions 0, 1, … in order;
// its K and V are only needed during the call.
func (m *Model) ForwardHidden(kv gpu.KV, tokens []int32, b *gpu.Batch, out []float32) error {
	if m.Encoder {
		return m.encode(kv, tokens, b, out)
	}
	m.one[0] = *b
	return m.forward(kv, tokens, m.one[:], nil, out, nil, nil, nil, true)
}

func (m *Model) forward(kv gpu.KV, tokens []int32, bs []gpu.Batch, logitRows []int32, out []float32, hiddenRows []int32, hiddenOut []float32, stop func() bool, hidden bool) error {
	if m.Encoder {
		return fmt.Errorf("%w: %s has no output head and computes each input whole (ForwardHidden)", ErrEncoderOnly, m.Arch)
	}
	if s, ok := m.be.(gpu.Synchronous); !ok || !s.Synchronous() {
		stop = nil
	}
	stopped := func() bool { return stop != nil && stop() }
	n := len(tokens)
	if len(bs) == 0 {
		return fmt.Errorf("%w: no batch", errBatch)
	}
	b := &bs[0]
	if n == 0 || len(b.Pos) != n || len(b.Seq) != n {
		return fmt.Errorf("%w: %d tokens, %d positions, %d sequence ids", errBatch, n, len(b.Pos), len(b.Seq))
	}
	for g := range bs[1:] {
		if o := &bs[g+1]; len(o.Pos) != n || len(o.Seq) != n || (n > 0 && (&o.Pos[0] != &b.Pos[0] || &o.Seq[0] != &b.Seq[0])) {
			return fmt.Errorf("%w: the batch of group %d has other rows than group 0's", errBatch, g+1)
		}
	}
	place, err := m.place(kv, bs)
	if err != nil {
		return err
	}
	if hidden && len(out) != n*m.Dim {
		return fmt.Errorf("%w: hidden-state buffer of %d for %d rows", errBatch, len(out), n)
	}
	if !hidden && len(out) != len(logitRows)*m.Vocab {
		return fmt.Errorf("%w: logits buffer of %d for %d rows", errBatch, len(out), len(logitRows))
	}
	bt := kv.Config().BlockTokens
	for i, t := range tokens {
		if t < 0 || int(t) >= m.Vocab {
			return fmt.Errorf("%w: token id %d out of range [0,%d)", errBatch, t, m.Vocab)
		}
		s := b.Seq[i]
		p := int(b.Pos[i])
		if p < 0 || p >= m.Context {
			return fmt.Errorf("%w: position %d (context %d)", ErrContextOverflow, p, m.Context)
		}
		for g := range bs {
			if s < 0 || int(s) >= len(bs[g].Tables) {
				return fmt.Errorf("%w: sequence %d has no block table", errBatch, s)
			}
			if tab := bs[g].Tables[s]; p/bt >= len(tab) || tab[p/bt] < 0 {
				return fmt.Errorf("%w: position %d of sequence %d is past its %d blocks", errBatch, p, s, len(tab))
			}
		}
	}
	for _, r := range logitRows {
		if r < 0 || int(r) >= n {
			return fmt.Errorf("%w: logit row %d of %d", errBatch, r, n)
		}
	}
	for _, r := range hiddenRows {
		if r < 0 || int(r) >= n {
			return fmt.Errorf("%w: hidden-state row %d of %d", errBatch, r, n)
		}
	}
	if len(hiddenOut) != len(hiddenRows)*m.Dim {
		return fmt.Errorf("%w: hidden-state buffer of %d for %d rows", errBatch, len(hiddenOut), len(hiddenRows))
	}
	if err := m.ensure(n, len(logitRows)); err != nil {
		return err
	}
	be, s := m.be, &m.scratch
	t := m.views(n)
	m.embedTokens(&t, tokens)
	for li := range m.layers {
		if stopped() {
			return ErrInterrupted
		}
		window, rope := m.LayerAttention(li)
		m.projectQKV(li, &t, b, rope)
		lb, slot := place.of(li)
		be.StoreKV(kv, slot, t.k, t.v, lb)
		if window > 0 {
			m.ops.AttentionWindow(t.att, t.q, kv, slot, m.Heads, window, lb)
		} else {
			be.Attention(t.att, t.q, kv, slot, m.Heads, lb)
		}
		m.attnOutput(li, &t)
		if stopped() {
			return ErrInterrupted
		}
		m.feedForward(li, &t)
	}
	x, xb := t.x, t.xb
	if hidden {
		be.RMSNorm(xb, x, m.outNorm, m.NormEps)
		return be.Read(xb, out)
	}
	if len(hiddenRows) > 0 {
		// xb is free now: the chosen rows' states, normalised row by row
		// as the hidden path above normalises every row.
		hs := be.View(s.xb, 0, len(hiddenRows))
		be.Gather(hs, x, hiddenRows)
		be.RMSNorm(hs, hs, m.outNorm, m.NormEps)
		if err := be.Read(hs, hiddenOut); err != nil {
			return err
		}
	}
	if len(logitRows) == 0 {
		return be.Sync()
	}
	if stopped() {
		return ErrInterrupted
	}
	sel := be.View(s.sel, 0, len(logitRows))
	logits := be.View(s.logits, 0, len(logitRows))
	be.Gather(sel, x, logitRows)
	be.RMSNorm(sel, sel, m.outNorm, m.NormEps)
	be.MatMul(logits, sel, m.output)
	return be.Read(logits, out)
}

// stepViews are a step's activation tensors, cut to its rows.
type stepViews struct {
	x, xb, q, k, v, att, o, g, u gpu.Tensor
	qkv, gu                      []gpu.Tensor // {q, k, v} and {g, u}, for gpu.MatMuls
}

// views returns the first n rows of the scratch tensors (ensure first).
func (m *Model) views(n int) stepViews {
	s, be := &m.scratch, m.be
	view := func(t gpu.Tensor) gpu.Tensor { return be.View(t, 0, n) }
	t := stepViews{x: view(s.x), xb: view(s.xb), q: view(s.q), k: view(s.k), v: view(s.v),
		att: view(s.att), o: view(s.o), g: view(s.g), u: view(s.u)}
	t.qkv, t.gu = []gpu.Tensor{t.q, t.k, t.v}, []gpu.Tensor{t.g, t.u}
	return t
}

// embedTokens sets t.x to the tokens' embeddings, scaled where the
// architecture scales them.
func (m *Model) embedTokens(t *stepViews, tokens []int32) {
	m.be.Embed(t.x, m.embed, tokens)
	if m.EmbedScale != 0 {
		m.ops.Scale(t.x, m.EmbedScale)
	}
}

// projectQKV computes layer li's queries, keys and values from t.x into
// t.q, t.k, t.v: the attention norm, the projections (and biases), the
// per-head norms, and RoPE r at b's positions.
func (m *Model) projectQKV(li int, t *stepViews, b *gpu.Batch, r gpu.RoPE) {
	be, l := m.be, &m.layers[li]
	be.RMSNorm(t.xb, t.x, l.attnNorm, m.NormEps)
	gpu.MatMuls(be, t.qkv, t.xb, l.qkv)
	if l.bq != nil {
		be.Add(t.q, l.bq)
		be.Add(t.k, l.bk)
		be.Add(t.v, l.bv)
	}
	if l.qNorm != nil {
		m.ops.RMSNormHeads(t.q, m.Heads, l.qNorm, m.NormEps)
		m.ops.RMSNormHeads(t.k, m.KVHeads, l.kNorm, m.NormEps)
	}
	be.RoPE(t.q, m.Heads, b, r)
	be.RoPE(t.k, m.KVHeads, b, r)
}

// attnOutput projects layer li's attention result t.att and adds it
// (post-normed where the architecture does) to the residual t.x.
func (m *Model) attnOutput(li int, t *stepViews) {
	be, l := m.be, &m.layers[li]
	be.MatMul(t.o, t.att, l.wo)
	if l.postAttn != nil {
		be.RMSNorm(t.o, t.o, l.postAttn, m.NormEps)
	}
	be.Add(t.x, t.o)
}

// feedForward runs layer li's gated feed-forward on t.x and adds it
// (post-normed where the architecture does) to the residual.
func (m *Model) feedForward(li int, t *stepViews) {
	be, l := m.be, &m.layers[li]
	be.RMSNorm(t.xb, t.x, l.ffnNorm, m.NormEps)
	gpu.MatMuls(be, t.gu, t.xb, l.gateUp)
	if m.GELU {
		m.ops.GeGLU(t.g, t.g, t.u)
	} else {
		be.SwiGLU(t.g, t.g, t.u)
	}
	be.MatMul(t.o, t.g, l.down)
	if l.postFFN != nil {
		be.RMSNorm(t.o, t.o, l.postFFN, m.NormEps)
	}
	be.Add(t.x, t.o)
}
