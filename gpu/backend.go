package gpu

import "math"

// Tensor is a row-major float32 matrix that lives on a backend: activations,
// norm weights, biases. Its concrete type belongs to the backend that made
// it; passing a tensor to another backend panics.
type Tensor interface {
	Rows() int
	Cols() int
}

// Matrix is a read-only weight matrix of Rows()×Cols() elements stored in
// DType(), row-major, each row a sequence of the type's blocks. Multiplying
// by it computes x·Wᵀ: Cols is the input dimension, Rows the output.
type Matrix interface {
	Rows() int
	Cols() int
	DType() DType
}

// DefaultBlockTokens is the number of token positions per KV block wherever
// a size is not given: the engine, the scheduler and KVConfig itself.
const DefaultBlockTokens = 16

// KVConfig sizes a paged KV arena.
type KVConfig struct {
	// Layers is the number of transformer layers. Required.
	Layers int
	// KVDim is kv_heads × head_dim, the width of one K (or V) row. Required.
	KVDim int
	// BlockTokens is the number of token positions per block. Defaults to
	// DefaultBlockTokens (16).
	BlockTokens int
	// Blocks is the number of blocks in the arena. Required.
	Blocks int
	// HeadDim is the width of one kv head: K and V rows are KVDim/HeadDim
	// heads. A backend may store each head's rows apart (the CPU arena
	// does, so that attention reads one head's V rows in one run). Zero
	// means KVDim (one head).
	HeadDim int
	// Type is the element type of the cached K and V values: F32 (the
	// zero value), F16 or Q8_0, as llama.cpp's --cache-type-k/-v. A
	// backend refuses a type it cannot store.
	Type DType
}

// WithDefaults returns the config with zero fields set to their defaults.
func (c KVConfig) WithDefaults() KVConfig {
	if c.BlockTokens == 0 {
		c.BlockTokens = DefaultBlockTokens
	}
	if c.HeadDim == 0 {
		c.HeadDim = c.KVDim
	}
	return c
}

// BlockFloats is the number of values in one block: every layer's K and V
// rows for BlockTokens positions. A block is one contiguous region of
// BlockBytes, each layer's K and V in it laid out as the backend's kernels
// read them, so moving a block to another memory tier is a single copy.
func (c KVConfig) BlockFloats() int { return c.Layers * 2 * c.BlockTokens * c.KVDim }

// BlockBytes is the size of one block in the arena's memory: BlockFloats
// values of Type (every K and V row of a quantized type is a whole number
// of its blocks). Sizing, admission and usage count these bytes.
func (c KVConfig) BlockBytes() int64 {
	rb, err := c.Type.RowBytes(c.KVDim)
	if err != nil {
		return int64(c.BlockFloats()) * 4
	}
	return int64(c.Layers) * 2 * int64(c.BlockTokens) * int64(rb)
}

// KVTyper is implemented by backends that store KV caches of other types
// than F32; KVTypes lists them, the preferred (the default) first. A
// backend without it stores F32 only.
type KVTyper interface {
	KVTypes() []DType
}

// KVTypes returns the KV cache types be stores, the default first.
func KVTypes(be Backend) []DType {
	if t, ok := be.(KVTyper); ok {
		return t.KVTypes()
	}
	return []DType{F32}
}

// MultiMatMuler is implemented by backends that multiply one activation by
// several matrices in one call (the CPU backend quantizes the activation
// once for all of them): MatMuls(dst, x, w) gives dst[i] the bits of
// MatMul(dst[i], x, w[i]).
type MultiMatMuler interface {
	MatMuls(dst []Tensor, x Tensor, w []Matrix)
}

// MatMuls computes dst[i] = x·w[i]ᵀ for each i: in one call where be
// implements MultiMatMuler, else by MatMul on each.
func MatMuls(be Backend, dst []Tensor, x Tensor, w []Matrix) {
	if mm, ok := be.(MultiMatMuler); ok {
		mm.MatMuls(dst, x, w)
		return
	}
	for i := range w {
		be.MatMul(dst[i], x, w[i])
	}
}

