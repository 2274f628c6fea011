package kernels

//go:generate go run ./q8gen

import (
	"encoding/binary"
	"math"

	"github.com/zerolayer/zerolayer/gpu"
)

// The packed Q8_0 matrix multiply. At load, a Q8_0 matrix is repacked
// (PackQ8_0): its rows in groups of 16, each block of 32 columns of a group
// stored as 8 quads × 16 rows of 4 weights (so one 512-bit register holds
// the same 4 columns of 16 rows), biased to unsigned (w + 128), followed by
// the 16 rows' scales as float32. The AVX512-VNNI kernel broadcasts 4
// activation values at a time against such a register: VPDPBUSD does 64
// multiply-adds for 16 outputs with no reduction across lanes, and a
// block's integer sum is scaled once for 16 outputs, where the row-major
// kernels scale it per output. The bias is taken back with −128 × the
// block's activation sum, computed when the activations are quantized.
//
// The AVX2 kernels read the same layout as two halves of 8 rows
// (VPMADDUBSW on 256-bit registers; q8gen/avx2.go) and give the VNNI
// kernels' bits, as do the Go twins (pack_generic.go), so that which runs
// (MatMul.packKernels) changes only the speed.

const (
	q8Group     = 16                      // weight rows per packed group
	q8PackBlock = 8*q8Group*4 + 4*q8Group // bytes per block of a group: 576
	q4PackBlock = 4*q8Group*4 + 4*q8Group // the same of Q4_0: 320
	q8MaxRows   = 6                       // activation rows per kernel call
)

// packBlock is the bytes of a packed block of a group of type t.
func packBlock(t gpu.DType) int {
	switch t {
	case gpu.Q4_0:
		return q4PackBlock
	case gpu.Q4_K:
		return q4kPackBlock
	case gpu.Q6_K:
		return q6kPackBlock
	}
	return q8PackBlock
}

// packBias is the bias of a packed type's unsigned weights: 128 for Q8_0
// (w + 128), 8 for Q4_0 (its nibbles are w + 8).
func packBias(t gpu.DType) int32 {
	if t == gpu.Q4_0 {
		return 8
	}
	return 128
}

// q8Meta is an activation block's scale and bias correction.
type q8Meta struct {
	d float32
	c int32 // −128 × the sum of the block's quantized values
}

// packKernels returns the packed kernels that run now: VNNI where the CPU
// has it and the wide kernels are on, else AVX2, else the Go twins (which
// run only where a test packed the weights: Pack* return nil without the
// assembly). Tests set mm.packWith to choose.
func (mm *MatMul) packKernels() *packKernels {
	switch {
	case mm.packWith != nil:
		return mm.packWith
	case wideOn() && hasVNNI:
		return &packVNNI
	case useAsm:
		return &packAVX2
	}
	return &packGo
}

// PackQ8_0 returns w's rows packed for the packed kernels, or nil where
// they do not run (no AVX2 assembly, another type). The result takes about
// 1.06 times w's bytes; w is kept for what reads rows (embedding lookups,
// the other kernel paths).
func PackQ8_0(w *Weights) []byte {
	if w.Type != gpu.Q8_0 || !useAsm || w.Cols%qk8 != 0 || w.Rows == 0 {
		return nil
	}
	nb, rb := w.Cols/qk8, w.rowBytes()
	groups := (w.Rows + q8Group - 1) / q8Group
	p := make([]byte, groups*nb*q8PackBlock)
	parallelFor(groups, func(g int) {
		for b := 0; b < nb; b++ {
			dst := p[(g*nb+b)*q8PackBlock:][:q8PackBlock]
			for j := 0; j < q8Group; j++ {
				r := g*q8Group + j
				if r >= w.Rows {
					for q := 0; q < 8; q++ { // padding rows: zero weights
						copy(dst[q*64+4*j:q*64+4*j+4], []byte{0x80, 0x80, 0x80, 0x80})
					}
					continue
				}
				blk := w.Data[r*rb+b*34:][:34]
				for q := 0; q < 8; q++ {
					for k := 0; k < 4; k++ {
						dst[q*64+4*j+k] = blk[2+4*q+k] ^ 0x80
					}
				}
				d := f16Table[binary.LittleEndian.Uint16(blk)]
				binary.LittleEndian.PutUint32(dst[512+4*j:], math.Float32bits(d))
			}
		}
	})
	return p
}

// q8Metas fills meta for activation rows quantized to qs (nb blocks each)
// with scales d, for weights of the given bias.
func q8Metas(qs []int8, d []float32, meta []q8Meta, bias int32) {
	var sums [64]int32
	for b0 := 0; b0 < len(meta); b0 += len(sums) {
		n := min(len(sums), len(meta)-b0)
		blockSums(qs[b0*qk8:(b0+n)*qk8], sums[:n])
		for i, s := range sums[:n] {
			meta[b0+i] = q8Meta{d: d[b0+i], c: -bias * s}
		}
	}
}

// blockSums sets sums[b] to the sum of block b of qs (32 values each).
func blockSums(qs []int8, sums []int32) {
	_ = qs[len(sums)*qk8-1]
	if useAsm {
		blockSumsI8AVX2(&qs[0], len(sums), &sums[0])
		return
	}
	for b := range sums {
		var s int32
		for _, v := range qs[b*qk8 : (b+1)*qk8] {
			s += int32(v)
		}
		sums[b] = s
	}
}

