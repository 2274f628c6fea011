package producer_test

import (
	"os/exec"
	"strings"
	"testing"
)

// runsModel reports whether a package of ours runs a model: the engine,
// scheduler, tools, sampler, the worker itself, the forward pass, or any
// package under gpu/ but the seam's own types. Reading GGUF metadata,
// tokenizers and chat templates (worker/model/{gguf,tokenizer,chat,prompt})
// is allowed: producers count prompt tokens with them.
func runsModel(pkg string) bool {
	const mod = "github.com/zerolayer/zerolayer/"
	rel, ours := strings.CutPrefix(pkg, mod)
	if !ours {
		return false
	}
	for _, p := range []string{"worker/engine", "worker/sched", "worker/tools", "worker/sample", "gpu/"} {
		if rel == p || strings.HasPrefix(rel, strings.TrimSuffix(p, "/")+"/") {
			return true
		}
	}
	return rel == "worker" || rel == "worker/model"
}

// TestNoModelRunner fails when the client libraries (the Go producer, the
// HTTP gateway, billing) depend again on anything that runs a model: a
// backend service that imports our client must not compile an inference
// engine.
func TestNoModelRunner(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to list dependencies with")
	}
	for _, pkg := range []string{"github.com/zerolayer/zerolayer/producer/...", "github.com/zerolayer/zerolayer/billing"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 2 {
			t.Fatalf("go list -deps %s listed %d packages", pkg, len(deps))
		}
		for _, d := range deps {
			if runsModel(d) {
				t.Errorf("%s depends on %s, which runs a model", pkg, d)
			}
		}
	}
	// The rule itself: what must be caught is caught.
	for _, p := range []string{"worker", "worker/engine", "worker/sched", "worker/tools", "worker/tools/internal/x", "worker/sample", "worker/model", "gpu/cpu", "gpu/cuda", "gpu/quant"} {
		if !runsModel("github.com/zerolayer/zerolayer/" + p) {
			t.Errorf("rule misses %s", p)
		}
	}
	for _, p := range []string{"gpu", "contracts", "worker/model/gguf", "worker/model/tokenizer", "worker/model/chat", "worker/model/prompt"} {
		if runsModel("github.com/zerolayer/zerolayer/" + p) {
			t.Errorf("rule refuses %s, which runs no model", p)
		}
	}
}
