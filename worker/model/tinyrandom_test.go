package model_test

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
)

// TestLlama2TinyRandom loads the F16 model with the 32k Llama 2 vocabulary
// and an untied classifier, and compares step-0 logits with llama.cpp's
// loosely: llama.cpp rounds activations to F16 before F16 matmuls, so only
// agreement to about 1e-3 is expected (argmax margins are ~1e-4, so greedy
// ids are not compared).
func TestLlama2TinyRandom(t *testing.T) {
	t.Parallel()
	f, err := gguf.Open(modeltest.SharedPath(t, "models/llama2-tiny-random/llama-2-tiny-random.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	be := cpu.New(cpu.Config{Threads: 1})
	defer be.Close()
	m, err := model.New(f, be)
	if err != nil {
		t.Fatal(err)
	}
	if m.Vocab != 32000 || m.TiedOutput || m.Dim != 8 {
		t.Fatalf("config %+v", m.Config)
	}
	if ti, _ := f.Tensor("output.weight"); ti.Type != gpu.F16 {
		t.Fatalf("output.weight is %v, want F16", ti.Type)
	}
	raw, err := os.ReadFile(modeltest.SharedPath(t, "models/llama2-tiny-random/reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		LlamaCpp struct {
			Cases []struct {
				PromptIDs []int32 `json:"prompt_ids"`
				Top5      struct {
					IDs    []int32   `json:"ids"`
					Logits []float32 `json:"logits"`
				} `json:"top5_step0"`
			} `json:"cases"`
		} `json:"llama_cpp_greedy"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.LlamaCpp.Cases) == 0 {
		t.Fatal("no llama.cpp cases in the reference")
	}
	for _, c := range ref.LlamaCpp.Cases {
		logits := prefillLogits(t, m, c.PromptIDs)
		for i, id := range c.Top5.IDs {
			if d := math.Abs(float64(logits[id] - c.Top5.Logits[i])); d > 2e-3 {
				t.Errorf("prompt %v: logit of %d is %g, llama.cpp %g", c.PromptIDs, id, logits[id], c.Top5.Logits[i])
			}
		}
	}
}