// KVSizer is implemented by backends that size a KV arena from the memory
// their device has free (the CUDA backend); an arena on a backend without
// it has a configured size. Callers ask it after the weights are loaded.
type KVSizer interface {
	// KVBlocks returns how many blocks of cfg fit in fraction (0, 1] of
	// the device memory free now.
	KVBlocks(cfg KVConfig, fraction float64) (int, error)
}

// KV is a paged key/value cache: an arena of fixed-size blocks. Which block
// holds which positions of which sequence is the caller's business, given to
// each operation as a Batch's block tables.
type KV interface {
	Config() KVConfig
	// ReadBlock copies block b to dst (len BlockBytes()), as stored.
	ReadBlock(b int, dst []byte)
	// WriteBlock copies src (len BlockBytes()), a block as ReadBlock
	// gave it, into block b.
	WriteBlock(b int, src []byte)
}

// Batch describes the rows of one forward step: row i is the token at
// position Pos[i] of sequence Seq[i], and Tables[s] is sequence s's block
// table (block ids in position order). Rows of one sequence are consecutive
// and in position order. For AttentionWindow a table may hold −1 for the
// blocks before the window of the sequence's first row in the batch (the
// memory of a sliding-window layer's old positions, given back): no
// operation reads them.
type Batch struct {
	Pos    []int32
	Seq    []int32
	Tables [][]int32
	// Group numbers the layer group whose tables these are, when a step
	// passes a batch per group (an arena whose blocks hold a group of
	// layers each); a backend may keep a device copy per group. Zero
	// otherwise.
	Group int
}

// RoPE parameterises rotary position embeddings.
type RoPE struct {
	// Dims is the number of rotated dimensions at the start of each head.
	Dims int
	// Base is the frequency base theta (10000 for Llama 2).
	Base float32
	// Scale multiplies positions (linear scaling: 1/factor). Zero means 1.
	Scale float32
	// NeoX rotates the pairs (x[i], x[i+Dims/2]) instead of the adjacent
	// pairs (x[2i], x[2i+1]).
	NeoX bool
	// Factors, if set (len Dims/2), divides each frequency (Llama 3.1
	// rope_freqs).
	Factors []float32
}

// Freqs returns the angular frequency of each of the r.Dims/2 rotated
// pairs, base^(-2j/Dims) divided by Factors[j] when Factors is set and
// non-zero, in float64. Every backend derives its angles from it, so the
// CPU and CUDA backends rotate by the same frequencies.
func (r RoPE) Freqs() []float64 {
	half := r.Dims / 2
	inv := make([]float64, half)
	for j := range inv {
		inv[j] = 1 / math.Pow(float64(r.Base), float64(2*j)/float64(r.Dims))
		if len(r.Factors) == half && r.Factors[j] != 0 {
			inv[j] /= float64(r.Factors[j])
		}
	}
	return inv
}

// Synchronous is implemented by backends whose operations are complete
// when they return (the CPU backend), so a caller may abandon a step
// between two operations and no queued work is left behind.
type Synchronous interface {
	Synchronous() bool
}

// BatchInvariant is implemented by backends whose every row's results
// have the same bits whatever rows are computed beside it and however a
// sequence's positions are cut into steps (the CPU backend: its kernels
// sum each row in a fixed order). A caller may then compute a row in a
// step of many and rely on getting what computing it alone gives: the
// scheduler verifies drafted tokens that way, and its outputs stay those
// of decoding without drafts.
type BatchInvariant interface {
	BatchInvariant() bool
}

// HostParallel is implemented by backends whose compute threads are the
// host's processors (the CPU backend). Between two operations those threads
// wait for the next one, holding their processors; host work the caller
// has between operations (sampling a step's rows) runs best on them, where
// goroutines of its own would queue behind them.
type HostParallel interface {
	// HostFor calls fn on disjoint ranges [lo, hi) covering [0, n) on the
	// backend's threads, the caller's among them, and returns when every
	// call has returned. fn must not call the backend.
	HostFor(n int, fn func(lo, hi int))
}

