package quant

import "encoding/binary"

// Block sizes of the further GGML types (see doc_more.go).
const (
	BlockQ4_1 = 2 + 2 + QK4_0/2              // 20 bytes
	BlockQ5_0 = 2 + 4 + QK4_0/2              // 22 bytes
	BlockQ5_1 = 2 + 2 + 4 + QK4_0/2          // 24 bytes
	BlockQ2_K = QK_K/16 + QK_K/4 + 2 + 2     // 84 bytes
	BlockQ3_K = QK_K/8 + QK_K/4 + 12 + 2     // 110 bytes
	BlockQ5_K = 2 + 2 + 12 + QK_K/8 + QK_K/2 // 176 bytes
)

// DequantizeQ4_1Block decodes one 20-byte Q4_1 block: x = d·q + m.
func DequantizeQ4_1Block(blk []byte, y []float32) {
	d, m := half(blk), half(blk[2:])
	q := blk[4:BlockQ4_1]
	y = y[:32]
	for j := 0; j < 16; j++ {
		y[j] = float32(float32(q[j]&0xf)*d) + m
		y[j+16] = float32(float32(q[j]>>4)*d) + m
	}
}

// DequantizeQ5_0Block decodes one 22-byte Q5_0 block: x = d·(q − 16), the
// fifth bit of element j being bit j of the little-endian uint32 qh.
func DequantizeQ5_0Block(blk []byte, y []float32) {
	d := half(blk)
	qh := binary.LittleEndian.Uint32(blk[2:])
	q := blk[6:BlockQ5_0]
	y = y[:32]
	for j := 0; j < 16; j++ {
		x0 := int(q[j]&0xf|byte(qh>>j&1)<<4) - 16
		x1 := int(q[j]>>4|byte(qh>>(j+16)&1)<<4) - 16
		y[j] = float32(x0) * d
		y[j+16] = float32(x1) * d
	}
}

// DequantizeQ5_1Block decodes one 24-byte Q5_1 block: x = d·q + m.
func DequantizeQ5_1Block(blk []byte, y []float32) {
	d, m := half(blk), half(blk[2:])
	qh := binary.LittleEndian.Uint32(blk[4:])
	q := blk[8:BlockQ5_1]
	y = y[:32]
	for j := 0; j < 16; j++ {
		x0 := q[j]&0xf | byte(qh>>j&1)<<4
		x1 := q[j]>>4 | byte(qh>>(j+16)&1)<<4
		y[j] = float32(float32(x0)*d) + m
		y[j+16] = float32(float32(x1)*d) + m
	}
}

// DequantizeQ2_KBlock decodes one 84-byte Q2_K super-block.
func DequantizeQ2_KBlock(blk []byte, y []float32) {
	sc := blk[0:16]
	qs := blk[16:80]
	d, dmin := half(blk[80:]), half(blk[82:])
	y = y[:QK_K]
	for i := 0; i < 16; i++ {
		dl := d * float32(sc[i]&0xf)
		ml := dmin * float32(sc[i]>>4)
		for e := 16 * i; e < 16*i+16; e++ {
			q := qs[32*(e/128)+e%32] >> (2 * uint(e/32%4)) & 3
			y[e] = float32(dl*float32(q)) - ml
		}
	}
}

// ScaleK3 returns the 6-bit scale (0..63, value s − 32) of run i (0..15)
// from the 12 packed scale bytes of a Q3_K super-block.
func ScaleK3(i int, s []byte) uint8 {
	return s[i%8]>>(4*uint(i/8))&0xf | (s[8+i%4]>>(2*uint(i/4))&3)<<4
}

// DequantizeQ3_KBlock decodes one 110-byte Q3_K super-block.
func DequantizeQ3_KBlock(blk []byte, y []float32) {
	hm := blk[0:32]
	qs := blk[32:96]
	s := blk[96:108]
	d := half(blk[108:])
	y = y[:QK_K]
	for i := 0; i < 16; i++ {
		dl := d * float32(int(ScaleK3(i, s))-32)
		for e := 16 * i; e < 16*i+16; e++ {
			q := int(qs[32*(e/128)+e%32] >> (2 * uint(e/32%4)) & 3)
			if hm[e%32]>>(e/32)&1 == 0 {
				q -= 4
			}
			y[e] = dl * float32(q)
		}
	}
}

