package model

import (
	"fmt"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
)

// Architectures lists the values of general.architecture Load accepts.
var Architectures = []string{"llama", "qwen2"}

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
	if c.Dim%c.Heads != 0 || c.Heads%c.KVHeads != 0 {
		return c, fmt.Errorf("%w: %d heads over width %d with %d kv heads", ErrBadConfig, c.Heads, c.Dim, c.KVHeads)
	}
	c.HeadDim = c.Dim / c.Heads
	if v := req("attention.key_length"); v > 0 && v != c.HeadDim {
		return c, fmt.Errorf("%w: attention.key_length %d differs from width/heads %d", ErrBadConfig, v, c.HeadDim)
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
	if v, ok := f.Uint(arch + ".attention.sliding_window"); ok && v > 0 && int(v) < c.Context {
		return c, fmt.Errorf("%w: sliding-window attention (window %d) is not supported", ErrBadConfig, v)
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
