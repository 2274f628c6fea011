package main

import (
	"bytes"
	"fmt"
)

// The packed F32 kernels (kernels.PackF32): a matrix's rows in panels of
// 16, each panel K-major (for column k, the 16 rows' weights are one 64-byte
// register image), and kernels f32P<rows>x<panels><family>(w *float32,
// pstride, kn int, x *float32, xstride int, c *float32, cstride int, load
// int) that, for activation rows i < rows and panels p < panels, set
//
//	c[i][16p + j] = fma(w_p[k][j], x_i[k], … fma(w_p[0][j], x_i[0], c0))
//
// over k < kn, in order: one fused multiply-add chain per output, c0 being
// c's value when load is set, else 0. (Strides in bytes: w_p = w +
// p·pstride, x_i = x + i·xstride, c row i = c + i·cstride.) A caller can
// split K anywhere and pass the partial sums back in (load), and the chain,
// so the bits, stay the same; so every output has the same bits whatever
// the rows, panels and K blocks of the calls that compute it.
//
// The AVX-512 kernels keep rows × panels accumulators (up to 6 × 4 = 24
// ZMM registers) and per k load the panels' images once and broadcast each
// row's activation once. The AVX2 ones read a panel as two 8-lane halves,
// one panel a pass over K for 4 rows or more, up to 6/rows panels a pass
// for fewer (f32KernelAVX2), with the same chains.

// f32MaxPanels is the most panels one call takes.
const f32MaxPanels = 4

// f32Unroll is the steps of k per pass of the main loop.
const f32Unroll = 4

// f32Args loads a packed F32 kernel's arguments: SI the first panel, R8 the
// panel stride, CX kn, DI the first activation row, R9 its stride, DX c,
// R10 its stride, and R11 = DI + 3·R9, R12 = SI + 3·R8, BX = DX + 3·R10.
func f32Args(b *bytes.Buffer) {
	b.WriteString("\tMOVQ w+0(FP), SI\n\tMOVQ pstride+8(FP), R8\n\tMOVQ kn+16(FP), CX\n\tMOVQ x+24(FP), DI\n\tMOVQ xstride+32(FP), R9\n\tMOVQ c+40(FP), DX\n\tMOVQ cstride+48(FP), R10\n")
	b.WriteString("\tLEAQ (R9)(R9*2), R13\n\tLEAQ (DI)(R13*1), R11\n\tLEAQ (R8)(R8*2), R13\n\tLEAQ (SI)(R13*1), R12\n\tLEAQ (R10)(R10*2), R13\n\tLEAQ (DX)(R13*1), BX\n")
}

// Addresses of activation row i (plus a displacement), of panel p, and of
// row i of c.
var (
	f32XRow   = []string{"(DI)", "(DI)(R9*1)", "(DI)(R9*2)", "(R11)", "(R11)(R9*1)", "(R11)(R9*2)"}
	f32Panel  = []string{"(SI)", "(SI)(R8*1)", "(SI)(R8*2)", "(R12)"}
	f32CRow   = []string{"(DX)", "(DX)(R10*1)", "(DX)(R10*2)", "(BX)", "(BX)(R10*1)", "(BX)(R10*2)"}
	f32Famils = []string{"AVX512", "AVX2"}
)

// f32Name is the name of a packed F32 kernel.
func f32Name(rows, panels int, fam string) string {
	return fmt.Sprintf("f32P%dx%d%s", rows, panels, fam)
}

const f32Sig = "w *float32, pstride, kn int, x *float32, xstride int, c *float32, cstride int, load int"