// DequantizeQ5_KBlock decodes one 176-byte Q5_K super-block.
func DequantizeQ5_KBlock(blk []byte, y []float32) {
	d := half(blk)
	dmin := half(blk[2:])
	scales := blk[4:16]
	qh := blk[16:48]
	q := blk[48:BlockQ5_K]
	y = y[:QK_K]
	for c := 0; c < 4; c++ {
		sc, m := ScaleMinK4(2*c, scales)
		d1, m1 := d*float32(sc), dmin*float32(m)
		sc, m = ScaleMinK4(2*c+1, scales)
		d2, m2 := d*float32(sc), dmin*float32(m)
		qc := q[32*c : 32*c+32]
		yc := y[64*c : 64*c+64]
		for l := 0; l < 32; l++ {
			lo := qc[l]&0xf | (qh[l]>>(2*c)&1)<<4
			hi := qc[l]>>4 | (qh[l]>>(2*c+1)&1)<<4
			yc[l] = float32(d1*float32(lo)) - m1
			yc[l+32] = float32(d2*float32(hi)) - m2
		}
	}
}

// Quantizers for the generator.

// QuantizeQ4_1Block: d = (max − min)/15, m = min, q = round((x − m)/d).
func QuantizeQ4_1Block(x []float32, blk []byte) { quantizeMin32(x, blk, 15) }

// QuantizeQ5_1Block: d = (max − min)/31, m = min, q = round((x − m)/d).
func QuantizeQ5_1Block(x []float32, blk []byte) { quantizeMin32(x, blk, 31) }

func quantizeMin32(x []float32, blk []byte, nmax int) {
	x = x[:32]
	lo, hi := x[0], x[0]
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v)
	}
	d := (hi - lo) / float32(nmax)
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putHalf(blk, d)
	putHalf(blk[2:], lo)
	var u [32]uint8
	for j, v := range x {
		u[j] = uint8(clamp(int((v-lo)*id+0.5), 0, nmax))
	}
	if nmax == 15 {
		q := blk[4:BlockQ4_1]
		for j := 0; j < 16; j++ {
			q[j] = u[j] | u[j+16]<<4
		}
		return
	}
	packQ5(u[:], blk[4:8], blk[8:BlockQ5_1])
}

func packQ5(u []uint8, qhb, q []byte) {
	var qh uint32
	for j := 0; j < 16; j++ {
		q[j] = u[j]&0xf | (u[j+16]&0xf)<<4
		qh |= uint32(u[j]>>4) << j
		qh |= uint32(u[j+16]>>4) << (j + 16)
	}
	binary.LittleEndian.PutUint32(qhb, qh)
}

// QuantizeQ5_0Block: d = mx/−16 for the value mx of largest magnitude,
// q = round(x/d) + 16 clamped to 0..31 (ggml's reference rule).
func QuantizeQ5_0Block(x []float32, blk []byte) {
	x = x[:32]
	var amax, mx float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, mx = a, v
		}
	}
	d := mx / -16
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putHalf(blk, d)
	var u [32]uint8
	for j, v := range x {
		u[j] = uint8(min(31, int(int8(v*id+16.5))))
	}
	packQ5(u[:], blk[2:6], blk[6:BlockQ5_0])
}

// QuantizeQ5_KBlock encodes 256 values as one Q5_K super-block.
func QuantizeQ5_KBlock(x []float32, blk []byte) {
	x = x[:QK_K]
	var q [QK_K]uint8
	packScaleMinK4(x, blk, 31, q[:])
	qh, qs := blk[16:48], blk[48:BlockQ5_K]
	clear(qh)
	for c := range 4 {
		for l := range 32 {
			lo, hi := q[64*c+l], q[64*c+32+l]
			qs[32*c+l] = lo&0xf | (hi&0xf)<<4
			qh[l] |= (lo>>4)<<(2*c) | (hi>>4)<<(2*c+1)
		}
	}
}

