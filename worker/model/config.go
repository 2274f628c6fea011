package model

import (
	"fmt"
	"math"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
)

// Architectures lists the values of general.architecture Load accepts.
var Architectures = []string{"llama", "qwen2", "qwen3", "gemma3", "bert", "nomic-bert", "gemma-embedding"}

// Config holds the hyper-parameters of a Llama-family model, read from GGUF
// metadata.
type Config struct {
	Arch       string
	Dim        int // embedding width
	Hidden     int // feed-forward width
	Layers     int
	Heads      int
	KVHeads    int
	HeadDim    int
	Vocab      int
	Context    int // trained context length
	NormEps    float32
	RoPE       gpu.RoPE
	QKVBias    bool // qwen2
	TiedOutput bool // the classifier reuses the token embedding

	// QKNorm: each head of Q and K is RMS-normalised over HeadDim (weights
	// attn_q_norm, attn_k_norm) after the projections, before RoPE (qwen3,
	// gemma3).
	QKNorm bool
	// PostNorms: the attention output and the feed-forward output are
	// RMS-normalised (post_attention_norm, post_ffw_norm) before their
	// residual adds (gemma3).
	PostNorms bool
	// GELU: the gated feed-forward uses gelu_tanh instead of SiLU (gemma3).
	GELU bool
	// EmbedScale, if non-zero, multiplies the input embeddings (gemma3:
	// √Dim).
	EmbedScale float32
	// SlidingWindow, if non-zero, is the attention window of the local
	// layers: there a query at position p sees the keys at p0 with
	// p − p0 < SlidingWindow. LocalRoPE is their RoPE; the other (global)
	// layers attend to every earlier position with RoPE. An encoder's
	// window is symmetric (gemma-embedding): the query at p sees the keys
	// at p0 with |p − p0| ≤ SlidingWindow/2, and a global layer the whole
	// input.
	SlidingWindow int
	LocalRoPE     gpu.RoPE
	// SlidingPeriod is how often a global layer comes: layer i is local
	// unless i % SlidingPeriod == SlidingPeriod−1 (0: every layer is
	// local). gemma3: 6, as llama.cpp hard-codes; gemma-embedding:
	// attention.sliding_window_pattern, default 6.
	SlidingPeriod int
	// Pooling is how an embedding is made from the final hidden states
	// (<arch>.pooling_type; PoolNone where the file says nothing).
	Pooling Pooling
	// Encoder: a BERT-family encoder ("bert", "nomic-bert": see bert.go)
	// or gemma-embedding (gemma3's layers: see gemmaembed.go), which only
	// embeds. It has no output head and attends both ways: each input is
	// computed whole by ForwardHidden (its K and V of no use after the
	// call), and the other forward calls refuse it with ErrEncoderOnly.
	Encoder bool
	// DenseHidden, if non-zero, is the width of the dense projections an
	// embedding passes through after pooling (gemma-embedding's dense_2,
	// Dim to DenseHidden, then dense_3 back to Dim: Model.Project).
	DenseHidden int
}

// Pooling is a GGUF pooling type (<arch>.pooling_type, llama.cpp's
// enum values).
type Pooling int

const (
	PoolNone Pooling = 0 // per-token states; embedding callers default to mean
	PoolMean Pooling = 1 // the mean of every position's state
	PoolCLS  Pooling = 2 // the first position's state
	PoolLast Pooling = 3 // the last position's state
)

// String is the name llama.cpp's --pooling flag takes.
func (p Pooling) String() string {
	switch p {
	case PoolNone:
		return "none"
	case PoolMean:
		return "mean"
	case PoolCLS:
		return "cls"
	case PoolLast:
		return "last"
	}
	return fmt.Sprintf("pooling(%d)", int(p))
}

