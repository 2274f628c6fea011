package main

import (
	"bytes"
	"fmt"
)

// Q8_0 KV caches: K and V values are int8 with a float16 scale per 32 of
// a head's components (llama.cpp's Q8_0 blocks), each value dequantized
// on load to float32 (VPMOVSXBD, VCVTDQ2PS, VMULPS by its scale: the
// product of an int8 and a float16 is exact in float32), then used as an
// F32 cache's value, one multiply-add chain per output.

// qkQ8 writes attnQKQ8_<nh>x<nb>(…, scale float32, soff int): attnQK for
// a Q8_0 cache, whose K region holds hd rows of 16 int8 keys and, at soff
// bytes from it, hd/32 rows of 16 float16 scales (one per key and 32
// components).
func qkQ8(b *bytes.Buffer, nh, nb int) {
	name := fmt.Sprintf("attnQKQ8_%dx%d", nh, nb)
	fmt.Fprintf(b, "\n// func %s(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32, soff int)\n", name)
	fmt.Fprintf(b, "TEXT ·%s(SB), NOSPLIT, $0-80\n", name)
	b.WriteString("\tMOVQ q+0(FP), SI\n\tMOVQ qstride+8(FP), BX\n\tLEAQ (BX)(BX*2), R12\n\tMOVQ tab+24(FP), DI\n\tMOVQ blockBytes+32(FP), AX\n\tMOVQ hd+40(FP), CX\n\tSHRQ $5, CX\n\tMOVQ soff+72(FP), R13\n")
	ptr := []string{"R8", "R9", "R10", "R11"}
	for j := 0; j < nb; j++ {
		fmt.Fprintf(b, "\tMOVLQSX %d(DI), %s\n\tIMULQ AX, %s\n\tADDQ k+16(FP), %s\n", 4*j, ptr[j], ptr[j], ptr[j])
	}
	for i := 0; i < nh*nb; i++ {
		fmt.Fprintf(b, "\tVPXORD Z%d, Z%d, Z%d\n", i, i, i)
	}
	b.WriteString("\tXORQ DX, DX\n\tXORQ R14, R14\n")
	fmt.Fprintf(b, "%s_chunk:\n", name)
	for j := 0; j < nb; j++ {
		fmt.Fprintf(b, "\tLEAQ (%s)(R13*1), AX\n\tVCVTPH2PS (AX)(R14*1), Z%d\n", ptr[j], 26+j)
	}
	b.WriteString("\tMOVQ $32, DI\n")
	fmt.Fprintf(b, "%s_loop:\n", name)
	for j := 0; j < nb; j++ {
		z := 16 + j
		fmt.Fprintf(b, "\tVPMOVSXBD (%s)(DX*1), Z%d\n\tVCVTDQ2PS Z%d, Z%d\n\tVMULPS Z%d, Z%d, Z%d\n", ptr[j], z, z, z, 26+j, z, z)
	}
	for h := 0; h < nh; h++ {
		fmt.Fprintf(b, "\tVBROADCASTSS %s, Z%d\n", heads[h], 20+h)
	}
	for h := 0; h < nh; h++ {
		for j := 0; j < nb; j++ {
			fmt.Fprintf(b, "\tVFMADD231PS Z%d, Z%d, Z%d\n", 16+j, 20+h, h*nb+j)
		}
	}
	fmt.Fprintf(b, "\tADDQ $4, SI\n\tADDQ $16, DX\n\tDECQ DI\n\tJNZ %s_loop\n", name)
	fmt.Fprintf(b, "\tADDQ $32, R14\n\tDECQ CX\n\tJNZ %s_chunk\n", name)
	b.WriteString("\tMOVQ out+48(FP), SI\n\tMOVQ ostride+56(FP), BX\n\tVBROADCASTSS scale+64(FP), Z24\n")
	for h := 0; h < nh; h++ {
		for j := 0; j < nb; j++ {
			z := h*nb + j
			fmt.Fprintf(b, "\tVMULPS Z24, Z%d, Z%d\n\tVMOVUPS Z%d, %d(SI)\n", z, z, z, 64*j)
		}
		if h < nh-1 {
			b.WriteString("\tADDQ BX, SI\n")
		}
	}
	b.WriteString("\tVZEROUPPER\n\tRET\n")
}

