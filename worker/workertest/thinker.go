package workertest

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/sched"
)

// ThinkerName is the name the thinking model of ThinkerPath is served
// under.
const ThinkerName = "thinker"

// The thinker's answer to any prompt, as its greedy output decodes: a
// reasoning block, then the answer.
const (
	ThinkerReasoning = "221 is 13 × 17."
	ThinkerAnswer    = "No, it is not prime."
)

// ThinkerPath writes a real one-layer llama model whose weights are set by
// hand so that its greedy continuation of any prompt ending in "\n" (as
// every ChatML generation prompt does) is the chain
//
//	<think> · "221 is 13 × 17." · </think> · "\n\n" · "No, it is not prime." · </s>
//
// with the published Qwen3 chat template (so it thinks unless told not
// to), and returns its path. Its attention and feed-forward weights are
// zero, so each position's logits depend on its own token only: the
// embedding of the chain's k-th token is the k-th unit vector, and the
// output matrix maps it to the next token of the chain with a margin of
// 80 logits. It skips when ../shared (the template) is absent.
func ThinkerPath(t testing.TB) string {
	t.Helper()
	tmpl, err := os.ReadFile(modeltest.SharedPath(t, "tokenizers/templates/Qwen-Qwen3-0.6B.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	const dim, heads, hidden = 64, 4, 64
	toks := []string{"<unk>", "<s>", "</s>"}
	types := []int32{2, 3, 3}
	for b := 0; b < 256; b++ {
		toks, types = append(toks, fmt.Sprintf("<0x%02X>", b)), append(types, 6)
	}
	chain := []string{"\n", "<think>", "221▁is▁13▁×▁17.", "</think>", "\n\n", "No,▁it▁is▁not▁prime."}
	ids := make([]int, len(chain))
	for k, s := range chain {
		ids[k] = len(toks)
		typ := int32(1)
		if s == "<think>" || s == "</think>" {
			typ = 4 // user-defined: matched and decoded whole
		}
		toks, types = append(toks, s), append(types, typ)
	}
	succ := append(ids[1:], 2) // the last piece is followed by </s>
	vocab := len(toks)
	scores := make([]float32, vocab)
	w := gguf.NewWriter()
	w.Set("general.architecture", "llama")
	w.Set("general.name", "thinker")
	w.Set("llama.context_length", uint32(2048))
	w.Set("llama.embedding_length", uint32(dim))
	w.Set("llama.block_count", uint32(1))
	w.Set("llama.feed_forward_length", uint32(hidden))
	w.Set("llama.attention.head_count", uint32(heads))
	w.Set("llama.attention.head_count_kv", uint32(heads))
	w.Set("llama.attention.layer_norm_rms_epsilon", float32(1e-5))
	w.Set("llama.rope.dimension_count", uint32(dim/heads))
	w.Set("tokenizer.ggml.model", "llama")
	w.Set("tokenizer.ggml.tokens", toks)
	w.Set("tokenizer.ggml.scores", scores)
	w.Set("tokenizer.ggml.token_type", types)
	w.Set("tokenizer.ggml.bos_token_id", uint32(1))
	w.Set("tokenizer.ggml.eos_token_id", uint32(2))
	w.Set("tokenizer.ggml.unknown_token_id", uint32(0))
	w.Set("tokenizer.ggml.add_space_prefix", false)
	w.Set("tokenizer.chat_template", string(tmpl))
	f32 := func(v []float32) []byte {
		b := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		return b
	}
	add := func(name string, rows, cols int, v []float32) {
		if err != nil {
			return
		}
		if v == nil {
			v = make([]float32, rows*cols)
		}
		dims := []uint64{uint64(cols)}
		if rows > 1 {
			dims = append(dims, uint64(rows))
		}
		err = w.AddTensor(name, gpu.F32, dims, f32(v))
	}
	ones := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	embed := make([]float32, vocab*dim)
	out := make([]float32, vocab*dim)
	for k, id := range ids {
		embed[id*dim+k] = 1
		out[succ[k]*dim+k] = 10
	}
	add("token_embd.weight", vocab, dim, embed)
	add("blk.0.attn_norm.weight", 1, dim, ones(dim))
	for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_output"} {
		add("blk.0."+n+".weight", dim, dim, nil)
	}
	add("blk.0.ffn_norm.weight", 1, dim, ones(dim))
	add("blk.0.ffn_gate.weight", hidden, dim, nil)
	add("blk.0.ffn_up.weight", hidden, dim, nil)
	add("blk.0.ffn_down.weight", dim, hidden, nil)
	add("output_norm.weight", 1, dim, ones(dim))
	add("output.weight", vocab, dim, out)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "thinker.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// NewThinkerExecutor serves the model at path (ThinkerPath's) as
// ThinkerName, and stories260K as ModelName, each through a scheduler
// stopped at cleanup.
func NewThinkerExecutor(t testing.TB, path string) *worker.SchedExecutor {
	t.Helper()
	thinker, err := engine.Load(path, cpu.New(cpu.Config{Threads: 1}))
	if err != nil {
		t.Fatal(err)
	}
	stories := modeltest.LoadStories(t, 1)
	var models []*worker.ScheduledModel
	for name, l := range map[string]*engine.Loaded{ThinkerName: thinker, ModelName: stories} {
		s, err := sched.New(l.Model, l.Tokenizer, sched.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Stop(context.Background()) })
		models = append(models, &worker.ScheduledModel{Name: name, Loaded: l, Scheduler: s})
	}
	return worker.NewSchedExecutor(thinker.Model.Backend().Name(), contracts.Buckets{}, models...)
}