// f32Kernel512 writes the AVX-512 kernel of rows × panels: Z(i·panels + p)
// the accumulators, Z24… the panels' images, Z28…Z31 the broadcasts.
func f32Kernel512(b *bytes.Buffer, rows, panels int) {
	name := f32Name(rows, panels, "AVX512")
	fmt.Fprintf(b, "\n// func %s(%s)\n", name, f32Sig)
	fmt.Fprintf(b, "TEXT ·%s(SB), NOSPLIT, $0-64\n", name)
	f32Args(b)
	acc := func(i, p int) int { return i*panels + p }
	b.WriteString("\tMOVQ load+56(FP), AX\n\tTESTQ AX, AX\n")
	fmt.Fprintf(b, "\tJZ %s_zero\n", name)
	for i := 0; i < rows; i++ {
		for p := 0; p < panels; p++ {
			fmt.Fprintf(b, "\tVMOVUPS %d%s, Z%d\n", 64*p, f32CRow[i], acc(i, p))
		}
	}
	fmt.Fprintf(b, "\tJMP %s_start\n%s_zero:\n", name, name)
	for i := 0; i < rows; i++ {
		for p := 0; p < panels; p++ {
			fmt.Fprintf(b, "\tVPXORD Z%d, Z%d, Z%d\n", acc(i, p), acc(i, p), acc(i, p))
		}
	}
	fmt.Fprintf(b, "%s_start:\n", name)
	step := func(u int) {
		for p := 0; p < panels; p++ {
			fmt.Fprintf(b, "\tVMOVUPS %d%s, Z%d\n", 64*u, f32Panel[p], 24+p)
		}
		for i := 0; i < rows; i++ {
			bc := 28 + i%4
			fmt.Fprintf(b, "\tVBROADCASTSS %d%s, Z%d\n", 4*u, f32XRow[i], bc)
			for p := 0; p < panels; p++ {
				fmt.Fprintf(b, "\tVFMADD231PS Z%d, Z%d, Z%d\n", 24+p, bc, acc(i, p))
			}
		}
	}
	advance := func(n int) {
		fmt.Fprintf(b, "\tADDQ $%d, SI\n", 64*n)
		if panels > 3 {
			fmt.Fprintf(b, "\tADDQ $%d, R12\n", 64*n)
		}
		fmt.Fprintf(b, "\tADDQ $%d, DI\n", 4*n)
		if rows > 3 {
			fmt.Fprintf(b, "\tADDQ $%d, R11\n", 4*n)
		}
	}
	f32Loops(b, name, step, advance)
	for i := 0; i < rows; i++ {
		for p := 0; p < panels; p++ {
			fmt.Fprintf(b, "\tVMOVUPS Z%d, %d%s\n", acc(i, p), 64*p, f32CRow[i])
		}
	}
	b.WriteString("\tVZEROUPPER\n\tRET\n")
}

// f32Loops writes the k loops around step (one k at displacement u) and
// advance (the pointers past n steps): f32Unroll steps a pass, then one at
// a time.
func f32Loops(b *bytes.Buffer, name string, step func(u int), advance func(n int)) {
	fmt.Fprintf(b, "\tCMPQ CX, $%d\n\tJLT %s_tail\n%s_loop:\n", f32Unroll, name, name)
	for u := 0; u < f32Unroll; u++ {
		step(u)
	}
	advance(f32Unroll)
	fmt.Fprintf(b, "\tSUBQ $%d, CX\n\tCMPQ CX, $%d\n\tJGE %s_loop\n", f32Unroll, f32Unroll, name)
	fmt.Fprintf(b, "%s_tail:\n\tTESTQ CX, CX\n\tJZ %s_done\n%s_one:\n", name, name, name)
	step(0)
	advance(1)
	fmt.Fprintf(b, "\tDECQ CX\n\tJNZ %s_one\n%s_done:\n", name, name)
}