// ParsePooling reads a --pooling value: mean, cls or last.
func ParsePooling(s string) (Pooling, error) {
	for _, p := range []Pooling{PoolMean, PoolCLS, PoolLast} {
		if s == p.String() {
			return p, nil
		}
	}
	return PoolNone, fmt.Errorf("%w: pooling %q (want mean, cls or last)", ErrBadConfig, s)
}

// NeedsArchOps reports whether the model uses the operations of
// gpu.ArchOps.
func (c *Config) NeedsArchOps() bool {
	return c.QKNorm || c.PostNorms || c.GELU || c.EmbedScale != 0 || c.SlidingWindow != 0
}

// LocalLayer reports whether layer i uses sliding-window attention:
// all but every SlidingPeriod-th (gemma3 makes five of every six layers
// local, i % 6 < 5, a pattern llama.cpp hard-codes rather than reads from
// the file).
func (c *Config) LocalLayer(i int) bool {
	p := c.SlidingPeriod
	return c.SlidingWindow > 0 && (p == 0 || i%p < p-1)
}

// LayerAttention returns layer i's attention window (0: full causal) and
// RoPE.
func (c *Config) LayerAttention(i int) (window int, rope gpu.RoPE) {
	if c.LocalLayer(i) {
		return c.SlidingWindow, c.LocalRoPE
	}
	return 0, c.RoPE
}

// KVDim is the width of one K or V row.
func (c *Config) KVDim() int { return c.KVHeads * c.HeadDim }

