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

func BenchmarkTmpSynDecode(b *testing.B) {
	for _, ty := range []string{"F32", "Q8_0", "Q4_0"} {
		b.Run(ty, func(b *testing.B) {
			f, err := gguf.Open("/tmp/syn/134m-" + ty + ".gguf")
			if err != nil {
				b.Skip(err)
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
			toks := []int32{0}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				pos[0] = int32(i % 64)
				toks[0] = int32(3 + i%500)
				if err := m.Forward(kv, toks, bt, rows, logits); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
