package quant

import (
	"encoding/binary"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
)

// Hand-built blocks for the further types; the expected values follow from
// GGML's definitions (ggml-common.h layouts, dequantize_row_* arithmetic).

func TestDequantizeQ4_1Known(t *testing.T) {
	blk := make([]byte, BlockQ4_1)
	putH(blk, 0x4000)     // d = 2
	putH(blk[2:], 0xbe00) // m = −1.5
	blk[4+0] = 0x3f       // element 0: 15, element 16: 3
	blk[4+15] = 0xf0      // element 15: 0, element 31: 15
	y := make([]float32, 32)
	if err := Dequantize(gpu.Q4_1, blk, y); err != nil {
		t.Fatal(err)
	}
	want := map[int]float32{}
	for i := range 32 {
		want[i] = -1.5
	}
	want[0], want[16], want[31] = 28.5, 4.5, 28.5
	expect(t, "q4_1", y, want)
}

func TestDequantizeQ5_0Known(t *testing.T) {
	blk := make([]byte, BlockQ5_0)
	putH(blk, 0x3800) // d = 0.5
	binary.LittleEndian.PutUint32(blk[2:], 1|1<<16|1<<31)
	blk[6+0] = 0x0f  // element 0: 15|16 − 16 = 15; element 16: 0|16 − 16 = 0
	blk[6+1] = 0x07  // element 1: 7 − 16 = −9
	blk[6+15] = 0xf0 // element 15: −16; element 31: 15|16 − 16 = 15
	y := make([]float32, 32)
	if err := Dequantize(gpu.Q5_0, blk, y); err != nil {
		t.Fatal(err)
	}
	want := map[int]float32{}
	for i := range 32 {
		want[i] = -8 // q = 0 − 16
	}
	want[0], want[16], want[1], want[31] = 7.5, 0, -4.5, 7.5
	expect(t, "q5_0", y, want)
}

func TestDequantizeQ5_1Known(t *testing.T) {
	blk := make([]byte, BlockQ5_1)
	putH(blk, 0x3c00)     // d = 1
	putH(blk[2:], 0x3400) // m = 0.25
	binary.LittleEndian.PutUint32(blk[4:], 1<<3|1<<20)
	blk[8+3] = 0x21 // element 3: 1|16 = 17; element 19: 2
	blk[8+4] = 0xff // element 4: 15; element 20: 15|16 = 31
	y := make([]float32, 32)
	if err := Dequantize(gpu.Q5_1, blk, y); err != nil {
		t.Fatal(err)
	}
	want := map[int]float32{}
	for i := range 32 {
		want[i] = 0.25
	}
	want[3], want[19], want[4], want[20] = 17.25, 2.25, 15.25, 31.25
	expect(t, "q5_1", y, want)
}

func TestDequantizeQ2_KKnown(t *testing.T) {
	blk := make([]byte, BlockQ2_K)
	putH(blk[80:], 0x3c00) // d = 1
	putH(blk[82:], 0x3800) // dmin = 0.5
	sc, qs := blk[0:16], blk[16:80]
	sc[0] = 0x32    // run 0: scale 2, min 3
	sc[9] = 0x0f    // run 9: scale 15, min 0
	sc[15] = 0xf1   // run 15: scale 1, min 15
	qs[0] = 3       // element 0 (shift 0): 2·3 − 1.5
	qs[54] = 1      // element 150 = 128 + 22 (shift 0): 15·1
	qs[63] = 2 << 6 // element 255 = 128 + 31 + 96 (shift 6): 1·2 − 7.5
	y := make([]float32, 256)
	if err := Dequantize(gpu.Q2_K, blk, y); err != nil {
		t.Fatal(err)
	}
	want := map[int]float32{}
	for i := 0; i < 16; i++ {
		want[i] = -1.5
	}
	for i := 240; i < 256; i++ {
		want[i] = -7.5
	}
	want[0], want[150], want[255] = 4.5, 15, -5.5
	expect(t, "q2_k", y, want)
}

func TestDequantizeQ3_KKnown(t *testing.T) {
	blk := make([]byte, BlockQ3_K)
	putH(blk[108:], 0x3800) // d = 0.5
	hm, qs, s := blk[0:32], blk[32:96], blk[96:108]
	// Every scale 32 (value 0): low nibbles 0, top bits 2 in bytes 8..11.
	for i := 8; i < 12; i++ {
		s[i] = 0xaa
	}
	s[0] |= 5     // run 0: 37 → 5 (low layout, i < 8, low nibble)
	s[9] = 0x2a   // run 13: top bits (byte 9, bits 6-7) 0 → value −32
	s[2] = 0xf0   // run 10: low four bits from byte 2's high nibble
	s[10] |= 0x30 // run 10: top bits (byte 10, bits 4-5) 3 → 63, value 31
	for i := range 16 {
		want := uint8(32)
		switch i {
		case 0:
			want = 37
		case 13:
			want = 0
		case 10:
			want = 63
		}
		if got := ScaleK3(i, s); got != want {
			t.Errorf("ScaleK3(%d) = %d, want %d", i, got, want)
		}
	}
	qs[0], hm[0] = 3, 1 // element 0: q 3, high bit set → 3·2.5
	qs[50] = 1 << 4     // element 210 = 128 + 18 + 64: q 1, no high bit → 1 − 4
	qs[47] = 2 << 2     // element 175 = 128 + 15 + 32: q 2,
	hm[15] = 1 << 5     // high bit 5 set → 2
	y := make([]float32, 256)
	if err := Dequantize(gpu.Q3_K, blk, y); err != nil {
		t.Fatal(err)
	}
	want := map[int]float32{}
	for i := 1; i < 16; i++ {
		want[i] = -10 // 2.5·(0 − 4)
	}
	for i := 208; i < 224; i++ {
		want[i] = 64 // −16·(0 − 4)
	}
	for i := 160; i < 176; i++ {
		want[i] = -62 // 15.5·(0 − 4)
	}
	want[0], want[210], want[175] = 7.5, 48, 31
	expect(t, "q3_k", y, want)
}

func TestDequantizeQ5_KKnown(t *testing.T) {
	blk := make([]byte, BlockQ5_K)
	putH(blk, 0x3c00)     // d = 1
	putH(blk[2:], 0x3800) // dmin = 0.5
	s := blk[4:16]
	s[0], s[4] = 2, 3 // sub-block 0: scale 2, min 3
	s[9] = 0xa | 5<<4 // sub-block 5: scale 42, min 21 (high layout)
	s[1] |= 2 << 6
	s[5] |= 1 << 6
	s[3], s[7] = 63, 1 // sub-block 3: scale 63, min 1
	qh, qs := blk[16:48], blk[48:]
	qs[0], qh[0] = 0x07, 1         // element 0: 7|16 = 23 → 2·23 − 1.5
	qs[64+3], qh[3] = 0xb0, 1<<5   // element 163: 11|16 = 27 → 42·27 − 10.5
	qs[32+31], qh[31] = 0xf0, 1<<3 // element 127: 15|16 = 31 → 63·31 − 0.5
	y := make([]float32, 256)
	if err := Dequantize(gpu.Q5_K, blk, y); err != nil {
		t.Fatal(err)
	}
	want := map[int]float32{0: 44.5, 163: 1123.5, 127: 1952.5}
	for i := 1; i < 32; i++ {
		want[i] = -1.5
	}
	for i := 160; i < 192; i++ {
		if i != 163 {
			want[i] = -10.5
		}
	}
	for i := 96; i < 127; i++ {
		want[i] = -0.5
	}
	expect(t, "q5_k", y, want)
}
