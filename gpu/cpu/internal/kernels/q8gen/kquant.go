package main

import (
	"bytes"
	"fmt"
)

// Packed K-quant kernels (kernels.PackQ4_K, PackQ6_K): dotQ4KP<rows>VNNI
// and dotQ6KP<rows>VNNI(w *byte, nb int, x *blockQ8K, xstride int, out
// *float32) multiply the packed group of 16 weight rows at w (nb
// super-blocks) by activation rows i < rows of Q8_K super-blocks at x +
// i·xstride, and store out[16·i + j].
//
// A super-block's sum is exact integer arithmetic: each sub-block's
// VPDPBUSD sums (unsigned weights × signed activations) are multiplied by
// the sub-block's integer scale (VPMULLD) and added; Q4_K's mins and Q6_K's
// offset of 32 are taken with VPDPWSSD against the activations' sums of 16
// (Q8_K's bsums). One float multiply-add per super-block (two for Q4_K)
// scales it, so a row's result does not depend on the rows beside it.

// Q4_K packed super-block of a group (2,560 bytes): 8 sub-blocks of 32
// values, each 4 registers of 16 rows × 8 nibbles (low nibbles quad 2k,
// high quad 2k+1, as packed Q4_0); the 8 × 16 scales as bytes; the 8 × 16
// mins as byte pairs (m, m); the rows' d and dmin as float32.
const (
	q4kScales = 2048
	q4kMins   = 2176
	q4kD      = 2432
	q4kDmin   = 2496
	q4kBlock  = 2560
)

// Q6_K packed super-block of a group (3,392 bytes): 16 sub-blocks of 16
// values, each 3 registers: the low nibbles of quads 0 and 1, of quads 2
// and 3, and the four quads' high 2 bits (bits 0–1 quad 0 … bits 6–7 quad
// 3); the 16 × 16 scales as signed byte pairs (sub-blocks 2k, 2k+1); the
// rows' d as float32.
const (
	q6kScales = 3072
	q6kD      = 3328
	q6kBlock  = 3392
)

// Offsets of a Q8_K activation super-block: values, sums of 16, scale.
const (
	q8kSums  = 256
	q8kD     = 288
	q8kBlock = 320
)

// kxRow addresses activation row i (SI, BX the row stride, R11 = SI+4·BX,
// R12 = 3·BX).
var kxRow = []string{"(SI)", "(SI)(BX*1)", "(SI)(BX*2)", "(SI)(R12*1)", "(R11)", "(R11)(BX*1)"}

// kArgs loads the arguments of a packed K-quant kernel and the row
// addresses of kxRow.
func kArgs(b *bytes.Buffer) {
	b.WriteString("\tMOVQ w+0(FP), DI\n\tMOVQ nb+8(FP), CX\n\tMOVQ x+16(FP), SI\n\tMOVQ xstride+24(FP), BX\n")
	b.WriteString("\tLEAQ (SI)(BX*4), R11\n\tLEAQ (BX)(BX*2), R12\n")
}

// Registers: Z10+i the integer sum of row i's super-block, Z16+i a
// sub-block's (and the correction's), Z22+i row i's float accumulator.
func kKernel(b *bytes.Buffer, rows int, q6 bool) {
	kind, block := "Q4K", q4kBlock
	if q6 {
		kind, block = "Q6K", q6kBlock
	}
	name := fmt.Sprintf("dot%sP%dVNNI", kind, rows)
	fmt.Fprintf(b, "\n// func %s(w *byte, nb int, x *blockQ8K, xstride int, out *float32)\n", name)
	fmt.Fprintf(b, "TEXT ·%s(SB), NOSPLIT, $0-40\n", name)
	kArgs(b)
	for i := 0; i < rows; i++ {
		fmt.Fprintf(b, "\tVPXORD Z%d, Z%d, Z%d\n", 22+i, 22+i, 22+i)
	}
	b.WriteString("\tMOVL $0x0f0f0f0f, AX\n\tVPBROADCASTD AX, Z9\n")
	if q6 {
		b.WriteString("\tMOVL $0x30303030, AX\n\tVPBROADCASTD AX, Z8\n")
	}
	fmt.Fprintf(b, "%s_loop:\n", name)
	for i := 0; i < rows; i++ {
		fmt.Fprintf(b, "\tVPXORD Z%d, Z%d, Z%d\n", 10+i, 10+i, 10+i)
	}
	if q6 {
		q6Body(b, rows)
	} else {
		q4kBody(b, rows)
	}
	fmt.Fprintf(b, "\tADDQ $%d, DI\n\tADDQ $%d, SI\n\tADDQ $%d, R11\n", block, q8kBlock, q8kBlock)
	fmt.Fprintf(b, "\tDECQ CX\n\tJNZ %s_loop\n", name)
	b.WriteString("\tMOVQ out+32(FP), AX\n")
	for i := 0; i < rows; i++ {
		fmt.Fprintf(b, "\tVMOVUPS Z%d, %d(AX)\n", 22+i, 64*i)
	}
	b.WriteString("\tVZEROUPPER\n\tRET\n")
}

