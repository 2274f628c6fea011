package main

import (
	"bytes"
	"fmt"
)

// The AVX2 packed kernels: dotQ8P<rows>AVX2, dotQ4P<rows>AVX2,
// dotQ4KP<rows>AVX2 and dotQ6KP<rows>AVX2 take the VNNI kernels'
// arguments and packed layouts and give their bits. A 64-byte register
// image of 16 weight rows is read as two 256-bit halves of 8 rows; every
// integer sum is the VNNI kernel's (exact), and the float operations of a
// block are the same (VCVTDQ2PS, the weight scale times the activation
// scale, one fused multiply-add into the row's accumulator).
//
// Without VPDPBUSD the products go through VPMADDUBSW, which multiplies
// unsigned by signed bytes and adds adjacent pairs into int16, saturating;
// the activations are in [−127, 127] (the quantizers never give −128):
//
//   - Q8_0: |w| (VPABSB) times x with w's sign (VPSIGNB), the pack's
//     w + 128 flipped back first: a pair at most 2·128·127 = 32,512, widened
//     to int32 by VPMADDWD against ones at every quad.
//   - Q4_0 and Q4_K: nibbles (w + 8 and the Q4_K values) times x: a pair at
//     most 3,810, so the 8 quads of a block of 32 add in int16 (at most
//     30,480) before one VPMADDWD: by ones for Q4_0, by the sub-block's
//     scale as the pair (sc, sc) for Q4_K.
//   - Q6_K: 6-bit values (w + 32) times x: two quads add in int16 (at most
//     32,004), then VPMADDWD by (sc, sc).
//
// Registers: a kernel takes halves (1 or 2) of the group per pass over the
// weights, n = halves × rows ≤ 6 row sums at once: Y0… the rows' integer
// sums, Yn… their float accumulators (Q8_0, Q4_0) or their super-block
// sums (Q4_K, Q6_K, whose float accumulators are out itself), then the
// weights, a temporary, and the constants. Up to 3 rows take both halves in
// one pass (the weights are read once, which matters at one row, decode),
// more rows one half per pass.

// halves is the number of 8-row halves a kernel of rows rows takes per pass.
func halves(rows int) int {
	if 2*rows <= maxRows {
		return 2
	}
	return 1
}

// avx2Consts are the file's constant vectors: each a 64-bit pattern
// repeated 4 times. dup0 and dup1 (VPSHUFB) copy the first and the second
// word of every dword into both of its words.
var avx2Consts = []struct {
	name string
	lo   uint64 // the even 8 bytes
	hi   uint64 // the odd ones
}{
	{"c0f", 0x0f0f0f0f0f0f0f0f, 0x0f0f0f0f0f0f0f0f},
	{"c30", 0x3030303030303030, 0x3030303030303030},
	{"ones16", 0x0001000100010001, 0x0001000100010001},
	{"c16", 0x0010001000100010, 0x0010001000100010},
	{"dup0", 0x0504050401000100, 0x0d0c0d0c09080908},
	{"dup1", 0x0706070603020302, 0x0f0e0f0e0b0a0b0a},
}

func avx2File(b *bytes.Buffer) {
	for _, c := range avx2Consts {
		b.WriteString("\n")
		for k := 0; k < 4; k++ {
			fmt.Fprintf(b, "DATA %s<>+%d(SB)/8, $%#016x\n", c.name, 8*k, []uint64{c.lo, c.hi}[k%2])
		}
		fmt.Fprintf(b, "GLOBL %s<>(SB), RODATA|NOPTR, $32\n", c.name)
	}
	for _, q4 := range []bool{false, true} {
		for r := 1; r <= maxRows; r++ {
			avx2Kernel(b, r, q4)
		}
	}
	for _, q6 := range []bool{false, true} {
		for r := 1; r <= maxRows; r++ {
			avx2KKernel(b, r, q6)
		}
	}
}

// op writes one instruction.
func op(b *bytes.Buffer, format string, args ...any) {
	fmt.Fprintf(b, "\t"+format+"\n", args...)
}

// y names register Yi.
func y(i int) string { return fmt.Sprintf("Y%d", i) }

// avx2Regs are a kernel's registers: sum(h, i) and acc(h, i) of pass half
// h and row i, then w, t (the temporary) and the two constant registers.
type avx2Regs struct{ rows, n int }

