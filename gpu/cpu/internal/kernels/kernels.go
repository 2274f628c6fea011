package kernels

// Dispatch between the assembly kernels and their Go twins. useAsm is set at
// init from the CPU features (kernels_amd64.go); tests flip it to compare
// the two paths.
//
// Float kernels take any length: the assembly covers a multiple of 8
// elements and the remainder is added in Go. Quantized kernels take whole
// blocks. The x4 forms compute four dot products, of four x rows at a
// stride against one weight row, sharing the weight loads and decoding.

func sumF32(x []float32) float32 {
	n := len(x)
	if useAsm && n >= 8 {
		m := n &^ 7
		s := sumF32AVX2(&x[0], m)
		for _, v := range x[m:] {
			s += v
		}
		return s
	}
	return sumF32Go(x)
}

func dotF32(x, w []float32) float32 {
	n := len(x)
	if useAsm && n >= 8 {
		w = w[:n]
		m := n &^ 7
		s := dotF32AVX2(&x[0], &w[0], m)
		for i := m; i < n; i++ {
			s += x[i] * w[i]
		}
		return s
	}
	return dotF32Go(x, w)
}

func dotF16(x []float32, w []uint16) float32 {
	n := len(x)
	if useAsm && n >= 8 {
		w = w[:n]
		m := n &^ 7
		return dotF16AVX2(&x[0], &w[0], m) + dotF16Go(x[m:], w[m:])
	}
	return dotF16Go(x, w)
}

func dotBF16(x []float32, w []uint16) float32 {
	n := len(x)
	if useAsm && n >= 8 {
		w = w[:n]
		m := n &^ 7
		return dotBF16AVX2(&x[0], &w[0], m) + dotBF16Go(x[m:], w[m:])
	}
	return dotBF16Go(x, w)
}

// dotF32x4 sets out[i] = dot(x[i·xs : i·xs+len(w)], w) for i < 4.
func dotF32x4(x []float32, xs int, w []float32, out *[4]float32) {
	n := len(w)
	_ = x[3*xs+n-1]
	m := 0
	if useAsm && n >= 8 {
		m = n &^ 7
		dotF32x4AVX2(&x[0], 4*xs, &w[0], m, out)
	} else {
		*out = [4]float32{}
	}
	if m < n {
		for i := range out {
			out[i] += dotF32Go(x[i*xs+m:i*xs+n], w[m:])
		}
	}
}

func dotF16x4(x []float32, xs int, w []uint16, out *[4]float32) {
	n := len(w)
	_ = x[3*xs+n-1]
	m := 0
	if useAsm && n >= 8 {
		m = n &^ 7
		dotF16x4AVX2(&x[0], 4*xs, &w[0], m, out)
	} else {
		*out = [4]float32{}
	}
	if m < n {
		for i := range out {
			out[i] += dotF16Go(x[i*xs+m:i*xs+n], w[m:])
		}
	}
}

func dotBF16x4(x []float32, xs int, w []uint16, out *[4]float32) {
	n := len(w)
	_ = x[3*xs+n-1]
	m := 0
	if useAsm && n >= 8 {
		m = n &^ 7
		dotBF16x4AVX2(&x[0], 4*xs, &w[0], m, out)
	} else {
		*out = [4]float32{}
	}
	if m < n {
		for i := range out {
			out[i] += dotBF16Go(x[i*xs+m:i*xs+n], w[m:])
		}
	}
}

// dotF32x4x3 sets out[3i+j] = dot(x[i·xs : i·xs+n], w[j·ws : j·ws+n]) for
// i < 4, j < 3: a tile of four activation rows by three weight rows.
// The F32 assembly takes any n > 0.
func dotF32x4x3(x []float32, xs int, w []float32, ws, n int, out *[12]float32) {
	if n <= 0 {
		*out = [12]float32{}
		return
	}
	_, _ = x[3*xs+n-1], w[2*ws+n-1]
	if useAsm {
		dotF32x4x3AVX2(&x[0], 4*xs, &w[0], 4*ws, n, out)
		return
	}
	for i := 0; i < 4; i++ {
		for j := 0; j < 3; j++ {
			out[3*i+j] = dotF32Go(x[i*xs:i*xs+n], w[j*ws:j*ws+n])
		}
	}
}

func dotF16x4x3(x []float32, xs int, w []uint16, ws, n int, out *[12]float32) {
	_, _ = x[3*xs+n-1], w[2*ws+n-1]
	m := 0
	if useAsm && n >= 8 {
		m = n &^ 7
		dotF16x4x3AVX2(&x[0], 4*xs, &w[0], 2*ws, m, out)
	} else {
		*out = [12]float32{}
	}
	if m < n {
		for i := 0; i < 4; i++ {
			for j := 0; j < 3; j++ {
				out[3*i+j] += dotF16Go(x[i*xs+m:i*xs+n], w[j*ws+m:j*ws+n])
			}
		}
	}
}

func dotBF16x4x3(x []float32, xs int, w []uint16, ws, n int, out *[12]float32) {
	_, _ = x[3*xs+n-1], w[2*ws+n-1]
	m := 0
	if useAsm && n >= 8 {
		m = n &^ 7
		dotBF16x4x3AVX2(&x[0], 4*xs, &w[0], 2*ws, m, out)
	} else {
		*out = [12]float32{}
	}
	if m < n {
		for i := 0; i < 4; i++ {
			for j := 0; j < 3; j++ {
				out[3*i+j] += dotBF16Go(x[i*xs+m:i*xs+n], w[j*ws+m:j*ws+n])
			}
		}
	}
}