// subBlock adds, for every row, the sub-block's dot products of the quads
// in Z0… (quads of them, the activations at byte off of the super-block)
// times the per-lane scales in scale to the row's integer sum. With one or
// two rows, two chains a row (Z28+i the second) so that they overlap; the
// integer sums add exactly.
func subBlock(b *bytes.Buffer, rows, quads, off int, scale string) {
	for i := 0; i < rows; i++ {
		t := 16 + i
		fmt.Fprintf(b, "\tVPXORD Z%d, Z%d, Z%d\n", t, t, t)
		if rows > 2 {
			for q := 0; q < quads; q++ {
				fmt.Fprintf(b, "\tVPDPBUSD.BCST %d%s, Z%d, Z%d\n", off+4*q, kxRow[i], q, t)
			}
		} else {
			t2 := 28 + i
			fmt.Fprintf(b, "\tVPXORD Z%d, Z%d, Z%d\n", t2, t2, t2)
			for q := 0; q < quads; q++ {
				fmt.Fprintf(b, "\tVPDPBUSD.BCST %d%s, Z%d, Z%d\n", off+4*q, kxRow[i], q, []int{t, t2}[q%2])
			}
			fmt.Fprintf(b, "\tVPADDD Z%d, Z%d, Z%d\n", t2, t, t)
		}
		fmt.Fprintf(b, "\tVPMULLD %s, Z%d, Z%d\n", scale, t, t)
		fmt.Fprintf(b, "\tVPADDD Z%d, Z%d, Z%d\n", t, 10+i, 10+i)
	}
}

// sumsDot sets Z16+i to Σ_k Zk · (row i's bsums pair k) for k < pairs, by
// VPDPWSSD (words × words, pairs added, exact).
func sumsDot(b *bytes.Buffer, rows, pairs int) {
	for i := 0; i < rows; i++ {
		t := 16 + i
		fmt.Fprintf(b, "\tVPXORD Z%d, Z%d, Z%d\n", t, t, t)
		for k := 0; k < pairs; k++ {
			fmt.Fprintf(b, "\tVPDPWSSD.BCST %d%s, Z%d, Z%d\n", q8kSums+4*k, kxRow[i], k, t)
		}
	}
}