// packScaleMinK4 fits and writes d, dmin and the 12 scale bytes of a
// Q4_K/Q5_K super-block and returns the quants (0..nmax) in q.
func packScaleMinK4(x []float32, blk []byte, nmax int, q []uint8) {
	var scales, mins [8]float32
	var maxScale, maxMin float32
	for j := range 8 {
		scales[j], mins[j] = fitScaleMin(x[32*j:32*j+32], nmax)
		maxScale, maxMin = max(maxScale, scales[j]), max(maxMin, mins[j])
	}
	putHalf(blk, maxScale/63)
	putHalf(blk[2:], maxMin/63)
	d, dmin := half(blk), half(blk[2:])
	s := blk[4:16]
	clear(s)
	for j := range 8 {
		var ls, lm int
		if d > 0 {
			ls = clamp(round32(scales[j]/d), 0, 63)
		}
		if dmin > 0 {
			lm = clamp(round32(mins[j]/dmin), 0, 63)
		}
		if j < 4 {
			s[j] = byte(ls)
			s[j+4] = byte(lm)
		} else {
			s[j+4] = byte(ls&0xf | (lm&0xf)<<4)
			s[j-4] |= byte(ls>>4) << 6
			s[j] |= byte(lm>>4) << 6
		}
	}
	for j := range 8 {
		sc, m := ScaleMinK4(j, s)
		dj, mj := d*float32(sc), dmin*float32(m)
		for l := 32 * j; l < 32*j+32; l++ {
			q[l] = 0
			if dj > 0 {
				q[l] = uint8(clamp(round32((x[l]+mj)/dj), 0, nmax))
			}
		}
	}
}

// QuantizeQ3_KBlock encodes 256 values as one Q3_K super-block.
func QuantizeQ3_KBlock(x []float32, blk []byte) {
	x = x[:QK_K]
	var scales [16]float32
	var amax, mx float32
	for i := range 16 {
		scales[i] = fitScale(x[16*i:16*i+16], 4)
		if a := abs32(scales[i]); a > amax {
			amax, mx = a, scales[i]
		}
	}
	clear(blk)
	putHalf(blk[108:], mx/-32)
	d := half(blk[108:])
	hm, qs, s := blk[0:32], blk[32:96], blk[96:108]
	for i := range 16 {
		ls := 0
		if d != 0 {
			ls = clamp(round32(scales[i]/d), -32, 31)
		}
		u := uint8(ls + 32)
		s[i%8] |= (u & 0xf) << (4 * uint(i/8))
		s[8+i%4] |= (u >> 4) << (2 * uint(i/4))
		ds := d * float32(ls)
		for e := 16 * i; e < 16*i+16; e++ {
			v := 0
			if ds != 0 {
				v = clamp(round32(x[e]/ds), -4, 3)
			}
			w := uint8(v + 4)
			qs[32*(e/128)+e%32] |= (w & 3) << (2 * uint(e/32%4))
			hm[e%32] |= (w >> 2) << uint(e/32)
		}
	}
}

// QuantizeQ2_KBlock encodes 256 values as one Q2_K super-block.
func QuantizeQ2_KBlock(x []float32, blk []byte) {
	x = x[:QK_K]
	var scales, mins [16]float32
	var maxScale, maxMin float32
	for i := range 16 {
		scales[i], mins[i] = fitScaleMin(x[16*i:16*i+16], 3)
		maxScale, maxMin = max(maxScale, scales[i]), max(maxMin, mins[i])
	}
	clear(blk)
	putHalf(blk[80:], maxScale/15)
	putHalf(blk[82:], maxMin/15)
	d, dmin := half(blk[80:]), half(blk[82:])
	sc, qs := blk[0:16], blk[16:80]
	for i := range 16 {
		var ls, lm int
		if d > 0 {
			ls = clamp(round32(scales[i]/d), 0, 15)
		}
		if dmin > 0 {
			lm = clamp(round32(mins[i]/dmin), 0, 15)
		}
		sc[i] = byte(ls | lm<<4)
		dl, ml := d*float32(ls), dmin*float32(lm)
		for e := 16 * i; e < 16*i+16; e++ {
			v := 0
			if dl > 0 {
				v = clamp(round32((x[e]+ml)/dl), 0, 3)
			}
			qs[32*(e/128)+e%32] |= uint8(v) << (2 * uint(e/32%4))
		}
	}
}
