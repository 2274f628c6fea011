package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/worker/model/synth"
)

// TestModelsListColumns: models list shows each generated model's
// architecture, parameter count, context, tensor types and chat template;
// a split model once, under its name, with the size of all its files.
func TestModelsListColumns(t *testing.T) {
	dir := t.TempDir()
	small := func(typ gpu.DType, tmpl string) synth.Config {
		c := synth.Tiny(typ)
		c.Layers, c.Context, c.ChatTemplate = 1, 4096, tmpl
		return c
	}
	if err := synth.WriteFile(filepath.Join(dir, "chatty.gguf"), small(gpu.Q8_0, "{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}")); err != nil {
		t.Fatal(err)
	}
	if err := synth.WriteFile(filepath.Join(dir, "odd.gguf"), small(gpu.F32, "{{ weird }}")); err != nil {
		t.Fatal(err)
	}
	w, err := synth.Build(small(gpu.F16, ""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteSplit(filepath.Join(dir, "parts"), 3); err != nil {
		t.Fatal(err)
	}
	w.Set("general.architecture", "mamba")
	w.Set("mamba.context_length", uint32(777))
	if err := w.WriteFile(filepath.Join(dir, "snake.gguf")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ZEROLAYER_MODEL_PATH", dir)
	out, err := capture(t, runModels, "list")
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out)
	lines := strings.Split(out, "\n")
	if h := strings.Fields(lines[0]); strings.Join(h, " ") != "NAME ARCH PARAMS CONTEXT TYPES TEMPLATE SIZE PATH" {
		t.Fatalf("header %q", lines[0])
	}
	row := func(name string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, name+" ") {
				return l
			}
		}
		t.Fatalf("no row for %s:\n%s", name, out)
		return ""
	}
	// Tiny: dim 256, hidden 512, 1 layer, 4 heads (2 kv), vocab 300.
	params := synth.Config{Dim: 256, Hidden: 512, Layers: 1, Heads: 4, KVHeads: 2, Vocab: 300}.Params()
	if params != 744192 {
		t.Fatalf("params %d", params)
	}
	for name, want := range map[string][]string{
		"chatty": {"llama (1 layers, dim 256)", " 0.7M ", " 4096 ", "Q8_0×9, F32×3", " chatml ", "chatty.gguf"},
		"odd":    {"llama", "F32×12", " unrecognised "},
		"parts":  {"llama (1 layers, dim 256)", "F16×9, F32×3", " none ", "parts-00001-of-00003.gguf"},
		"snake":  {"mamba (unsupported)", " 777 "},
	} {
		r := row(name)
		for _, s := range want {
			if !strings.Contains(r, s) {
				t.Errorf("%s row %q lacks %q", name, r, s)
			}
		}
	}
	if strings.Contains(out, "parts-00002") {
		t.Errorf("a later split file is listed:\n%s", out)
	}
}

func TestParamCount(t *testing.T) {
	for n, want := range map[uint64]string{12: "12", 260_000: "260K", 292_000: "292K", 774_400: "0.8M", 134_000_000: "134M", 596_000_000: "0.6B", 8_030_000_000: "8.0B", 70_600_000_000: "71B"} {
		if got := paramCount(n); got != want {
			t.Errorf("paramCount(%d) = %q, want %q", n, got, want)
		}
	}
}