// pvQ8 writes attnPVQ8_<nh>(…, soff, sstride int): attnPV for a Q8_0
// cache, 64 columns (two scales) of V rows of int8 at v + t·vstride, row
// t's two float16 scales at v + soff + t·sstride.
func pvQ8(b *bytes.Buffer, nh int) {
	name := fmt.Sprintf("attnPVQ8_%d", nh)
	fmt.Fprintf(b, "\n// func %s(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int, soff, sstride int)\n", name)
	fmt.Fprintf(b, "TEXT ·%s(SB), NOSPLIT, $0-72\n", name)
	b.WriteString("\tMOVQ p+0(FP), SI\n\tMOVQ pstride+8(FP), BX\n\tLEAQ (BX)(BX*2), R12\n\tMOVQ v+16(FP), DI\n\tMOVQ vstride+24(FP), AX\n\tMOVQ cnt+32(FP), CX\n\tMOVQ out+40(FP), R8\n\tMOVQ ostride+48(FP), R9\n")
	b.WriteString("\tMOVQ soff+56(FP), R13\n\tADDQ DI, R13\n\tMOVQ sstride+64(FP), R14\n\tMOVQ R8, R10\n")
	for h := 0; h < nh; h++ {
		for c := 0; c < 4; c++ {
			fmt.Fprintf(b, "\tVMOVUPS %d(R10), Z%d\n", 64*c, 4*h+c)
		}
		if h < nh-1 {
			b.WriteString("\tADDQ R9, R10\n")
		}
	}
	fmt.Fprintf(b, "%s_loop:\n", name)
	b.WriteString("\tVPBROADCASTW (R13), Y24\n\tVCVTPH2PS Y24, Z24\n\tVPBROADCASTW 2(R13), Y25\n\tVCVTPH2PS Y25, Z25\n")
	for c := 0; c < 4; c++ {
		z := 16 + c
		fmt.Fprintf(b, "\tVPMOVSXBD %d(DI), Z%d\n\tVCVTDQ2PS Z%d, Z%d\n\tVMULPS Z%d, Z%d, Z%d\n", 16*c, z, z, z, 24+c/2, z, z)
	}
	for h := 0; h < nh; h++ {
		fmt.Fprintf(b, "\tVBROADCASTSS %s, Z%d\n", heads[h], 20+h)
	}
	for h := 0; h < nh; h++ {
		for c := 0; c < 4; c++ {
			fmt.Fprintf(b, "\tVFMADD231PS Z%d, Z%d, Z%d\n", 16+c, 20+h, 4*h+c)
		}
	}
	fmt.Fprintf(b, "\tADDQ $4, SI\n\tADDQ AX, DI\n\tADDQ R14, R13\n\tDECQ CX\n\tJNZ %s_loop\n", name)
	b.WriteString("\tMOVQ R8, R10\n")
	for h := 0; h < nh; h++ {
		for c := 0; c < 4; c++ {
			fmt.Fprintf(b, "\tVMOVUPS Z%d, %d(R10)\n", 4*h+c, 64*c)
		}
		if h < nh-1 {
			b.WriteString("\tADDQ R9, R10\n")
		}
	}
	b.WriteString("\tVZEROUPPER\n\tRET\n")
}