// f32KernelAVX2 writes the AVX2 kernel of rows × panels: passes over K of
// n panels each, Y(2(i·n+q)+h) half h of row i's panel q, Y14, Y15 the
// broadcasts. With 4 rows or more a pass takes one panel, whose halves are
// loaded into Y12, Y13 once a k; with fewer it takes up to 6/rows panels
// (so that one row, decode, has 8 chains in flight, not 2), their halves
// read by each multiply-add from memory.
func f32KernelAVX2(b *bytes.Buffer, rows, panels int) {
	name := f32Name(rows, panels, "AVX2")
	fmt.Fprintf(b, "\n// func %s(%s)\n", name, f32Sig)
	fmt.Fprintf(b, "TEXT ·%s(SB), NOSPLIT, $0-64\n", name)
	f32Args(b)
	b.WriteString("\tMOVQ kn+16(FP), AX\n")
	pp := 1
	if rows <= 3 {
		pp = min(panels, 6/rows)
	}
	for p0 := 0; p0 < panels; p0 += pp {
		n := min(pp, panels-p0)
		pn := fmt.Sprintf("%s_p%d", name, p0)
		if p0 > 0 {
			// panel p0, from the first activation, with all of kn
			b.WriteString("\tMOVQ w+0(FP), SI\n")
			switch p0 {
			case 1:
				b.WriteString("\tADDQ R8, SI\n")
			case 2:
				b.WriteString("\tLEAQ (SI)(R8*2), SI\n")
			case 3:
				b.WriteString("\tLEAQ (R8)(R8*2), R13\n\tADDQ R13, SI\n")
			}
			b.WriteString("\tMOVQ AX, CX\n\tMOVQ x+24(FP), DI\n\tLEAQ (R9)(R9*2), R11\n\tADDQ DI, R11\n")
			if n > 3 {
				b.WriteString("\tLEAQ (R8)(R8*2), R13\n\tLEAQ (SI)(R13*1), R12\n")
			}
		}
		acc := func(i, q, h int) int { return 2*(i*n+q) + h }
		fmt.Fprintf(b, "\tCMPQ load+56(FP), $0\n\tJEQ %s_zero\n", pn)
		for i := 0; i < rows; i++ {
			for q := 0; q < n; q++ {
				for h := 0; h < 2; h++ {
					fmt.Fprintf(b, "\tVMOVUPS %d%s, Y%d\n", 64*(p0+q)+32*h, f32CRow[i], acc(i, q, h))
				}
			}
		}
		fmt.Fprintf(b, "\tJMP %s_start\n%s_zero:\n", pn, pn)
		for i := 0; i < 2*rows*n; i++ {
			fmt.Fprintf(b, "\tVXORPS Y%d, Y%d, Y%d\n", i, i, i)
		}
		fmt.Fprintf(b, "%s_start:\n", pn)
		step := func(u int) {
			if n == 1 {
				fmt.Fprintf(b, "\tVMOVUPS %d(SI), Y12\n\tVMOVUPS %d(SI), Y13\n", 64*u, 64*u+32)
			}
			for i := 0; i < rows; i++ {
				bc := 14 + i%2
				fmt.Fprintf(b, "\tVBROADCASTSS %d%s, Y%d\n", 4*u, f32XRow[i], bc)
				for q := 0; q < n; q++ {
					for h := 0; h < 2; h++ {
						w := fmt.Sprintf("Y%d", 12+h)
						if n > 1 {
							w = fmt.Sprintf("%d%s", 64*u+32*h, f32Panel[q])
						}
						fmt.Fprintf(b, "\tVFMADD231PS %s, Y%d, Y%d\n", w, bc, acc(i, q, h))
					}
				}
			}
		}
		advance := func(k int) {
			fmt.Fprintf(b, "\tADDQ $%d, SI\n", 64*k)
			if n > 3 {
				fmt.Fprintf(b, "\tADDQ $%d, R12\n", 64*k)
			}
			fmt.Fprintf(b, "\tADDQ $%d, DI\n", 4*k)
			if rows > 3 {
				fmt.Fprintf(b, "\tADDQ $%d, R11\n", 4*k)
			}
		}
		f32Loops(b, pn, step, advance)
		for i := 0; i < rows; i++ {
			for q := 0; q < n; q++ {
				for h := 0; h < 2; h++ {
					fmt.Fprintf(b, "\tVMOVUPS Y%d, %d%s\n", acc(i, q, h), 64*(p0+q)+32*h, f32CRow[i])
				}
			}
		}
	}
	b.WriteString("\tVZEROUPPER\n\tRET\n")
}

// f32File writes f32pack_amd64.s.
func f32File(b *bytes.Buffer) {
	for r := 1; r <= maxRows; r++ {
		for p := 1; p <= f32MaxPanels; p++ {
			f32Kernel512(b, r, p)
		}
	}
	for r := 1; r <= maxRows; r++ {
		for p := 1; p <= f32MaxPanels; p++ {
			f32KernelAVX2(b, r, p)
		}
	}
}

// f32GoFile writes f32pack_amd64.go: the kernels' tables and declarations.
func f32GoFile(b *bytes.Buffer) {
	b.WriteString("// Code generated by q8gen; DO NOT EDIT.\n\n//go:build amd64 && !purego\n\npackage kernels\n")
	for _, fam := range f32Famils {
		fmt.Fprintf(b, "\n// f32%s are the %s packed F32 kernels, by activation rows and panels.\nvar f32%s = f32Kernels{\n", fam, fam, fam)
		for r := 1; r <= maxRows; r++ {
			b.WriteString("\t{")
			for p := 1; p <= f32MaxPanels; p++ {
				if p > 1 {
					b.WriteString(", ")
				}
				b.WriteString(f32Name(r, p, fam))
			}
			b.WriteString("},\n")
		}
		b.WriteString("}\n")
	}
	for _, fam := range f32Famils {
		for r := 1; r <= maxRows; r++ {
			for p := 1; p <= f32MaxPanels; p++ {
				fmt.Fprintf(b, "\n//go:noescape\nfunc %s(%s)\n", f32Name(r, p, fam), f32Sig)
			}
		}
	}
}