// ConfigFromGGUF reads the hyper-parameters from a file's metadata.
func ConfigFromGGUF(f *gguf.File) (Config, error) {
	arch := f.Architecture()
	c := Config{Arch: arch}
	switch arch {
	case "llama":
	case "qwen2":
		c.QKVBias = true
		c.RoPE.NeoX = true
	case "qwen3":
		c.QKNorm = true
		c.RoPE.NeoX = true
	case "gemma3", "gemma-embedding":
		c.QKNorm, c.PostNorms, c.GELU = true, true, true
		c.RoPE.NeoX = true
	case "bert", "nomic-bert":
	case "":
		return c, fmt.Errorf("%w: general.architecture is missing", ErrBadConfig)
	default:
		return c, fmt.Errorf("%w: %q (supported: %v)", ErrUnsupportedArch, arch, Architectures)
	}
	req := func(key string) int {
		v, ok := f.Uint(arch + "." + key)
		if !ok {
			return -1
		}
		return int(v)
	}
	c.Dim = req("embedding_length")
	c.Hidden = req("feed_forward_length")
	c.Layers = req("block_count")
	c.Heads = req("attention.head_count")
	c.Context = req("context_length")
	for key, v := range map[string]int{"embedding_length": c.Dim, "feed_forward_length": c.Hidden, "block_count": c.Layers, "attention.head_count": c.Heads, "context_length": c.Context} {
		if v <= 0 {
			return c, fmt.Errorf("%w: %s.%s is missing or zero", ErrBadConfig, arch, key)
		}
	}
	c.KVHeads = c.Heads
	if v := req("attention.head_count_kv"); v > 0 {
		c.KVHeads = v
	}
	if c.Heads%c.KVHeads != 0 {
		return c, fmt.Errorf("%w: %d heads with %d kv heads", ErrBadConfig, c.Heads, c.KVHeads)
	}
	kl, vl := req("attention.key_length"), req("attention.value_length")
	if c.QKNorm {
		// qwen3 and gemma3 give the head size, which may differ from
		// width/heads (Q projects to Heads×HeadDim, the output back to Dim).
		c.HeadDim = kl
		if kl <= 0 {
			if c.Dim%c.Heads != 0 {
				return c, fmt.Errorf("%w: %d heads over width %d and no attention.key_length", ErrBadConfig, c.Heads, c.Dim)
			}
			c.HeadDim = c.Dim / c.Heads
		}
		if vl > 0 && vl != c.HeadDim {
			return c, fmt.Errorf("%w: attention.value_length %d differs from key_length %d", ErrBadConfig, vl, c.HeadDim)
		}
	} else {
		if c.Dim%c.Heads != 0 {
			return c, fmt.Errorf("%w: %d heads over width %d with %d kv heads", ErrBadConfig, c.Heads, c.Dim, c.KVHeads)
		}
		c.HeadDim = c.Dim / c.Heads
		if kl > 0 && kl != c.HeadDim {
			return c, fmt.Errorf("%w: attention.key_length %d differs from width/heads %d", ErrBadConfig, kl, c.HeadDim)
		}
	}
	c.NormEps = 1e-5
	if v, ok := f.Float(arch + ".attention.layer_norm_rms_epsilon"); ok {
		c.NormEps = float32(v)
	}
	c.RoPE.Base = 10000
	if v, ok := f.Float(arch + ".rope.freq_base"); ok {
		c.RoPE.Base = float32(v)
	}
	c.RoPE.Dims = c.HeadDim
	if v := req("rope.dimension_count"); v > 0 {
		c.RoPE.Dims = v
	}
	if c.RoPE.Dims > c.HeadDim || c.RoPE.Dims%2 != 0 {
		return c, fmt.Errorf("%w: rope.dimension_count %d for head size %d", ErrBadConfig, c.RoPE.Dims, c.HeadDim)
	}
	st, _ := f.String(arch + ".rope.scaling.type")
	factor, hasFactor := f.Float(arch + ".rope.scaling.factor")
	if !hasFactor {
		if v, ok := f.Float(arch + ".rope.scale_linear"); ok {
			st, factor, hasFactor = "linear", v, true
		}
	}
	switch st {
	case "", "none":
	case "linear":
		if hasFactor && factor > 0 {
			c.RoPE.Scale = float32(1 / factor)
		}
	default:
		return c, fmt.Errorf("%w: rope scaling %q (supported: none, linear, and llama3 rope_freqs)", ErrBadConfig, st)
	}
	if arch == "gemma3" || arch == "gemma-embedding" {
		c.EmbedScale = float32(math.Sqrt(float64(c.Dim)))
		v, ok := f.Uint(arch + ".attention.sliding_window")
		if !ok || v == 0 {
			return c, fmt.Errorf("%w: %s.attention.sliding_window is missing or zero", ErrBadConfig, arch)
		}
		c.SlidingWindow, c.SlidingPeriod = int(v), 6
		// Local layers rotate with base 10000 whatever rope.freq_base
		// says, and without the global layers' linear scaling (llama.cpp
		// hard-codes base 10000 and scale 1 for them).
		c.LocalRoPE = c.RoPE
		c.LocalRoPE.Base = 10000
		c.LocalRoPE.Scale = 0
		if arch == "gemma-embedding" {
			if err := c.gemmaEmbeddingConfig(f); err != nil {
				return c, err
			}
		}
	} else if v, ok := f.Uint(arch + ".attention.sliding_window"); ok && v > 0 && int(v) < c.Context {
		return c, fmt.Errorf("%w: sliding-window attention (window %d) is not supported", ErrBadConfig, v)
	}
	if v, ok := f.Uint(arch + ".pooling_type"); ok {
		switch p := Pooling(v); p {
		case PoolNone, PoolMean, PoolCLS, PoolLast:
			c.Pooling = p
		default:
			return c, fmt.Errorf("%w: %s.pooling_type %d (supported: none, mean, cls, last)", ErrBadConfig, arch, v)
		}
	}
	if encoderArchs[arch] {
		if err := c.encoderConfig(f); err != nil {
			return c, err
		}
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok || len(emb.Dims) != 2 {
		return c, fmt.Errorf("%w: token_embd.weight", ErrMissingTensor)
	}
	c.Vocab = int(emb.Dims[1])
	_, hasOut := f.Tensor("output.weight")
	c.TiedOutput = !hasOut
	return c, nil
}