func (r avx2Regs) sum(h, i int) string { return y(h*r.rows + i) }
func (r avx2Regs) acc(h, i int) string { return y(r.n + h*r.rows + i) }
func (r avx2Regs) w() string           { return y(2 * r.n) }
func (r avx2Regs) t() string           { return y(2*r.n + 1) }
func (r avx2Regs) c0() string          { return y(2*r.n + 2) }
func (r avx2Regs) c1() string          { return y(2*r.n + 3) }

// at addresses the weights' field at off of half h, the halves' fields
// unit bytes (8, 16 or 32) apart: fixed where a pass takes both halves,
// else R8 (0, then 8) selects the pass's half.
func (r avx2Regs) at(off, h, unit int) string {
	if r.n == r.rows {
		return fmt.Sprintf("%d(DI)(R8*%d)", off, unit/8)
	}
	return fmt.Sprintf("%d(DI)", off+unit*h)
}

// avx2Kernel writes dotQ8P<rows>AVX2 (dotQ4P<rows>AVX2 with q4): the
// arguments and layout of kernel's VNNI kernels. The float accumulators
// are out, cleared first.
//
// Q8_0's weights w + 128 are split into nibbles, 16·hi + lo, each
// multiplied like Q4_0's: two VPMADDUBSW a quad and row instead of the
// three multiplier-port instructions of |w| × (x with w's sign), with
// VPMADDWD once a block. Registers: sum(h, i) the lo sums, acc(h, i) the
// hi ones, w and c0 the quad's lo and hi nibbles, c1 a product.
// Q4_0's: sum(h, i), w the quad, c0 the int16 ones, c1 the 0x0f mask.
func avx2Kernel(b *bytes.Buffer, rows int, q4 bool) {
	kind, block, scales := "Q8", 576, 512
	if q4 {
		kind, block, scales = "Q4", 320, 256
	}
	name, r := avx2Head(b, kind, rows, "x *int8, xstride int, meta *q8Meta, mstride int", 56)
	hw := halves(rows)
	if q4 {
		op(b, "VPCMPEQW %s, %s, %s", r.c0(), r.c0(), r.c0())
		op(b, "VPSRLW $15, %s, %s", r.c0(), r.c0())
		op(b, "VMOVDQU c0f<>(SB), %s", r.c1())
	}
	passes(b, name, hw, q8Args, func() {
		for h := 0; h < hw; h++ {
			if q4 {
				for k := 0; k < 4; k++ {
					nibbleQuads(b, r, h, r.at(64*k, h, 32), 8*k, k == 0)
				}
				for i := 0; i < rows; i++ {
					op(b, "VPMADDWD %s, %s, %s", r.c0(), r.sum(h, i), r.sum(h, i))
				}
			} else {
				q8AVX2Block(b, r, h)
			}
			for i := 0; i < rows; i++ {
				s := r.sum(h, i)
				op(b, "VPBROADCASTD 4%s, %s", metaRow[i], r.t())
				op(b, "VPADDD %s, %s, %s", r.t(), s, s)
				op(b, "VMOVUPS %s, %s", out(i, h), r.acc(h, i))
				scaleInto(b, r, metaRow[i], s, r.acc(h, i), r.at(scales, h, 32), false)
				op(b, "VMOVUPS %s, %s", r.acc(h, i), out(i, h))
			}
		}
		op(b, "ADDQ $%d, DI", block)
		op(b, "ADDQ $32, SI")
		op(b, "ADDQ $32, R11")
		op(b, "ADDQ $8, DX")
		op(b, "ADDQ $8, R10")
	})
}

// passes writes the loop over the blocks, body (one block, halves 0 to
// hw−1 at DI (avx2Regs.at) and AX, then the pointers stepped), after args
// (the pointers loaded), once for hw = 2 and twice for hw = 1: the second
// time with R8 = 8 and AX 32 bytes on, the other half.
func passes(b *bytes.Buffer, name string, hw int, args func(*bytes.Buffer), body func()) {
	if hw == 1 {
		op(b, "XORQ R8, R8")
		fmt.Fprintf(b, "%s_pass:\n", name)
	}
	args(b)
	fmt.Fprintf(b, "%s_loop:\n", name)
	body()
	op(b, "DECQ CX")
	op(b, "JNZ %s_loop", name)
	if hw == 1 {
		op(b, "ADDQ $32, AX")
		op(b, "ADDQ $8, R8")
		op(b, "CMPQ R8, $16")
		op(b, "JLT %s_pass", name)
	}
	b.WriteString("\tVZEROUPPER\n\tRET\n")
}