// qkPair writes attnQK<T>P_<nb>(q *float32, qstride int, k unsafe.Pointer,
// tab *int32, blockBytes, hd int, out *float32, ostride int, scale
// float32, kdelta int): attnQK for two heads with K regions of their own
// (the second at kdelta bytes from the first in every block): two kv
// heads of one decoding row, eight chains where one head has four. Each
// score is the single-head kernel's chain, so it has its bits.
func qkPair(b *bytes.Buffer, e elem, nb int) {
	name := fmt.Sprintf("attnQK%sP_%d", e.name, nb)
	fmt.Fprintf(b, "\n// func %s(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32, kdelta int)\n", name)
	fmt.Fprintf(b, "TEXT ·%s(SB), NOSPLIT, $0-80\n", name)
	b.WriteString("\tMOVQ q+0(FP), SI\n\tMOVQ qstride+8(FP), BX\n\tMOVQ tab+24(FP), DI\n\tMOVQ blockBytes+32(FP), AX\n\tMOVQ hd+40(FP), CX\n\tMOVQ kdelta+72(FP), DX\n")
	ptr := []string{"R8", "R9", "R10", "R11"}
	ptr2 := []string{"R12", "R13", "R14", "R15"}
	for j := 0; j < nb; j++ {
		fmt.Fprintf(b, "\tMOVLQSX %d(DI), %s\n\tIMULQ AX, %s\n\tADDQ k+16(FP), %s\n\tLEAQ (%s)(DX*1), %s\n", 4*j, ptr[j], ptr[j], ptr[j], ptr[j], ptr2[j])
	}
	for i := 0; i < 2*nb; i++ {
		fmt.Fprintf(b, "\tVPXORD Z%d, Z%d, Z%d\n", i, i, i)
	}
	b.WriteString("\tXORQ DX, DX\n")
	fmt.Fprintf(b, "%s_loop:\n", name)
	for j := 0; j < nb; j++ {
		b.WriteString(e.load(fmt.Sprintf("(%s)(DX*1)", ptr[j]), fmt.Sprintf("Z%d", 16+j)))
		b.WriteString(e.load(fmt.Sprintf("(%s)(DX*1)", ptr2[j]), fmt.Sprintf("Z%d", 20+j)))
	}
	b.WriteString("\tVBROADCASTSS (SI), Z24\n\tVBROADCASTSS (SI)(BX*1), Z25\n")
	for h := 0; h < 2; h++ {
		for j := 0; j < nb; j++ {
			fmt.Fprintf(b, "\tVFMADD231PS Z%d, Z%d, Z%d\n", 16+4*h+j, 24+h, h*nb+j)
		}
	}
	fmt.Fprintf(b, "\tADDQ $4, SI\n\tADDQ $%d, DX\n\tDECQ CX\n\tJNZ %s_loop\n", 16*e.size, name)
	b.WriteString("\tMOVQ out+48(FP), SI\n\tMOVQ ostride+56(FP), BX\n\tVBROADCASTSS scale+64(FP), Z26\n")
	for h := 0; h < 2; h++ {
		for j := 0; j < nb; j++ {
			z := h*nb + j
			fmt.Fprintf(b, "\tVMULPS Z26, Z%d, Z%d\n\tVMOVUPS Z%d, %d(SI)\n", z, z, z, 64*j)
		}
		if h == 0 {
			b.WriteString("\tADDQ BX, SI\n")
		}
	}
	b.WriteString("\tVZEROUPPER\n\tRET\n")
}

// pvPair writes attnPV<T>P(p *float32, pstride int, v unsafe.Pointer,
// vstride, cnt int, out *float32, ostride int, vdelta int): attnPV for two
// heads with V rows of their own (the second head's at vdelta bytes from
// the first's), 64 columns each: eight chains, each the single-head
// kernel's.
func pvPair(b *bytes.Buffer, e elem) {
	name := fmt.Sprintf("attnPV%sP", e.name)
	fmt.Fprintf(b, "\n// func %s(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int, vdelta int)\n", name)
	fmt.Fprintf(b, "TEXT ·%s(SB), NOSPLIT, $0-64\n", name)
	b.WriteString("\tMOVQ p+0(FP), SI\n\tMOVQ pstride+8(FP), BX\n\tMOVQ v+16(FP), DI\n\tMOVQ vstride+24(FP), AX\n\tMOVQ cnt+32(FP), CX\n\tMOVQ out+40(FP), R8\n\tMOVQ ostride+48(FP), R9\n\tMOVQ vdelta+56(FP), DX\n")
	b.WriteString("\tMOVQ R8, R10\n")
	for h := 0; h < 2; h++ {
		for c := 0; c < 4; c++ {
			fmt.Fprintf(b, "\tVMOVUPS %d(R10), Z%d\n", 64*c, 4*h+c)
		}
		if h == 0 {
			b.WriteString("\tADDQ R9, R10\n")
		}
	}
	fmt.Fprintf(b, "%s_loop:\n", name)
	for c := 0; c < 4; c++ {
		b.WriteString(e.load(fmt.Sprintf("%d(DI)", 16*e.size*c), fmt.Sprintf("Z%d", 16+c)))
		b.WriteString(e.load(fmt.Sprintf("%d(DI)(DX*1)", 16*e.size*c), fmt.Sprintf("Z%d", 20+c)))
	}
	b.WriteString("\tVBROADCASTSS (SI), Z24\n\tVBROADCASTSS (SI)(BX*1), Z25\n")
	for h := 0; h < 2; h++ {
		for c := 0; c < 4; c++ {
			fmt.Fprintf(b, "\tVFMADD231PS Z%d, Z%d, Z%d\n", 16+4*h+c, 24+h, 4*h+c)
		}
	}
	fmt.Fprintf(b, "\tADDQ $4, SI\n\tADDQ AX, DI\n\tDECQ CX\n\tJNZ %s_loop\n", name)
	b.WriteString("\tMOVQ R8, R10\n")
	for h := 0; h < 2; h++ {
		for c := 0; c < 4; c++ {
			fmt.Fprintf(b, "\tVMOVUPS Z%d, %d(R10)\n", 4*h+c, 64*c)
		}
		if h == 0 {
			b.WriteString("\tADDQ R9, R10\n")
		}
	}
	b.WriteString("\tVZEROUPPER\n\tRET\n")
}

