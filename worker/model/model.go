package model

import (
	"errors"
	"fmt"
	"slices"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/quant"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
)

// Model is a loaded Llama-family transformer: weights on a backend and the
// hyper-parameters to run them. A Model is not safe for concurrent Forward
// calls: one step loop drives it.
type Model struct {
	Config
	be gpu.Backend
	// kvType is the element type of the arenas NewKV and KVConfig make.
	kvType gpu.DType
	// ops is be's gpu.ArchOps when the architecture needs it.
	ops gpu.ArchOps

	embed   gpu.Matrix
	output  gpu.Matrix
	outNorm gpu.Tensor
	layers  []layer

	enc     *encoder // the BERT family's weights
	dense   *dense   // the projections after pooling (Config.DenseHidden)
	sym     symScratch
	scratch scratch
	// encStarts and encLast are an encoder pass's input starts and each
	// row's input's last position (encode).
	encStarts []int
	encLast   []int32
	layout    *KVLayout    // KVLayout, made at the first grouped step
	one       [1]gpu.Batch // ForwardInterruptible's batch, as ForwardGroups takes it
}

type layer struct {
	attnNorm, ffnNorm gpu.Tensor
	wq, wk, wv, wo    gpu.Matrix
	bq, bk, bv        gpu.Tensor // qwen2 only
	gate, up, down    gpu.Matrix
	// qkv and gateUp are {wq, wk, wv} and {gate, up}, made once at load
	// for gpu.MatMuls (one quantized input for the projections that share
	// it), so a step builds no slices.
	qkv, gateUp       []gpu.Matrix
	qNorm, kNorm      gpu.Tensor // QKNorm: 1×HeadDim
	postAttn, postFFN gpu.Tensor // PostNorms: 1×Dim
}

// New builds a model from an opened GGUF file, uploading its weights to be.
// The file must stay open while the model is used (CPU weights alias the
// mapping).
func New(f *gguf.File, be gpu.Backend) (*Model, error) {
	cfg, err := ConfigFromGGUF(f)
	if err != nil {
		return nil, err
	}
	m := &Model{Config: cfg, be: be, kvType: gpu.KVTypes(be)[0]}
	if cfg.NeedsArchOps() {
		ops, ok := be.(gpu.ArchOps)
		if !ok {
			return nil, fmt.Errorf("%w: architecture %s needs per-head norms, GELU and windowed attention, which backend %s does not implement", ErrUnsupportedArch, cfg.Arch, be.Name())
		}
		if err := ops.ArchReady(); err != nil {
			return nil, fmt.Errorf("%w: architecture %s on backend %s: %v", ErrUnsupportedArch, cfg.Arch, be.Name(), err)
		}
		m.ops = ops
	}
	ld := loader{f: f, be: be}
	if encoderArchs[cfg.Arch] {
		if err := m.loadEncoder(&ld); err != nil {
			return nil, err
		}
		return m, nil
	}
	m.embed = ld.matrix("token_embd.weight", cfg.Vocab, cfg.Dim)
	switch {
	case cfg.Encoder:
		// gemma-embedding: no output head (output.weight, if any, unused).
	case cfg.TiedOutput:
		m.output = m.embed
	default:
		m.output = ld.matrix("output.weight", cfg.Vocab, cfg.Dim)
	}
	m.outNorm = ld.vector("output_norm.weight", cfg.Dim)
	if ti, ok := f.Tensor("rope_freqs.weight"); ok && ld.err == nil {
		fs, err := ld.floats(ti, cfg.RoPE.Dims/2)
		if err != nil {
			return nil, err
		}
		m.RoPE.Factors = fs
	}
	qDim, kvDim := cfg.Heads*cfg.HeadDim, cfg.KVDim()
	for i := 0; i < cfg.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		l := layer{
			attnNorm: ld.vector(p+"attn_norm.weight", cfg.Dim),
			wq:       ld.matrix(p+"attn_q.weight", qDim, cfg.Dim),
			wk:       ld.matrix(p+"attn_k.weight", kvDim, cfg.Dim),
			wv:       ld.matrix(p+"attn_v.weight", kvDim, cfg.Dim),
			wo:       ld.matrix(p+"attn_output.weight", cfg.Dim, qDim),
			ffnNorm:  ld.vector(p+"ffn_norm.weight", cfg.Dim),
			gate:     ld.matrix(p+"ffn_gate.weight", cfg.Hidden, cfg.Dim),
			up:       ld.matrix(p+"ffn_up.weight", cfg.Hidden, cfg.Dim),
			down:     ld.matrix(p+"ffn_down.weight", cfg.Dim, cfg.Hidden),
		}
		l.qkv, l.gateUp = []gpu.Matrix{l.wq, l.wk, l.wv}, []gpu.Matrix{l.gate, l.up}
		if cfg.QKVBias {
			l.bq = ld.vector(p+"attn_q.bias", qDim)
			l.bk = ld.vector(p+"attn_k.bias", kvDim)
			l.bv = ld.vector(p+"attn_v.bias", kvDim)
		}
		if cfg.QKNorm {
			l.qNorm = ld.vector(p+"attn_q_norm.weight", cfg.HeadDim)
			l.kNorm = ld.vector(p+"attn_k_norm.weight", cfg.HeadDim)
		}
		if cfg.PostNorms {
			l.postAttn = ld.vector(p+"post_attention_norm.weight", cfg.Dim)
			l.postFFN = ld.vector(p+"post_ffw_norm.weight", cfg.Dim)
		}
		m.layers = append(m.layers, l)
	}
	if cfg.Encoder {
		m.loadDense(&ld)
		m.encoderKV()
	}
	if ld.err != nil {
		return nil, ld.err
	}
	return m, nil
}

