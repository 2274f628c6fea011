package main

import (
	"bytes"
	"fmt"
)

// pairKernel writes dotQ8PP6VNNI(w *byte, wstride int, nb int, x *int8,
// xstride int, meta *q8Meta, mstride int, out *float32) (q4:
// dotQ4PP6VNNI): dotQ8P6VNNI of the packed groups at w and w + wstride,
// against the same six activation rows; out[96·p + 16·i + j] is group p's.
//
// The one-group kernel loads a broadcast activation quad for every
// VPDPBUSD (its memory operand), 48 of 69 loads a block, so that on Zen 5
// the loads, not VPDPBUSD, set its pace (about 70% of the int8 peak with
// every operand in L1). Here one broadcast serves both groups: 96 VPDPBUSD
// to 78 loads (70 for Q4_0). Every (row, group) sum is the one-group
// kernel's: the same exact integer sum, then the same conversion, scale
// product and fused multiply-add per block, in block order, so the bits
// are those of two calls of dotQ8P6VNNI (or of any other family).
//
// Registers: Z8+6p+i row i's float accumulator of group p, Z20+6p+i its
// integer sum of the block; Z0, Z1 a quad of the two groups (Q4_0: Z0, Z3
// of group 0 and Z1, Z4 of group 1, Z2 the nibble mask); the rest hold
// broadcasts and products in turn.
func pairKernel(b *bytes.Buffer, q4 bool) {
	const rows = 6
	kind, block, scales := "Q8", 576, 512
	if q4 {
		kind, block, scales = "Q4", 320, 256
	}
	name := fmt.Sprintf("dot%sPP%dVNNI", kind, rows)
	fmt.Fprintf(b, "\n// func %s(w *byte, wstride int, nb int, x *int8, xstride int, meta *q8Meta, mstride int, out *float32)\n", name)
	fmt.Fprintf(b, "TEXT ·%s(SB), NOSPLIT, $0-64\n", name)
	b.WriteString("\tMOVQ w+0(FP), DI\n\tMOVQ wstride+8(FP), R8\n\tMOVQ nb+16(FP), CX\n\tMOVQ x+24(FP), SI\n\tMOVQ xstride+32(FP), BX\n\tMOVQ meta+40(FP), DX\n\tMOVQ mstride+48(FP), R9\n")
	b.WriteString("\tLEAQ (SI)(BX*4), R11\n\tLEAQ (BX)(BX*2), R12\n\tLEAQ (DX)(R9*4), R10\n\tLEAQ (R9)(R9*2), R13\n")
	acc := func(p, i int) int { return 8 + 6*p + i }
	sum := func(p, i int) int { return 20 + 6*p + i }
	for p := 0; p < 2; p++ {
		for i := 0; i < rows; i++ {
			fmt.Fprintf(b, "\tVPXORD Z%d, Z%d, Z%d\n", acc(p, i), acc(p, i), acc(p, i))
		}
	}
	// Registers free for broadcasts: Z2…Z7 (Q4_0: Z5…Z7).
	free := []int{2, 3, 4, 5, 6, 7}
	if q4 {
		free = []int{5, 6, 7}
		b.WriteString("\tMOVL $0x0f0f0f0f, AX\n\tVPBROADCASTD AX, Z2\n")
	}
	next := 0
	reg := func() int { r := free[next%len(free)]; next++; return r }
	fmt.Fprintf(b, "%s_loop:\n", name)
	for i := 0; i < rows; i++ {
		fmt.Fprintf(b, "\tVPBROADCASTD 4%s, Z%d\n\tVMOVDQA32 Z%d, Z%d\n", metaRow[i], sum(0, i), sum(0, i), sum(1, i))
	}
	for q := 0; q < 8; q++ {
		w0, w1 := 0, 1
		if q4 {
			if q%2 == 0 {
				// Quads 2j and 2j+1 of both groups: low nibbles to Z0,
				// Z1, high ones to Z3, Z4.
				for p, lo := range []int{0, 1} {
					hi := 3 + p
					off := fmt.Sprintf("%d(DI)", 64*(q/2))
					if p == 1 {
						off = fmt.Sprintf("%d(DI)(R8*1)", 64*(q/2))
					}
					fmt.Fprintf(b, "\tVMOVDQU32 %s, Z%d\n\tVPANDD Z2, Z%d, Z%d\n\tVPSRLD $4, Z%d, Z%d\n\tVPANDD Z2, Z%d, Z%d\n", off, hi, hi, lo, hi, hi, hi, hi)
				}
			} else {
				w0, w1 = 3, 4
			}
		} else {
			fmt.Fprintf(b, "\tVMOVDQU32 %d(DI), Z0\n\tVMOVDQU32 %d(DI)(R8*1), Z1\n", 64*q, 64*q)
		}
		for i := 0; i < rows; i++ {
			x := reg()
			fmt.Fprintf(b, "\tVPBROADCASTD %d%s, Z%d\n", 4*q, xRow[i], x)
			fmt.Fprintf(b, "\tVPDPBUSD Z%d, Z%d, Z%d\n\tVPDPBUSD Z%d, Z%d, Z%d\n", x, w0, sum(0, i), x, w1, sum(1, i))
		}
	}
	// The block's scales: the quads' registers are free.
	fmt.Fprintf(b, "\tVMOVUPS %d(DI), Z0\n\tVMOVUPS %d(DI)(R8*1), Z1\n", scales, scales)
	if q4 {
		free = []int{3, 4, 5, 6, 7}
	}
	for i := 0; i < rows; i++ {
		d := reg()
		fmt.Fprintf(b, "\tVBROADCASTSS %s, Z%d\n", metaRow[i], d)
		for p := 0; p < 2; p++ {
			t := reg()
			if t == d {
				t = reg()
			}
			fmt.Fprintf(b, "\tVCVTDQ2PS Z%d, Z%d\n", sum(p, i), sum(p, i))
			fmt.Fprintf(b, "\tVMULPS Z%d, Z%d, Z%d\n", d, p, t)
			fmt.Fprintf(b, "\tVFMADD231PS Z%d, Z%d, Z%d\n", sum(p, i), t, acc(p, i))
		}
	}
	fmt.Fprintf(b, "\tADDQ $%d, DI\n\tADDQ $32, SI\n\tADDQ $32, R11\n\tADDQ $8, DX\n\tADDQ $8, R10\n", block)
	fmt.Fprintf(b, "\tDECQ CX\n\tJNZ %s_loop\n", name)
	b.WriteString("\tMOVQ out+56(FP), AX\n")
	for p := 0; p < 2; p++ {
		for i := 0; i < rows; i++ {
			fmt.Fprintf(b, "\tVMOVUPS Z%d, %d(AX)\n", acc(p, i), 64*(rows*p+i))
		}
	}
	b.WriteString("\tVZEROUPPER\n\tRET\n")
}