// Backend is the device seam: everything the model runner needs from a
// device, and nothing else.
//
// Concurrency: a Backend is driven by one goroutine at a time (the step
// loop); implementations parallelize inside each call as they see fit.
// Operations may be queued: they panic on misuse that is a programming error
// (shape mismatch, foreign tensor), and record device failures, which Sync
// and Read return. Tensor arguments of one call may alias only where a method
// says so.
type Backend interface {
	// Name identifies the backend and device ("cpu", "cuda:0 NVIDIA H200").
	Name() string
	// NewTensor allocates a zeroed rows×cols tensor.
	NewTensor(rows, cols int) (Tensor, error)
	// NewMatrix uploads a weight matrix; data holds rows×RowBytes(cols)
	// bytes and may be retained by the backend (it is usually mmapped) and
	// must not change.
	NewMatrix(t DType, rows, cols int, data []byte) (Matrix, error)
	// NewKV allocates a paged KV arena.
	NewKV(cfg KVConfig) (KV, error)
	// View returns rows [from, from+n) of x, sharing its storage.
	View(x Tensor, from, n int) Tensor
	// Free releases a tensor; using it afterwards is undefined.
	Free(x Tensor)
	// Write copies src (len Rows×Cols) into dst.
	Write(dst Tensor, src []float32)
	// Read waits for queued work and copies src into dst.
	Read(src Tensor, dst []float32) error
	// Sync waits for queued work and returns the first failure since the
	// last Sync or Read.
	Sync() error

	// Embed sets dst row i to row ids[i] of table, dequantized.
	Embed(dst Tensor, table Matrix, ids []int32)
	// MatMul computes dst = x·wᵀ (dst M×w.Rows, x M×w.Cols).
	MatMul(dst, x Tensor, w Matrix)
	// Add computes dst += x; x has dst's shape, or one row broadcast to all.
	Add(dst, x Tensor)
	// RMSNorm sets each row of dst to x's row / rms(row) × w (w 1×Cols).
	// dst may be x.
	RMSNorm(dst, x, w Tensor, eps float32)
	// RoPE rotates x (rows × heads·headDim) in place; row i at position
	// b.Pos[i].
	RoPE(x Tensor, heads int, b *Batch, r RoPE)
	// StoreKV writes each row of k and v (rows × KVDim) into the cache slot
	// of its sequence and position.
	StoreKV(kv KV, layer int, k, v Tensor, b *Batch)
	// Attention computes causal grouped-query attention for each row of q
	// (rows × heads·headDim) over positions 0..Pos[i] of its sequence, with
	// scale 1/sqrt(headDim), and writes the result to dst (q's shape).
	Attention(dst, q Tensor, kv KV, layer, heads int, b *Batch)
	// SwiGLU computes dst = silu(gate) ⊙ up. dst may be gate.
	SwiGLU(dst, gate, up Tensor)
	// Softmax replaces each row of x by its softmax.
	Softmax(x Tensor)
	// Gather sets dst row i to x row rows[i].
	Gather(dst, x Tensor, rows []int32)
	// Close releases every allocation of the backend.
	Close() error
}

// ArchOps is implemented by backends that run the operations the qwen3 and
// gemma3 architectures add to the Llama step: per-head Q/K RMSNorm,
// GELU-gated feed-forward, embedding scaling and sliding-window attention.
// It is a separate interface so that a backend without these kernels still
// runs llama and qwen2; the model refuses, at load, an architecture that
// needs ArchOps on a backend that lacks it.
type ArchOps interface {
	// ArchReady reports whether the operations below can run: nil, or why
	// not (a CUDA build whose compiled kernels predate them).
	ArchReady() error
	// RMSNormHeads normalises, in place, each head of each row of x
	// (rows × heads·headDim) by its own rms over headDim and scales it by
	// w (1 × headDim), as RMSNorm does for a whole row.
	RMSNormHeads(x Tensor, heads int, w Tensor, eps float32)
	// GeGLU computes dst = gelu_tanh(gate) ⊙ up, with the tanh
	// approximation 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))). dst may be
	// gate.
	GeGLU(dst, gate, up Tensor)
	// Scale multiplies every element of x by s in place.
	Scale(x Tensor, s float32)
	// AttentionWindow is Attention restricted to a sliding window: the
	// query at position p sees the keys at positions p0 with
	// p − p0 < window (p0 ≤ p). window ≤ 0 means no window, exactly
	// Attention.
	AttentionWindow(dst, q Tensor, kv KV, layer, heads, window int, b *Batch)
}