// Backend returns the backend the model runs on.
func (m *Model) Backend() gpu.Backend { return m.be }

// WeightBytes is the size of the weight matrices read per token (the
// embedding table is read one row per token and is not counted unless it is
// also the classifier).
func (m *Model) WeightBytes() int64 {
	size := func(w gpu.Matrix) int64 {
		rb, _ := w.DType().RowBytes(w.Cols())
		return int64(rb) * int64(w.Rows())
	}
	var n int64
	for _, w := range m.matrices() {
		n += size(w)
	}
	return n
}

// MatMulParams returns the number of weights the matrix multiplies of one
// token read: every layer's projections and the output matrix (not the
// embedding table, which is looked up). Each is one multiply-add a token.
func (m *Model) MatMulParams() int64 {
	var n int64
	for _, w := range m.matrices() {
		n += int64(w.Rows()) * int64(w.Cols())
	}
	return n
}

// OutputMatMulParams returns the output matrix's share of MatMulParams (0
// for an encoder): a prompt's rows before its last skip it, as only the
// last row's logits are computed.
func (m *Model) OutputMatMulParams() int64 {
	if m.enc != nil || m.output == nil {
		return 0
	}
	return int64(m.output.Rows()) * int64(m.output.Cols())
}

// matrices lists the weight matrices a token is multiplied by: the
// output head (an encoder has none) and every layer's projections.
func (m *Model) matrices() []gpu.Matrix {
	if m.enc != nil {
		return m.enc.matrices()
	}
	var ws []gpu.Matrix
	if m.output != nil {
		ws = append(ws, m.output)
	}
	for _, l := range m.layers {
		ws = append(ws, l.wq, l.wk, l.wv, l.wo, l.gate, l.up, l.down)
	}
	return ws
}

// Type returns the storage type of the first layer's attention output
// projection: the type a file is named by (a mixed file keeps others
// beside it).
func (m *Model) Type() gpu.DType {
	if m.enc != nil {
		return m.enc.layers[0].wo.DType()
	}
	return m.layers[0].wq.DType()
}