// kPairKernel writes dotQ4KPP6VNNI(w *byte, wstride int, nb int, x
// *blockQ8K, xstride int, out *float32): dotQ4KP6VNNI of the packed
// groups at w and w + wstride against the same six activation rows,
// out[96·p + 16·i + j] group p's, with one broadcast of each activation
// quad (and of each pair of sums of 16) for both groups.
//
// Every (row, group) sum takes dotQ4KP6VNNI's steps: per sub-block the
// exact VPDPBUSD sum times the scale (VPMULLD) added to the super-block's
// sum, the mins by VPDPWSSD against the sums of 16, then per super-block
// the conversions, the two scale products and the fused multiply-adds in
// the same order; the float accumulators live in out between super-blocks
// (VFMADD213PS reads the accumulator from memory: the same rounding).
//
// Registers: Z8+6p+i row i's super-block sum of group p, Z20+6p+i its
// sub-block sum (then its mins' sum); Z0, Z1 a quad of the two groups
// (unpacked from memory: each register of nibbles is read twice), Z2, Z3
// their sub-block scales, Z4 the nibble mask, Z5…Z7 broadcasts.
func kPairKernel(b *bytes.Buffer) {
	const rows = 6
	name := "dotQ4KPP6VNNI"
	fmt.Fprintf(b, "\n// func %s(w *byte, wstride int, nb int, x *blockQ8K, xstride int, out *float32)\n", name)
	fmt.Fprintf(b, "TEXT ·%s(SB), NOSPLIT, $0-48\n", name)
	b.WriteString("\tMOVQ w+0(FP), DI\n\tMOVQ wstride+8(FP), R8\n\tMOVQ nb+16(FP), CX\n\tMOVQ x+24(FP), SI\n\tMOVQ xstride+32(FP), BX\n\tMOVQ out+40(FP), AX\n")
	b.WriteString("\tLEAQ (SI)(BX*4), R11\n\tLEAQ (BX)(BX*2), R12\n")
	sum := func(p, i int) int { return 8 + 6*p + i }
	sub := func(p, i int) int { return 20 + 6*p + i }
	out := func(p, i int) string { return fmt.Sprintf("%d(AX)", 64*(rows*p+i)) }
	b.WriteString("\tVPXORD Z0, Z0, Z0\n")
	for p := 0; p < 2; p++ {
		for i := 0; i < rows; i++ {
			fmt.Fprintf(b, "\tVMOVUPS Z0, %s\n", out(p, i))
		}
	}
	b.WriteString("\tMOVL $0x0f0f0f0f, DX\n\tVPBROADCASTD DX, Z4\n")
	bc := []int{5, 6, 7}
	next := 0
	reg := func() int { r := bc[next%len(bc)]; next++; return r }
	// w(off, p) addresses byte off of group p's super-block.
	w := func(off, p int) string {
		if p == 1 {
			return fmt.Sprintf("%d(DI)(R8*1)", off)
		}
		return fmt.Sprintf("%d(DI)", off)
	}
	fmt.Fprintf(b, "%s_loop:\n", name)
	for p := 0; p < 2; p++ {
		for i := 0; i < rows; i++ {
			fmt.Fprintf(b, "\tVPXORD Z%d, Z%d, Z%d\n", sum(p, i), sum(p, i), sum(p, i))
		}
	}
	for j := 0; j < 8; j++ {
		for p := 0; p < 2; p++ {
			fmt.Fprintf(b, "\tVPMOVZXBD %s, Z%d\n", w(q4kScales+16*j, p), 2+p)
			for i := 0; i < rows; i++ {
				fmt.Fprintf(b, "\tVPXORD Z%d, Z%d, Z%d\n", sub(p, i), sub(p, i), sub(p, i))
			}
		}
		for q := 0; q < 8; q++ {
			// Quad q of sub-block j: the low (even q) or high nibbles of
			// register q/2.
			for p := 0; p < 2; p++ {
				src := w(256*j+64*(q/2), p)
				if q%2 == 0 {
					fmt.Fprintf(b, "\tVPANDD %s, Z4, Z%d\n", src, p)
				} else {
					fmt.Fprintf(b, "\tVPSRLD $4, %s, Z%d\n\tVPANDD Z4, Z%d, Z%d\n", src, p, p, p)
				}
			}
			for i := 0; i < rows; i++ {
				x := reg()
				fmt.Fprintf(b, "\tVPBROADCASTD %d%s, Z%d\n", 32*j+4*q, kxRow[i], x)
				fmt.Fprintf(b, "\tVPDPBUSD Z%d, Z0, Z%d\n\tVPDPBUSD Z%d, Z1, Z%d\n", x, sub(0, i), x, sub(1, i))
			}
		}
		for p := 0; p < 2; p++ {
			for i := 0; i < rows; i++ {
				fmt.Fprintf(b, "\tVPMULLD Z%d, Z%d, Z%d\n\tVPADDD Z%d, Z%d, Z%d\n", 2+p, sub(p, i), sub(p, i), sub(p, i), sum(p, i), sum(p, i))
			}
		}
	}
	// Mins: sub-block k's (m, m) pairs against sums of 16 2k, 2k+1.
	for p := 0; p < 2; p++ {
		for i := 0; i < rows; i++ {
			fmt.Fprintf(b, "\tVPXORD Z%d, Z%d, Z%d\n", sub(p, i), sub(p, i), sub(p, i))
		}
	}
	for k := 0; k < 8; k++ {
		for p := 0; p < 2; p++ {
			fmt.Fprintf(b, "\tVPMOVZXBW %s, Z%d\n", w(q4kMins+32*k, p), p)
		}
		for i := 0; i < rows; i++ {
			x := reg()
			fmt.Fprintf(b, "\tVPBROADCASTD %d%s, Z%d\n", q8kSums+4*k, kxRow[i], x)
			fmt.Fprintf(b, "\tVPDPWSSD Z%d, Z0, Z%d\n\tVPDPWSSD Z%d, Z1, Z%d\n", x, sub(0, i), x, sub(1, i))
		}
	}
	// d (Z0, Z1) and dmin (Z2, Z3) of the two groups.
	fmt.Fprintf(b, "\tVMOVUPS %s, Z0\n\tVMOVUPS %s, Z1\n\tVMOVUPS %s, Z2\n\tVMOVUPS %s, Z3\n", w(q4kD, 0), w(q4kD, 1), w(q4kDmin, 0), w(q4kDmin, 1))
	for i := 0; i < rows; i++ {
		fmt.Fprintf(b, "\tVBROADCASTSS %d%s, Z5\n", q8kD, kxRow[i])
		for p := 0; p < 2; p++ {
			s, m := sum(p, i), sub(p, i)
			t := 6 + p
			fmt.Fprintf(b, "\tVCVTDQ2PS Z%d, Z%d\n\tVCVTDQ2PS Z%d, Z%d\n", s, s, m, m)
			fmt.Fprintf(b, "\tVMULPS Z5, Z%d, Z%d\n\tVFMADD213PS %s, Z%d, Z%d\n", p, t, out(p, i), t, s)
			fmt.Fprintf(b, "\tVMULPS Z5, Z%d, Z%d\n\tVFNMADD231PS Z%d, Z%d, Z%d\n", 2+p, t, m, t, s)
			fmt.Fprintf(b, "\tVMOVUPS Z%d, %s\n", s, out(p, i))
		}
	}
	fmt.Fprintf(b, "\tADDQ $%d, DI\n\tADDQ $%d, SI\n\tADDQ $%d, R11\n", q4kBlock, q8kBlock, q8kBlock)
	fmt.Fprintf(b, "\tDECQ CX\n\tJNZ %s_loop\n", name)
	b.WriteString("\tVZEROUPPER\n\tRET\n")
}
