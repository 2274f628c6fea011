package model_test

import (
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
)

// BenchmarkStoriesDecode measures single-sequence decode steps on
// stories260K (one token per op; ns/op is the time per token).
func BenchmarkStoriesDecode(b *testing.B) {
	f, err := gguf.Open(modeltest.SharedPath(b, "models/stories260K/stories260K.gguf"))
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
	kv, _ := m.NewKV(32, 16)
	tab := [][]int32{make([]int32, 32)}
	for i := range tab[0] {
		tab[0][i] = int32(i)
	}
	logits := make([]float32, m.Vocab)
	pos, seq, rows := []int32{0}, []int32{0}, []int32{0}
	bt := &gpu.Batch{Pos: pos, Seq: seq, Tables: tab}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pos[0] = int32(i % 256)
		if err := m.Forward(kv, []int32{int32(3 + i%500)}, bt, rows, logits); err != nil {
			b.Fatal(err)
		}
	}
}