// pvQ8Pair writes attnPVQ8P(…, soff, sstride, vdelta, sdelta int): attnPVQ8
// for two heads with V rows of their own, the second head's values vdelta
// and its scales sdelta bytes from the first's: eight chains, each the
// single-head kernel's.
func pvQ8Pair(b *bytes.Buffer) {
	name := "attnPVQ8P"
	fmt.Fprintf(b, "\n// func %s(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int, soff, sstride, vdelta, sdelta int)\n", name)
	fmt.Fprintf(b, "TEXT ·%s(SB), NOSPLIT, $0-88\n", name)
	b.WriteString("\tMOVQ p+0(FP), SI\n\tMOVQ pstride+8(FP), BX\n\tMOVQ v+16(FP), DI\n\tMOVQ vstride+24(FP), AX\n\tMOVQ cnt+32(FP), CX\n\tMOVQ out+40(FP), R8\n\tMOVQ ostride+48(FP), R9\n")
	b.WriteString("\tMOVQ soff+56(FP), R13\n\tADDQ DI, R13\n\tMOVQ sstride+64(FP), R14\n\tMOVQ vdelta+72(FP), DX\n\tMOVQ sdelta+80(FP), R15\n\tMOVQ R8, R10\n")
	for h := 0; h < 2; h++ {
		for c := 0; c < 4; c++ {
			fmt.Fprintf(b, "\tVMOVUPS %d(R10), Z%d\n", 64*c, 4*h+c)
		}
		if h == 0 {
			b.WriteString("\tADDQ R9, R10\n")
		}
	}
	fmt.Fprintf(b, "%s_loop:\n", name)
	b.WriteString("\tVPBROADCASTW (R13), Y26\n\tVCVTPH2PS Y26, Z26\n\tVPBROADCASTW 2(R13), Y27\n\tVCVTPH2PS Y27, Z27\n")
	b.WriteString("\tVPBROADCASTW (R13)(R15*1), Y28\n\tVCVTPH2PS Y28, Z28\n\tVPBROADCASTW 2(R13)(R15*1), Y29\n\tVCVTPH2PS Y29, Z29\n")
	for c := 0; c < 4; c++ {
		z, z2 := 16+c, 20+c
		fmt.Fprintf(b, "\tVPMOVSXBD %d(DI), Z%d\n\tVCVTDQ2PS Z%d, Z%d\n\tVMULPS Z%d, Z%d, Z%d\n", 16*c, z, z, z, 26+c/2, z, z)
		fmt.Fprintf(b, "\tVPMOVSXBD %d(DI)(DX*1), Z%d\n\tVCVTDQ2PS Z%d, Z%d\n\tVMULPS Z%d, Z%d, Z%d\n", 16*c, z2, z2, z2, 28+c/2, z2, z2)
	}
	b.WriteString("\tVBROADCASTSS (SI), Z24\n\tVBROADCASTSS (SI)(BX*1), Z25\n")
	for h := 0; h < 2; h++ {
		for c := 0; c < 4; c++ {
			fmt.Fprintf(b, "\tVFMADD231PS Z%d, Z%d, Z%d\n", 16+4*h+c, 24+h, 4*h+c)
		}
	}
	fmt.Fprintf(b, "\tADDQ $4, SI\n\tADDQ AX, DI\n\tADDQ R14, R13\n\tDECQ CX\n\tJNZ %s_loop\n", name)
	b.WriteString("\tMOVQ R8, R10\n")
	for h := 0; h < 2; h++ {
		for c := 0; c < 4; c++ {
			fmt.Fprintf(b, "\tVMOVUPS Z%d, %d(R10)\n", 4*h+c, 64*c)
		}
		if h == 0 {
			b.WriteString("\tADDQ R9, R10\n")
		}
	}
	b.WriteString("\tVZEROUPPER\n\tRET\n")
}