func q4kBody(b *bytes.Buffer, rows int) {
	for j := 0; j < 8; j++ {
		for k := 0; k < 4; k++ {
			fmt.Fprintf(b, "\tVMOVDQU32 %d(DI), Z%d\n", 256*j+64*k, 2*k+1)
			fmt.Fprintf(b, "\tVPANDD Z9, Z%d, Z%d\n", 2*k+1, 2*k)
			fmt.Fprintf(b, "\tVPSRLD $4, Z%d, Z%d\n", 2*k+1, 2*k+1)
			fmt.Fprintf(b, "\tVPANDD Z9, Z%d, Z%d\n", 2*k+1, 2*k+1)
		}
		fmt.Fprintf(b, "\tVPMOVZXBD %d(DI), Z8\n", q4kScales+16*j)
		subBlock(b, rows, 8, 32*j, "Z8")
	}
	// Mins: sub-block j's (m, m) pairs against bsums 2j, 2j+1.
	for j := 0; j < 8; j++ {
		fmt.Fprintf(b, "\tVPMOVZXBW %d(DI), Z%d\n", q4kMins+32*j, j)
	}
	sumsDot(b, rows, 8)
	fmt.Fprintf(b, "\tVMOVUPS %d(DI), Z8\n\tVMOVUPS %d(DI), Z29\n", q4kD, q4kDmin)
	for i := 0; i < rows; i++ {
		s, m, acc := 10+i, 16+i, 22+i
		fmt.Fprintf(b, "\tVCVTDQ2PS Z%d, Z%d\n\tVCVTDQ2PS Z%d, Z%d\n", s, s, m, m)
		fmt.Fprintf(b, "\tVMULPS.BCST %d%s, Z8, Z28\n\tVFMADD231PS Z%d, Z28, Z%d\n", q8kD, kxRow[i], s, acc)
		fmt.Fprintf(b, "\tVMULPS.BCST %d%s, Z29, Z28\n\tVFNMADD231PS Z%d, Z28, Z%d\n", q8kD, kxRow[i], m, acc)
	}
}

// q6Body: quad q of a sub-block is (low nibbles) | (high bits at 4–5):
// Z0 = L0&15 | H<<4&0x30, Z1 = L0>>4&15 | H<<2&0x30, Z2 = L1&15 |
// H&0x30, Z3 = L1>>4&15 | H>>2&0x30 (VPTERNLOGD 0xF8: A | B&C).
func q6Body(b *bytes.Buffer, rows int) {
	for k := 0; k < 8; k++ {
		fmt.Fprintf(b, "\tVPMOVSXBW %d(DI), Z7\n", q6kScales+32*k)
		for h := 0; h < 2; h++ {
			j := 2*k + h
			if h == 0 {
				b.WriteString("\tVPSLLD $16, Z7, Z6\n\tVPSRAD $16, Z6, Z6\n")
			} else {
				b.WriteString("\tVPSRAD $16, Z7, Z6\n")
			}
			fmt.Fprintf(b, "\tVMOVDQU32 %d(DI), Z28\n\tVMOVDQU32 %d(DI), Z29\n\tVMOVDQU32 %d(DI), Z30\n", 192*j, 192*j+64, 192*j+128)
			b.WriteString("\tVPANDD Z9, Z28, Z0\n\tVPSLLD $4, Z30, Z31\n\tVPTERNLOGD $0xF8, Z8, Z31, Z0\n")
			b.WriteString("\tVPSRLD $4, Z28, Z1\n\tVPANDD Z9, Z1, Z1\n\tVPSLLD $2, Z30, Z31\n\tVPTERNLOGD $0xF8, Z8, Z31, Z1\n")
			b.WriteString("\tVPANDD Z9, Z29, Z2\n\tVPTERNLOGD $0xF8, Z8, Z30, Z2\n")
			b.WriteString("\tVPSRLD $4, Z29, Z3\n\tVPANDD Z9, Z3, Z3\n\tVPSRLD $2, Z30, Z31\n\tVPTERNLOGD $0xF8, Z8, Z31, Z3\n")
			subBlock(b, rows, 4, 16*j, "Z6")
		}
	}
	// The offset: S − 32 · Σ_j sc_j · bsum_j.
	for k := 0; k < 8; k++ {
		fmt.Fprintf(b, "\tVPMOVSXBW %d(DI), Z%d\n", q6kScales+32*k, k)
	}
	sumsDot(b, rows, 8)
	fmt.Fprintf(b, "\tVMOVUPS %d(DI), Z28\n", q6kD)
	for i := 0; i < rows; i++ {
		s, o, acc := 10+i, 16+i, 22+i
		fmt.Fprintf(b, "\tVPSLLD $5, Z%d, Z%d\n\tVPSUBD Z%d, Z%d, Z%d\n", o, o, o, s, s)
		fmt.Fprintf(b, "\tVCVTDQ2PS Z%d, Z%d\n", s, s)
		fmt.Fprintf(b, "\tVMULPS.BCST %d%s, Z28, Z29\n\tVFMADD231PS Z%d, Z29, Z%d\n", q8kD, kxRow[i], s, acc)
	}
}