// PackQ4_0 is PackQ8_0 for Q4_0: per block of a group of 16 rows, four
// registers' worth of nibbles (lane j of register i holds row j's values
// 8i…8i+3 in its low nibbles and 8i+4…8i+7 in its high ones, as w + 8),
// then the 16 scales: 320 bytes, 1.1 times the file's 288.
func PackQ4_0(w *Weights) []byte {
	if w.Type != gpu.Q4_0 || !useAsm || w.Cols%qk8 != 0 || w.Rows == 0 {
		return nil
	}
	nb, rb := w.Cols/qk8, w.rowBytes()
	groups := (w.Rows + q8Group - 1) / q8Group
	p := make([]byte, groups*nb*q4PackBlock)
	parallelFor(groups, func(g int) {
		for b := 0; b < nb; b++ {
			dst := p[(g*nb+b)*q4PackBlock:][:q4PackBlock]
			for j := 0; j < q8Group; j++ {
				r := g*q8Group + j
				if r >= w.Rows {
					for i := 0; i < 4; i++ { // padding rows: zero weights
						copy(dst[i*64+4*j:i*64+4*j+4], []byte{0x88, 0x88, 0x88, 0x88})
					}
					continue
				}
				blk := w.Data[r*rb+b*18:][:18]
				val := func(k int) byte {
					if k < 16 {
						return blk[2+k] & 15
					}
					return blk[2+k-16] >> 4
				}
				for i := 0; i < 4; i++ {
					for c := 0; c < 4; c++ {
						dst[i*64+4*j+c] = val(8*i+c) | val(8*i+4+c)<<4
					}
				}
				d := f16Table[binary.LittleEndian.Uint16(blk)]
				binary.LittleEndian.PutUint32(dst[256+4*j:], math.Float32bits(d))
			}
		}
	})
	return p
}

// tilePacked computes dst rows m0..m1, columns r0..r1 (r0 a multiple of
// 16) from the packed weights, every activation row through the same
// kernel operations: Q8_0 blocks of activations for Q8_0 and Q4_0, Q8_K
// super-blocks for Q4_K and Q6_K.
//
// Where the family has them (q8x2, q4x2), whole calls of q8MaxRows rows
// take two groups at once; a row's bits are the same either way.
func (mm *MatMul) tilePacked(r0, r1, m0, m1 int) {
	var o [2 * q8MaxRows * q8Group]float32
	K, N := mm.cols, mm.rows
	nb := K / qk8
	if mm.t == gpu.Q4_K || mm.t == gpu.Q6_K {
		nb = K / qkK
	}
	pb := packBlock(mm.t)
	k := mm.packKernels()
	// one multiplies group g by activation rows m… (rows of them) into
	// out; pair, groups g and g+1 by q8MaxRows rows, where the family has
	// such a kernel.
	one := func(g, m, rows int, out *float32) {
		w := &mm.pack[g*nb*pb]
		switch mm.t {
		case gpu.Q4_0:
			k.q4[rows-1](w, nb, &mm.aq[m*K], K, &mm.am[m*nb], 8*nb, out)
		case gpu.Q4_K:
			k.q4k[rows-1](w, nb, &mm.akb[m*nb], nb*q8KBytes, out)
		case gpu.Q6_K:
			k.q6k[rows-1](w, nb, &mm.akb[m*nb], nb*q8KBytes, out)
		default:
			k.q8[rows-1](w, nb, &mm.aq[m*K], K, &mm.am[m*nb], 8*nb, out)
		}
	}
	hasPair := false
	switch mm.t {
	case gpu.Q8_0:
		hasPair = k.q8x2 != nil
	case gpu.Q4_0:
		hasPair = k.q4x2 != nil
	}
	pair := func(g, m int) {
		w := &mm.pack[g*nb*pb]
		switch mm.t {
		case gpu.Q4_0:
			k.q4x2(w, nb*pb, nb, &mm.aq[m*K], K, &mm.am[m*nb], 8*nb, &o[0])
		default:
			k.q8x2(w, nb*pb, nb, &mm.aq[m*K], K, &mm.am[m*nb], 8*nb, &o[0])
		}
	}
	for g := r0 / q8Group; g*q8Group < r1; g++ {
		if hasPair && (g+1)*q8Group < r1 {
			// Groups g and g+1.
			cols := min(2*q8Group, r1-g*q8Group)
			for m := m0; m < m1; m += q8MaxRows {
				rows := min(q8MaxRows, m1-m)
				if rows == q8MaxRows {
					pair(g, m)
				} else {
					one(g, m, rows, &o[0])
					one(g+1, m, rows, &o[q8MaxRows*q8Group])
				}
				for i := 0; i < rows; i++ {
					d := mm.dst[(m+i)*N+g*q8Group:]
					copy(d[:q8Group], o[i*q8Group:])
					copy(d[q8Group:cols], o[(q8MaxRows+i)*q8Group:])
				}
			}
			g++
			continue
		}
		cols := min(q8Group, r1-g*q8Group)
		for m := m0; m < m1; m += q8MaxRows {
			rows := min(q8MaxRows, m1-m)
			one(g, m, rows, &o[0])
			for i := 0; i < rows; i++ {
				copy(mm.dst[(m+i)*N+g*q8Group:][:cols], o[i*q8Group:])
			}
		}
	}
}