// q8AVX2Block leaves in sum(h, i) the integer sum Σ (w + 128)·x of a Q8_0
// block of half h.
func q8AVX2Block(b *bytes.Buffer, r avx2Regs, h int) {
	lo, hi, p := r.w(), r.c0(), r.c1()
	for q := 0; q < 8; q++ {
		op(b, "VMOVDQU %s, %s", r.at(64*q, h, 32), lo)
		op(b, "VPSRLW $4, %s, %s", lo, hi)
		op(b, "VPAND c0f<>(SB), %s, %s", lo, lo)
		op(b, "VPAND c0f<>(SB), %s, %s", hi, hi)
		for i := 0; i < r.rows; i++ {
			op(b, "VPBROADCASTD %d%s, %s", 4*q, xRow[i], r.t())
			if q == 0 {
				op(b, "VPMADDUBSW %s, %s, %s", r.t(), hi, r.acc(h, i))
				op(b, "VPMADDUBSW %s, %s, %s", r.t(), lo, r.sum(h, i))
				continue
			}
			op(b, "VPMADDUBSW %s, %s, %s", r.t(), hi, p)
			op(b, "VPADDW %s, %s, %s", p, r.acc(h, i), r.acc(h, i))
			op(b, "VPMADDUBSW %s, %s, %s", r.t(), lo, r.t())
			op(b, "VPADDW %s, %s, %s", r.t(), r.sum(h, i), r.sum(h, i))
		}
	}
	for i := 0; i < r.rows; i++ {
		op(b, "VPMADDWD c16<>(SB), %s, %s", r.acc(h, i), r.acc(h, i))
		op(b, "VPMADDWD ones16<>(SB), %s, %s", r.sum(h, i), r.sum(h, i))
		op(b, "VPADDD %s, %s, %s", r.acc(h, i), r.sum(h, i), r.sum(h, i))
	}
}

// avx2Head starts the kernel dot<kind>P<rows>AVX2(w *byte, nb int,
// <args>, out *float32), args bytes of them: out in AX, the rows' 16
// accumulators there cleared.
func avx2Head(b *bytes.Buffer, kind string, rows int, args string, argBytes int) (string, avx2Regs) {
	name := fmt.Sprintf("dot%sP%dAVX2", kind, rows)
	r := avx2Regs{rows, halves(rows) * rows}
	fmt.Fprintf(b, "\n// func %s(w *byte, nb int, %s, out *float32)\n", name, args)
	fmt.Fprintf(b, "TEXT ·%s(SB), NOSPLIT, $0-%d\n", name, argBytes)
	op(b, "MOVQ out+%d(FP), AX", argBytes-8)
	op(b, "VXORPS %s, %s, %s", r.t(), r.t(), r.t())
	for k := 0; k < 2*r.rows; k++ {
		op(b, "VMOVUPS %s, %d(AX)", r.t(), 32*k)
	}
	return name, r
}

// avx2KKernel writes dotQ4KP<rows>AVX2 (dotQ6KP<rows>AVX2 with q6): the
// arguments and layouts of kKernel's VNNI kernels. The float accumulators
// are out, cleared first; each super-block's sums are scaled into them.
// Registers: sum(h, i) a sub-block's int16 sums (later the mins' or the
// offset's), acc(h, i) the super-block's int32 sum, w an unpacked quad, c0
// the sub-block's scales as (sc, sc) pairs, c1 the 0x0f mask.
func avx2KKernel(b *bytes.Buffer, rows int, q6 bool) {
	kind, block := "Q4K", q4kBlock
	if q6 {
		kind, block = "Q6K", q6kBlock
	}
	name, r := avx2Head(b, kind, rows, "x *blockQ8K, xstride int", 40)
	hw := halves(rows)
	op(b, "VMOVDQU c0f<>(SB), %s", r.c1())
	passes(b, name, hw, kArgs, func() {
		if q6 {
			q6AVX2Body(b, r, hw)
		} else {
			q4kAVX2Body(b, r, hw)
		}
		op(b, "ADDQ $%d, DI", block)
		op(b, "ADDQ $%d, SI", q8kBlock)
		op(b, "ADDQ $%d, R11", q8kBlock)
	})
}