// dotQ8_0 is the dot product of nb Q8_0 blocks with activations xq, xd.
func dotQ8_0(w []byte, xq []int8, xd []float32, nb int) float32 {
	var out [1]float32
	dotQ8_0Rows(w, 0, xq, xd, nb, out[:])
	return out[0]
}

// dotQ8_0Rows sets out[r] = dotQ8_0(w[r·rb:], xq, xd, nb) for r < len(out).
func dotQ8_0Rows(w []byte, rb int, xq []int8, xd []float32, nb int, out []float32) {
	n := len(out)
	if n == 0 {
		return
	}
	if nb == 0 {
		clear(out)
		return
	}
	_, _, _ = w[(n-1)*rb+nb*bytesQ8_0-1], xq[nb*qk8-1], xd[nb-1]
	if useAsm {
		dotQ8_0RowsAVX2(&w[0], rb, n, &xq[0], &xd[0], nb, &out[0])
		return
	}
	for r := range out {
		out[r] = dotQ8_0Go(w[r*rb:], xq, xd, nb)
	}
}

// dotQ8_0x4: four activation rows, qs at stride qs elements and scales at
// stride ds.
func dotQ8_0x4(w []byte, xq []int8, qs int, xd []float32, ds int, nb int, out *[4]float32) {
	if nb == 0 {
		*out = [4]float32{}
		return
	}
	_, _, _ = w[nb*bytesQ8_0-1], xq[3*qs+nb*qk8-1], xd[3*ds+nb-1]
	if useAsm {
		dotQ8_0x4AVX2(&w[0], &xq[0], &xd[0], nb, qs, 4*ds, out)
		return
	}
	for i := range out {
		out[i] = dotQ8_0Go(w, xq[i*qs:], xd[i*ds:], nb)
	}
}

// dotQ4_0 is the dot product of nb Q4_0 blocks with pairQ4 activations.
// The assembly takes whole pairs of blocks; an odd last block runs in Go.
func dotQ4_0(w []byte, x []pairQ4, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_, _ = w[nb*bytesQ4_0-1], x[(nb-1)/2]
	if useAsm && nb >= 2 {
		var s float32
		dotQ4_0RowsAVX2(&w[0], 0, 1, &x[0], nb/2, &f16Table[0], &s)
		if nb%2 == 1 {
			s += dotQ4_0Go(w[(nb-1)*bytesQ4_0:], x[nb/2:], 1)
		}
		return s
	}
	return dotQ4_0Go(w, x, nb)
}

// dotQ4_0Rows sets out[r] = dotQ4_0(w[r·rb:], x, nb) for r < len(out).
func dotQ4_0Rows(w []byte, rb int, x []pairQ4, nb int, out []float32) {
	n := len(out)
	if n == 0 {
		return
	}
	if useAsm && nb >= 2 && nb%2 == 0 {
		_, _ = w[(n-1)*rb+nb*bytesQ4_0-1], x[nb/2-1]
		dotQ4_0RowsAVX2(&w[0], rb, n, &x[0], nb/2, &f16Table[0], &out[0])
		return
	}
	for r := range out {
		out[r] = dotQ4_0(w[r*rb:], x, nb)
	}
}

// dotQ4_0x4: four activation rows at a stride of xs pairs.
func dotQ4_0x4(w []byte, x []pairQ4, xs int, nb int, out *[4]float32) {
	if nb == 0 {
		*out = [4]float32{}
		return
	}
	_, _ = w[nb*bytesQ4_0-1], x[3*xs+(nb-1)/2]
	if useAsm && nb >= 2 {
		dotQ4_0x4AVX2(&w[0], &x[0], nb/2, xs*128, &f16Table[0], out)
		if nb%2 == 1 {
			for i := range out {
				out[i] += dotQ4_0Go(w[(nb-1)*bytesQ4_0:], x[i*xs+nb/2:], 1)
			}
		}
		return
	}
	for i := range out {
		out[i] = dotQ4_0Go(w, x[i*xs:], nb)
	}
}

func dotQ4_K(w []byte, x []blockQ8K, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_, _ = w[nb*bytesQ4_K-1], x[nb-1]
	if useAsm {
		return dotQ4_KAVX2(&w[0], &x[0], nb)
	}
	return dotQ4_KGo(w, x, nb)
}

// dotQ4_Kx4: four activation rows of blocks at a stride of xs blocks.
func dotQ4_Kx4(w []byte, x []blockQ8K, xs int, nb int, out *[4]float32) {
	if nb == 0 {
		*out = [4]float32{}
		return
	}
	_, _ = w[nb*bytesQ4_K-1], x[3*xs+nb-1]
	if useAsm {
		dotQ4_Kx4AVX2(&w[0], &x[0], nb, xs*320, out)
		return
	}
	for i := range out {
		out[i] = dotQ4_KGo(w, x[i*xs:], nb)
	}
}

func dotQ6_K(w []byte, x []blockQ8K, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_, _ = w[nb*bytesQ6_K-1], x[nb-1]
	if useAsm {
		return dotQ6_KAVX2(&w[0], &x[0], nb)
	}
	return dotQ6_KGo(w, x, nb)
}

func dotQ6_Kx4(w []byte, x []blockQ8K, xs int, nb int, out *[4]float32) {
	if nb == 0 {
		*out = [4]float32{}
		return
	}
	_, _ = w[nb*bytesQ6_K-1], x[3*xs+nb-1]
	if useAsm {
		dotQ6_Kx4AVX2(&w[0], &x[0], nb, xs*320, out)
		return
	}
	for i := range out {
		out[i] = dotQ6_KGo(w, x[i*xs:], nb)
	}
}
