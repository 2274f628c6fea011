package kernels

import (
	"encoding/binary"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/quant"
)

// The packed K-quant matrix multiplies (Q4_K, Q6_K), for the kernels that
// q8gen writes (dotQ4KP…, dotQ6KP…: AVX512-VNNI and AVX2). As for Q8_0, a group of
// 16 weight rows is stored per super-block so that one register holds the
// same 4 columns of the 16 rows; the activations stay Q8_K super-blocks
// (values, sums of 16, scale). Layouts, per super-block of a group:
//
//	Q4_K (2,560 bytes, 1.11× the file's 2,304): per sub-block of 32, 4
//	registers of nibbles (lane j of register k: row j's values 8k…8k+3 in
//	the low nibbles, 8k+4…8k+7 in the high ones); the scales as 8 × 16
//	bytes; the mins as 8 × 16 byte pairs (m, m); d and dmin as 16 float32.
//
//	Q6_K (3,392 bytes, 1.01× the file's 3,360): per sub-block of 16, the
//	low nibbles of quads 0 and 1, of quads 2 and 3, and one register of the
//	four quads' high 2 bits; the scales as 8 × 16 signed byte pairs
//	(sub-blocks 2k, 2k+1); d as 16 float32.
const (
	q4kPackBlock = 2560
	q6kPackBlock = 3392
	q8KBytes     = int(unsafe.Sizeof(blockQ8K{})) // what the kernels step by: 320
)

// PackQ4_K returns w's rows packed for the packed kernels, or nil where
// they do not run (no AVX2 assembly, another type).
func PackQ4_K(w *Weights) []byte {
	if w.Type != gpu.Q4_K || !useAsm || w.Cols%qkK != 0 || w.Rows == 0 {
		return nil
	}
	return packK(w, q4kPackBlock, quant.BlockQ4_K, func(dst, blk []byte, j int) {
		d, dmin := f16Table[binary.LittleEndian.Uint16(blk)], f16Table[binary.LittleEndian.Uint16(blk[2:])]
		var q [qkK]byte // the nibbles in value order
		for c := 0; c < 4; c++ {
			for l, v := range blk[16+32*c : 16+32*c+32] {
				q[64*c+l], q[64*c+32+l] = v&15, v>>4
			}
		}
		for s := 0; s < 8; s++ {
			for k := 0; k < 4; k++ {
				v := q[32*s+8*k:]
				for c := 0; c < 4; c++ {
					dst[256*s+64*k+4*j+c] = v[c] | v[4+c]<<4
				}
			}
			sc, m := quant.ScaleMinK4(s, blk[4:16])
			dst[2048+16*s+j] = sc
			dst[2176+32*s+2*j], dst[2176+32*s+2*j+1] = m, m
		}
		binary.LittleEndian.PutUint32(dst[2432+4*j:], math.Float32bits(d))
		binary.LittleEndian.PutUint32(dst[2496+4*j:], math.Float32bits(dmin))
	})
}

// PackQ6_K is PackQ4_K for Q6_K.
func PackQ6_K(w *Weights) []byte {
	if w.Type != gpu.Q6_K || !useAsm || w.Cols%qkK != 0 || w.Rows == 0 {
		return nil
	}
	return packK(w, q6kPackBlock, quant.BlockQ6_K, func(dst, blk []byte, j int) {
		ql, qh, sc := blk[0:128], blk[128:192], blk[192:208]
		var q [qkK]byte // the 6-bit values, unsigned (value + 32)
		for n := 0; n < 2; n++ {
			for l := 0; l < 32; l++ {
				h := qh[32*n+l]
				q[128*n+l] = ql[64*n+l]&15 | (h&3)<<4
				q[128*n+l+32] = ql[64*n+l+32]&15 | (h>>2&3)<<4
				q[128*n+l+64] = ql[64*n+l]>>4 | (h>>4&3)<<4
				q[128*n+l+96] = ql[64*n+l+32]>>4 | (h>>6&3)<<4
			}
		}
		for s := 0; s < 16; s++ {
			v := q[16*s:]
			for c := 0; c < 4; c++ {
				dst[192*s+4*j+c] = v[c]&15 | (v[4+c]&15)<<4
				dst[192*s+64+4*j+c] = v[8+c]&15 | (v[12+c]&15)<<4
				dst[192*s+128+4*j+c] = v[c]>>4 | v[4+c]>>4<<2 | v[8+c]>>4<<4 | v[12+c]>>4<<6
			}
			dst[3072+32*(s/2)+2*j+s%2] = sc[s]
		}
		d := f16Table[binary.LittleEndian.Uint16(blk[208:])]
		binary.LittleEndian.PutUint32(dst[3328+4*j:], math.Float32bits(d))
	})
}

// packK lays w out in groups of 16 rows, super-block by super-block:
// fill writes row j (< 16) of a group's packed super-block from the file's
// block of blockBytes. Padding rows stay zero (zero weights, zero scales).
// The groups are packed on all cores: a 7B model's matrices would take
// tens of seconds on one.
func packK(w *Weights, packBytes, blockBytes int, fill func(dst, blk []byte, j int)) []byte {
	nb, rb := w.Cols/qkK, w.rowBytes()
	groups := (w.Rows + q8Group - 1) / q8Group
	p := make([]byte, groups*nb*packBytes)
	parallelFor(groups, func(g int) {
		for b := 0; b < nb; b++ {
			dst := p[(g*nb+b)*packBytes:][:packBytes]
			for j := 0; j < q8Group && g*q8Group+j < w.Rows; j++ {
				fill(dst, w.Data[(g*q8Group+j)*rb+b*blockBytes:][:blockBytes], j)
			}
		}
	})
	return p
}

// parallelFor runs f(0…n−1) on up to GOMAXPROCS goroutines.
func parallelFor(n int, f func(i int)) {
	workers := min(n, runtime.GOMAXPROCS(0))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		}()
	}
	wg.Wait()
}