// nibbleQuads multiplies the nibbles of the register image at w (the low
// ones quad q, the high ones quad q+1) by the activations at xoff, xoff+4
// and adds them to the rows' int16 sums of half h.
func nibbleQuads(b *bytes.Buffer, r avx2Regs, h int, w string, xoff int, first bool) {
	op(b, "VPAND %s, %s, %s", w, r.c1(), r.w())
	quadRows(b, r, h, xoff, first)
	op(b, "VMOVDQU %s, %s", w, r.w())
	op(b, "VPSRLW $4, %s, %s", r.w(), r.w())
	op(b, "VPAND %s, %s, %s", r.c1(), r.w(), r.w())
	quadRows(b, r, h, xoff+4, false)
}

// quadRows multiplies the quad in w by every row's activations at xoff and
// adds the products to the rows' int16 sums of half h.
func quadRows(b *bytes.Buffer, r avx2Regs, h, xoff int, first bool) {
	for i := 0; i < r.rows; i++ {
		op(b, "VPBROADCASTD %d%s, %s", xoff, kxRow[i], r.t())
		if first {
			op(b, "VPMADDUBSW %s, %s, %s", r.t(), r.w(), r.sum(h, i))
			continue
		}
		op(b, "VPMADDUBSW %s, %s, %s", r.t(), r.w(), r.t())
		op(b, "VPADDW %s, %s, %s", r.t(), r.sum(h, i), r.sum(h, i))
	}
}

// scaleSums adds the rows' int16 sums of half h times the (sc, sc) pairs
// in c0 to their super-block sums.
func scaleSums(b *bytes.Buffer, r avx2Regs, h int, first bool) {
	for i := 0; i < r.rows; i++ {
		if first {
			op(b, "VPMADDWD %s, %s, %s", r.c0(), r.sum(h, i), r.acc(h, i))
			continue
		}
		op(b, "VPMADDWD %s, %s, %s", r.c0(), r.sum(h, i), r.sum(h, i))
		op(b, "VPADDD %s, %s, %s", r.sum(h, i), r.acc(h, i), r.acc(h, i))
	}
}

// pairDots sets dst(h, i) to Σ_k (the 8 word pairs at off+32·k of the
// h, 16 bytes a h, loaded by load) · (row i's bsums pair k): Q4_K's
// mins, Q6_K's offset.
func pairDots(b *bytes.Buffer, r avx2Regs, h int, load string, off int, dst func(h, i int) string) {
	for k := 0; k < 8; k++ {
		op(b, "%s %s, %s", load, r.at(off+32*k, h, 16), r.w())
		for i := 0; i < r.rows; i++ {
			op(b, "VPBROADCASTD %d%s, %s", q8kSums+4*k, kxRow[i], r.t())
			if k == 0 {
				op(b, "VPMADDWD %s, %s, %s", r.w(), r.t(), dst(h, i))
				continue
			}
			op(b, "VPMADDWD %s, %s, %s", r.w(), r.t(), r.t())
			op(b, "VPADDD %s, %s, %s", r.t(), dst(h, i), dst(h, i))
		}
	}
}

// scaleInto converts the integer sum s to float and adds it times the
// weight rows' scales at wd times the activations' scale at xd to the
// accumulator a: subtracts it with neg.
func scaleInto(b *bytes.Buffer, r avx2Regs, xd, s, a, wd string, neg bool) {
	inst := "VFMADD231PS"
	if neg {
		inst = "VFNMADD231PS"
	}
	op(b, "VCVTDQ2PS %s, %s", s, s)
	op(b, "VBROADCASTSS %s, %s", xd, r.t())
	op(b, "VMULPS %s, %s, %s", wd, r.t(), r.t())
	op(b, "%s %s, %s, %s", inst, s, r.t(), a)
}

// kxD addresses row i's Q8_K scale.
func kxD(i int) string { return fmt.Sprintf("%d%s", q8kD, kxRow[i]) }