// NewKV allocates a KV arena of the given number of blocks for this model,
// of its KV type.
func (m *Model) NewKV(blocks, blockTokens int) (gpu.KV, error) {
	return m.be.NewKV(gpu.KVConfig{Layers: m.Layers, KVDim: m.KVDim(), HeadDim: m.HeadDim, BlockTokens: blockTokens, Blocks: blocks, Type: m.kvType})
}

// KVType returns the element type of the model's KV arenas: the backend's
// default (gpu.KVTypes: F16 on the CPU, as llama.cpp's) unless SetKVType
// chose another.
func (m *Model) KVType() gpu.DType { return m.kvType }

// SetKVType sets the element type of the KV arenas made after it (F32,
// F16, Q8_0 on the CPU), refusing one the backend does not store.
func (m *Model) SetKVType(t gpu.DType) error {
	types := gpu.KVTypes(m.be)
	if !slices.Contains(types, t) {
		return fmt.Errorf("%w: KV cache type %v: %s stores %v", gpu.ErrUnsupportedType, t, m.be.Name(), types)
	}
	m.kvType = t
	return nil
}

// loader uploads tensors, keeping the first error.
type loader struct {
	f   *gguf.File
	be  gpu.Backend
	err error
}

func (ld *loader) fail(err error) {
	if ld.err == nil {
		ld.err = err
	}
}

func (ld *loader) tensor(name string, dims ...int) *gguf.TensorInfo {
	if ld.err != nil {
		return nil
	}
	ti, ok := ld.f.Tensor(name)
	if !ok {
		ld.fail(fmt.Errorf("%w: %s", ErrMissingTensor, name))
		return nil
	}
	n := 1
	for _, d := range ti.Dims {
		n *= int(d)
	}
	want := 1
	for _, d := range dims {
		want *= d
	}
	if n != want || int(ti.Dims[0]) != dims[0] {
		ld.fail(fmt.Errorf("%w: tensor %s has dims %v, want %v", ErrBadConfig, name, ti.Dims, dims))
		return nil
	}
	if !ti.Type.Supported() {
		ld.fail(unsupportedType(name, ti.Type))
		return nil
	}
	return ti
}

func (ld *loader) matrix(name string, rows, cols int) gpu.Matrix {
	ti := ld.tensor(name, cols, rows)
	if ti == nil {
		return nil
	}
	data, err := ld.f.Data(ti)
	if err != nil {
		ld.fail(err)
		return nil
	}
	w, err := ld.be.NewMatrix(ti.Type, rows, cols, data)
	if err != nil {
		ld.fail(fmt.Errorf("model: tensor %s: %w", name, err))
		return nil
	}
	return w
}

func (ld *loader) floats(ti *gguf.TensorInfo, n int) ([]float32, error) {
	data, err := ld.f.Data(ti)
	if err != nil {
		return nil, err
	}
	out := make([]float32, ti.Elements())
	if len(out) != n {
		return nil, fmt.Errorf("%w: tensor %s has %d elements, want %d", ErrBadConfig, ti.Name, len(out), n)
	}
	if err := quant.Dequantize(ti.Type, data, out); err != nil {
		return nil, fmt.Errorf("model: tensor %s: %w", ti.Name, err)
	}
	return out, nil
}

// values reads an n-value vector into host memory, dequantized.
func (ld *loader) values(name string, n int) []float32 {
	ti := ld.tensor(name, n)
	if ti == nil {
		return nil
	}
	v, err := ld.floats(ti, n)
	if err != nil {
		ld.fail(err)
	}
	return v
}

func (ld *loader) vector(name string, n int) gpu.Tensor {
	v := ld.values(name, n)
	if v == nil {
		return nil
	}
	t, err := ld.be.NewTensor(1, n)
	if err != nil {
		ld.fail(err)
		return nil
	}
	ld.be.Write(t, v)
	return t
}

var errBatch = errors.New("model: malformed batch")
