package model_test

import (
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
)

func BenchmarkTmpPrefill(b *testing.B) {
	f, err := gguf.Open(sharedPath(b, "models/stories260K/stories260K.gguf"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	be := cpu.New(cpu.Config{Threads: 1})
	defer be.Close()
	m, err := model.New(f, be)
	if err != nil {
		b.Fatal(err)
	}
	const pp = 512
	kv, _ := m.NewKV(32, 16)
	tab := [][]int32{make([]int32, 32)}
	for i := range tab[0] {
		tab[0][i] = int32(i)
	}
	toks, pos, seq := make([]int32, pp), make([]int32, pp), make([]int32, pp)
	for i := range toks {
		toks[i], pos[i] = int32(3+i%500), int32(i)
	}
	logits := make([]float32, m.Vocab)
	bt := &gpu.Batch{Pos: pos, Seq: seq, Tables: tab}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := m.Forward(kv, toks, bt, []int32{pp - 1}, logits); err != nil {
			b.Fatal(err)
		}
	}
}