// out addresses row i's accumulators of half h.
func out(i, h int) string { return fmt.Sprintf("%d(AX)", 64*i+32*h) }

func q4kAVX2Body(b *bytes.Buffer, r avx2Regs, hw int) {
	for s := 0; s < 8; s++ {
		for h := 0; h < hw; h++ {
			op(b, "VPMOVZXBD %s, %s", r.at(q4kScales+16*s, h, 8), r.c0())
			op(b, "VPSLLD $16, %s, %s", r.c0(), r.t())
			op(b, "VPOR %s, %s, %s", r.t(), r.c0(), r.c0())
			for k := 0; k < 4; k++ {
				nibbleQuads(b, r, h, r.at(256*s+64*k, h, 32), 32*s+8*k, k == 0)
			}
			scaleSums(b, r, h, s == 0)
		}
	}
	// The sums times d, into out held in sum(h, i); then the mins times
	// dmin taken from them.
	for h := 0; h < hw; h++ {
		for i := 0; i < r.rows; i++ {
			op(b, "VMOVUPS %s, %s", out(i, h), r.sum(h, i))
			scaleInto(b, r, kxD(i), r.acc(h, i), r.sum(h, i), r.at(q4kD, h, 32), false)
		}
		pairDots(b, r, h, "VPMOVZXBW", q4kMins, r.acc)
		for i := 0; i < r.rows; i++ {
			scaleInto(b, r, kxD(i), r.acc(h, i), r.sum(h, i), r.at(q4kDmin, h, 32), true)
			op(b, "VMOVUPS %s, %s", r.sum(h, i), out(i, h))
		}
	}
}

// q6AVX2Body unpacks quad q of a sub-block as q6Body does: (low nibbles) |
// (high bits at 4–5).
func q6AVX2Body(b *bytes.Buffer, r avx2Regs, hw int) {
	// high bits shift of quads 0…3: left 4, left 2, none, right 2.
	shifts := []string{"VPSLLD $4", "VPSLLD $2", "", "VPSRLD $2"}
	for k := 0; k < 8; k++ {
		for hs := 0; hs < 2; hs++ {
			j := 2*k + hs
			for h := 0; h < hw; h++ {
				op(b, "VPMOVSXBW %s, %s", r.at(q6kScales+32*k, h, 16), r.c0())
				op(b, "VPSHUFB dup%d<>(SB), %s, %s", hs, r.c0(), r.c0())
				for q := 0; q < 4; q++ {
					lo := r.at(192*j+64*(q/2), h, 32)
					if q%2 == 0 {
						op(b, "VPAND %s, %s, %s", lo, r.c1(), r.w())
					} else {
						op(b, "VMOVDQU %s, %s", lo, r.w())
						op(b, "VPSRLW $4, %s, %s", r.w(), r.w())
						op(b, "VPAND %s, %s, %s", r.c1(), r.w(), r.w())
					}
					op(b, "VMOVDQU %s, %s", r.at(192*j+128, h, 32), r.t())
					if shifts[q] != "" {
						op(b, "%s, %s, %s", shifts[q], r.t(), r.t())
					}
					op(b, "VPAND c30<>(SB), %s, %s", r.t(), r.t())
					op(b, "VPOR %s, %s, %s", r.t(), r.w(), r.w())
					quadRows(b, r, h, 16*j+4*q, q%2 == 0)
					if q%2 == 1 {
						scaleSums(b, r, h, j == 0 && q == 1)
					}
				}
			}
		}
	}
	// The offset: S − 32 · Σ_j sc_j · bsum_j.
	for h := 0; h < hw; h++ {
		pairDots(b, r, h, "VPMOVSXBW", q6kScales, r.sum)
		for i := 0; i < r.rows; i++ {
			s, o := r.acc(h, i), r.sum(h, i)
			op(b, "VPSLLD $5, %s, %s", o, o)
			op(b, "VPSUBD %s, %s, %s", o, s, s)
			op(b, "VMOVUPS %s, %s", out(i, h), o)
			scaleInto(b, r, kxD(i), s, o, r.at(q6kD, h, 32), false)
			op(b, "VMOVUPS %s, %s", o, out(i, h))
		}
	}
}
