package engine

import (
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
)

// TestDefaultKVArena sizes issue 37's model (134M parameters, 12 layers of
// 12 KV heads of 64, a context of 8,192 tokens) on machines of several
// sizes: 4 full contexts, more on a large machine, capped by a small one,
// one context when the memory is unknown, never below 256 MB; blocks
// from gpu.KVConfig.BlockBytes, so F16 holds twice F32's tokens.
func TestDefaultKVArena(t *testing.T) {
	t.Parallel()
	const gib = int64(1) << 30
	kvc := func(typ gpu.DType) gpu.KVConfig {
		return gpu.KVConfig{Layers: 12, KVDim: 768, HeadDim: 64, BlockTokens: 16, Type: typ}
	}
	f16, f32 := kvc(gpu.F16).BlockBytes(), kvc(gpu.F32).BlockBytes()
	if f16 != 589_824 || f32 != 1_179_648 {
		t.Fatalf("block bytes F16 %d, F32 %d; want 589,824 and 1,179,648 (12 layers × K and V × 16 positions × 768 values)", f16, f32)
	}
	const ctx, ctxBlocks = 8192, 512
	for _, tc := range []struct {
		name       string
		blockBytes int64
		context    int
		ctxBlocks  int
		mem        Memory
		wantBlocks int
		wantWhy    string
	}{
		{"F16, 24 GB", f16, ctx, ctxBlocks, Memory{24 * gib, 22 * gib}, 4 * ctxBlocks, "4 contexts of 8,192 tokens"},
		{"F32, 24 GB", f32, ctx, ctxBlocks, Memory{24 * gib, 22 * gib}, 4 * ctxBlocks, "4 contexts of 8,192 tokens"},
		// 1/32 of 128 GB is 4 GB: 14 contexts of 288 MB.
		{"F16, 128 GB", f16, ctx, ctxBlocks, Memory{128 * gib, 120 * gib}, 14 * ctxBlocks, "14 contexts of 8,192 tokens"},
		// A quarter of 2 GB, and half of the 1 GB available: 512 MB.
		{"F16, 2 GB", f16, ctx, ctxBlocks, Memory{2 * gib, gib}, 910, "1.8 contexts of 8,192 tokens; capped by the machine's memory (2,048 MB, 1,024 MB available)"},
		{"F32, little available", f32, ctx, ctxBlocks, Memory{16 * gib, gib / 4}, 227, "0.4 contexts of 8,192 tokens; the least default, 256 MB"},
		{"F16, memory unknown", f16, ctx, ctxBlocks, Memory{}, ctxBlocks, "1 context of 8,192 tokens; the machine's memory unknown"},
		// stories260K's size: 4 contexts are a few MB.
		{"tiny", 20_480, 2048, 128, Memory{24 * gib, 22 * gib}, 13_107, "102.4 contexts of 2,048 tokens; the least default, 256 MB"},
	} {
		a := DefaultKVArena(tc.blockBytes, tc.ctxBlocks, tc.context, tc.mem)
		if a.Blocks != tc.wantBlocks || a.Why != tc.wantWhy || a.Bytes != int64(a.Blocks)*tc.blockBytes {
			t.Errorf("%s: %d blocks (%d bytes), %q; want %d blocks, %q", tc.name, a.Blocks, a.Bytes, a.Why, tc.wantBlocks, tc.wantWhy)
		}
		if a.Bytes < DefaultKVMemoryMB<<20-tc.blockBytes {
			t.Errorf("%s: %d bytes, under the %d MB floor", tc.name, a.Bytes, DefaultKVMemoryMB)
		}
	}
	if s := DefaultKVArena(f16, ctxBlocks, ctx, Memory{24 * gib, 22 * gib}).String(); s != "KV arena 1,152 MB: 4 contexts of 8,192 tokens" {
		t.Errorf("String() = %q", s)
	}
}

func TestParseMemInfo(t *testing.T) {
	t.Parallel()
	in := "MemTotal:       24683748 kB\nMemFree:        20985468 kB\nMemAvailable:   23158264 kB\nbad line\nSwapTotal: x kB\n"
	if m := parseMemInfo([]byte(in)); m.Total != 24683748<<10 || m.Available != 23158264<<10 {
		t.Errorf("parseMemInfo = %+v", m)
	}
	if m := parseMemInfo([]byte("nothing here")); m != (Memory{}) {
		t.Errorf("parseMemInfo of nothing = %+v", m)
	}
}
