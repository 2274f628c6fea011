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
