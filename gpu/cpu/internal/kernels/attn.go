package kernels

import "fmt"

// Paged locates one kv head's K (or V) rows of a sequence in a paged
// cache: row t is Data[Tab[t/BT]·BlockFloats + Off + (t mod BT)·Stride:]
// (the first hd floats).
type Paged struct {
	Data        []float32
	Tab         []int32
	BlockFloats int
	Off         int
	BT          int
	Stride      int
}

// check panics unless rows 0..n-1 of width hd lie inside Data.
func (p *Paged) check(n, hd int) {
	if n <= 0 {
		return
	}
	nb := (n + p.BT - 1) / p.BT
	if p.BT <= 0 || p.Stride < 0 || p.Off < 0 || nb > len(p.Tab) {
		panic(fmt.Sprintf("kernels: paged rows: %d rows in blocks of %d, table of %d", n, p.BT, len(p.Tab)))
	}
	last := (min(n, p.BT)-1)*p.Stride + hd
	for _, b := range p.Tab[:nb] {
		if b < 0 || int(b)*p.BlockFloats+p.Off+last > len(p.Data) {
			panic(fmt.Sprintf("kernels: paged rows: block %d outside %d floats", b, len(p.Data)))
		}
	}
}

// block returns the rows of block b (cnt of them) as one slice.
func (p *Paged) block(b, cnt, hd int) []float32 {
	base := int(p.Tab[b])*p.BlockFloats + p.Off
	return p.Data[base : base+(cnt-1)*p.Stride+hd]
}

// AttnScores sets out[h·n + t] = scale · q_h·K_t for the nq query heads
// q_h = q[h·hd : (h+1)·hd] and the rows t < n of k.
func AttnScores(q []float32, nq, hd int, k *Paged, n int, scale float32, out []float32) {
	if n <= 0 || nq <= 0 {
		return
	}
	k.check(n, hd)
	_, _ = q[nq*hd-1], out[nq*n-1]
	if hd%8 == 0 && nq >= 2 && wideOn() {
		attnScoresWide(q, nq, hd, k, n, scale, out)
		return
	}
	if useAsm && hd%8 == 0 {
		attnScoresAVX2(&q[0], nq, hd, &k.Data[k.Off], &k.Tab[0], n, k.BT, 4*k.BlockFloats, 4*k.Stride, &out[0], scale)
		return
	}
	for p0 := 0; p0 < n; p0 += k.BT {
		cnt := min(k.BT, n-p0)
		rows := k.block(p0/k.BT, cnt, hd)
		for h := 0; h < nq; h++ {
			DotRows(q[h*hd:(h+1)*hd], rows, k.Stride, scale, out[h*n+p0:h*n+p0+cnt])
		}
	}
}

// AttnValues adds Σ_t p[h·n + t]·V_t to out[h·hd : (h+1)·hd] for h < nq,
// over the rows t < n of v.
func AttnValues(p []float32, nq, hd int, v *Paged, n int, out []float32) {
	if n <= 0 || nq <= 0 {
		return
	}
	v.check(n, hd)
	_, _ = p[nq*n-1], out[nq*hd-1]
	if hd%16 == 0 && wideOn() {
		for p0 := 0; p0 < n; p0 += v.BT {
			cnt := min(v.BT, n-p0)
			rows := v.block(p0/v.BT, cnt, hd)
			attnValuesBlockAVX512(&p[p0], 4*n, nq, hd, &rows[0], 4*v.Stride, cnt, &out[0])
		}
		return
	}
	if useAsm && hd%8 == 0 {
		attnValuesAVX2(&p[0], nq, hd, &v.Data[v.Off], &v.Tab[0], n, v.BT, 4*v.BlockFloats, 4*v.Stride, &out[0])
		return
	}
	for p0 := 0; p0 < n; p0 += v.BT {
		cnt := min(v.BT, n-p0)
		rows := v.block(p0/v.BT, cnt, hd)
		for h := 0; h < nq; h++ {
			AxpyRows(p[h*n+p0:h*n+p0+cnt], rows, v.Stride, out[h*hd:(h+1)*hd])
		}
	}
}

// attnScoresWide is AttnScores with the AVX-512 kernel, two heads at a
// time over each block's rows in groups of eight; the rows past the last
// group, and an odd last head, go through DotRows. Every score has the bits
// of attnScoresAVX2 (the 8-, 4- and 1-row steps reduce in the same order).
func attnScoresWide(q []float32, nq, hd int, k *Paged, n int, scale float32, out []float32) {
	for p0 := 0; p0 < n; p0 += k.BT {
		cnt := min(k.BT, n-p0)
		rows := k.block(p0/k.BT, cnt, hd)
		n8 := cnt &^ 7
		h := 0
		for ; h+1 < nq; h += 2 {
			if n8 > 0 {
				o := out[h*n+p0 : (h+1)*n+p0+n8]
				attnScores2AVX512(&q[h*hd], 4*hd, &rows[0], 4*k.Stride, hd, n8, &o[0], 4*n, scale)
			}
			if n8 < cnt {
				for hh := h; hh < h+2; hh++ {
					DotRows(q[hh*hd:(hh+1)*hd], rows[n8*k.Stride:], k.Stride, scale, out[hh*n+p0+n8:hh*n+p0+cnt])
				}
			}
		}
		if h < nq {
			DotRows(q[h*hd:(h+1)*hd], rows, k.Stride, scale, out[h*n+p0:h*n+p0+cnt])
		}
	}
}
