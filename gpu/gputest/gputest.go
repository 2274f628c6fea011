package gputest

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/quant"
)

// Run runs the suite. newBackend returns a fresh backend; Run closes it.
func Run(t *testing.T, newBackend func(t *testing.T) gpu.Backend) {
	h := func(name string, f func(t *testing.T, be gpu.Backend)) {
		t.Run(name, func(t *testing.T) {
			be := newBackend(t)
			defer be.Close()
			f(t, be)
			if err := be.Sync(); err != nil {
				t.Fatalf("sync: %v", err)
			}
		})
	}
	h("MatMul", testMatMul)
	h("Embed", testEmbed)
	h("Add", testAdd)
	h("RMSNorm", testRMSNorm)
	h("RoPE", testRoPE)
	h("Attention", testAttention)
	h("KVBlockCopy", testKVBlockCopy)
	h("HostTier", testHostTier)
	h("SwiGLU", testSwiGLU)
	h("Softmax", testSoftmax)
	h("GatherView", testGatherView)
	// The operations of gpu.ArchOps, on backends that have them.
	arch := func(name string, f func(t *testing.T, be gpu.Backend, ops gpu.ArchOps)) {
		h(name, func(t *testing.T, be gpu.Backend) {
			ops, ok := be.(gpu.ArchOps)
			if !ok {
				t.Skipf("%s does not implement gpu.ArchOps", be.Name())
			}
			f(t, be, ops)
		})
	}
	arch("RMSNormHeads", testRMSNormHeads)
	arch("GeGLU", testGeGLU)
	arch("Scale", testScale)
	arch("AttentionWindow", testAttentionWindow)
}

// MatMulTolerance is the allowed error of one output of MatMul for weights
// of type t, relative to ‖x‖₂·‖w‖₂ of that output's operands: quantized
// types may quantize the activations to 8 bits.
func MatMulTolerance(t gpu.DType) float64 {
	switch t {
	case gpu.F32:
		return 1e-5
	case gpu.F16, gpu.BF16:
		return 1e-4
	}
	return 1.5e-2
}

func randVec(r *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * scale)
	}
	return v
}

func tensor(t *testing.T, be gpu.Backend, rows, cols int, data []float32) gpu.Tensor {
	t.Helper()
	x, err := be.NewTensor(rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	if data != nil {
		be.Write(x, data)
	}
	return x
}

func read(t *testing.T, be gpu.Backend, x gpu.Tensor) []float32 {
	t.Helper()
	out := make([]float32, x.Rows()*x.Cols())
	if err := be.Read(x, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func closeTo(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if d := math.Abs(float64(got[i]) - float64(want[i])); !(d <= tol*(1+math.Abs(float64(want[i])))) {
			t.Fatalf("%s[%d] = %g, want %g (diff %g, tol %g)", what, i, got[i], want[i], d, tol)
		}
	}
}

// quantized returns random weights of type dt and their dequantized values.
func quantized(t *testing.T, r *rand.Rand, dt gpu.DType, rows, cols int) ([]byte, []float32) {
	t.Helper()
	raw := randVec(r, rows*cols, 1)
	data, err := quant.Quantize(dt, raw)
	if err != nil {
		t.Fatal(err)
	}
	deq := make([]float32, rows*cols)
	if err := quant.Dequantize(dt, data, deq); err != nil {
		t.Fatal(err)
	}
	return data, deq
}

// refused reports whether err is a backend's refusal of a weight type it
// has no kernels for (the CUDA backend and the CPU-only types): an
// ErrUnsupportedType that names the type.
func refused(t *testing.T, dt gpu.DType, err error) bool {
	t.Helper()
	if !errors.Is(err, gpu.ErrUnsupportedType) {
		return false
	}
	if !strings.Contains(err.Error(), dt.String()) {
		t.Errorf("%v refused with %q, which does not name the type", dt, err)
	}
	t.Logf("%v: not supported by this backend: %v", dt, err)
	return true
}

func testMatMul(t *testing.T, be gpu.Backend) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, dt := range gpu.DTypes {
		for _, shape := range []struct{ m, rows, cols int }{{1, 64, 256}, {3, 96, 512}, {17, 40, 256}, {64, 33, 768}} {
			name := fmt.Sprintf("%v/M%d/%dx%d", dt, shape.m, shape.rows, shape.cols)
			data, deq := quantized(t, r, dt, shape.rows, shape.cols)
			w, err := be.NewMatrix(dt, shape.rows, shape.cols, data)
			if refused(t, dt, err) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			xs := randVec(r, shape.m*shape.cols, 1)
			x := tensor(t, be, shape.m, shape.cols, xs)
			dst := tensor(t, be, shape.m, shape.rows, nil)
			be.MatMul(dst, x, w)
			got := read(t, be, dst)
			tol := MatMulTolerance(dt)
			for m := 0; m < shape.m; m++ {
				xr := xs[m*shape.cols : (m+1)*shape.cols]
				for o := 0; o < shape.rows; o++ {
					wr := deq[o*shape.cols : (o+1)*shape.cols]
					var ref, xn, wn float64
					for k := range xr {
						ref += float64(xr[k]) * float64(wr[k])
						xn += float64(xr[k]) * float64(xr[k])
						wn += float64(wr[k]) * float64(wr[k])
					}
					bound := tol * math.Sqrt(xn*wn)
					if d := math.Abs(float64(got[m*shape.rows+o]) - ref); !(d <= bound) {
						t.Fatalf("%s: out[%d][%d] = %g, want %g (diff %g > %g)", name, m, o, got[m*shape.rows+o], ref, d, bound)
					}
				}
			}
		}
	}
	// A misshapen call is a programming error and panics.
	w, _ := be.NewMatrix(gpu.F32, 4, 8, make([]byte, 4*8*4))
	func() {
		defer func() {
			if recover() == nil {
				t.Error("MatMul with mismatched shapes did not panic")
			}
		}()
		be.MatMul(tensor(t, be, 1, 4, nil), tensor(t, be, 1, 7, nil), w)
	}()
	if _, err := be.NewMatrix(gpu.Q8_0, 2, 33, make([]byte, 100)); err == nil {
		t.Error("NewMatrix accepted a row that is not a multiple of the block size")
	}
}

func testEmbed(t *testing.T, be gpu.Backend) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, dt := range gpu.DTypes {
		data, deq := quantized(t, r, dt, 10, 256)
		w, err := be.NewMatrix(dt, 10, 256, data)
		if refused(t, dt, err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		ids := []int32{3, 0, 9, 3}
		dst := tensor(t, be, len(ids), 256, nil)
		be.Embed(dst, w, ids)
		var want []float32
		for _, id := range ids {
			want = append(want, deq[int(id)*256:int(id+1)*256]...)
		}
		closeTo(t, "embed "+dt.String(), read(t, be, dst), want, 1e-6)
	}
}

func testAdd(t *testing.T, be gpu.Backend) {
	r := rand.New(rand.NewPCG(5, 6))
	a, b, bias := randVec(r, 3*8, 1), randVec(r, 3*8, 1), randVec(r, 8, 1)
	x := tensor(t, be, 3, 8, a)
	be.Add(x, tensor(t, be, 3, 8, b))
	be.Add(x, tensor(t, be, 1, 8, bias))
	want := make([]float32, len(a))
	for i := range want {
		want[i] = a[i] + b[i] + bias[i%8]
	}
	closeTo(t, "add", read(t, be, x), want, 1e-6)
}

func testRMSNorm(t *testing.T, be gpu.Backend) {
	r := rand.New(rand.NewPCG(7, 8))
	const rows, cols = 5, 96
	xs, ws := randVec(r, rows*cols, 3), randVec(r, cols, 1)
	want := make([]float32, rows*cols)
	for i := 0; i < rows; i++ {
		var ss float64
		for _, v := range xs[i*cols : (i+1)*cols] {
			ss += float64(v) * float64(v)
		}
		s := 1 / math.Sqrt(ss/cols+1e-5)
		for j := 0; j < cols; j++ {
			want[i*cols+j] = float32(float64(xs[i*cols+j]) * s * float64(ws[j]))
		}
	}
	x := tensor(t, be, rows, cols, xs)
	dst := tensor(t, be, rows, cols, nil)
	w := tensor(t, be, 1, cols, ws)
	be.RMSNorm(dst, x, w, 1e-5)
	closeTo(t, "rmsnorm", read(t, be, dst), want, 1e-5)
	be.RMSNorm(x, x, w, 1e-5) // in place
	closeTo(t, "rmsnorm in place", read(t, be, x), want, 1e-5)
}

func refRoPE(x []float32, heads int, pos []int32, r gpu.RoPE) []float32 {
	out := append([]float32(nil), x...)
	cols := len(x) / len(pos)
	hd := cols / heads
	half := r.Dims / 2
	scale := float64(r.Scale)
	if scale == 0 {
		scale = 1
	}
	for i, p := range pos {
		for h := 0; h < heads; h++ {
			v := out[i*cols+h*hd:]
			for j := 0; j < half; j++ {
				f := math.Pow(float64(r.Base), -float64(2*j)/float64(r.Dims))
				if r.Factors != nil {
					f /= float64(r.Factors[j])
				}
				s, c := math.Sincos(float64(p) * scale * f)
				a, b := 2*j, 2*j+1
				if r.NeoX {
					a, b = j, j+half
				}
				x0, x1 := float64(v[a]), float64(v[b])
				v[a], v[b] = float32(x0*c-x1*s), float32(x0*s+x1*c)
			}
		}
	}
	return out
}

func testRoPE(t *testing.T, be gpu.Backend) {
	r := rand.New(rand.NewPCG(9, 10))
	const heads, hd = 4, 16
	pos := []int32{0, 1, 7, 300, 4095}
	for _, rp := range []gpu.RoPE{
		{Dims: 16, Base: 10000},
		{Dims: 16, Base: 1e6, NeoX: true},
		{Dims: 8, Base: 10000, Scale: 0.25},
		{Dims: 16, Base: 500000, Factors: []float32{1, 1, 2, 4, 8, 8, 8, 8}},
	} {
		xs := randVec(r, len(pos)*heads*hd, 1)
		x := tensor(t, be, len(pos), heads*hd, xs)
		be.RoPE(x, heads, &gpu.Batch{Pos: pos, Seq: make([]int32, len(pos)), Tables: [][]int32{{0}}}, rp)
		closeTo(t, fmt.Sprintf("rope %+v", rp), read(t, be, x), refRoPE(xs, heads, pos, rp), 2e-5)
	}
}

// testAttention builds three sequences whose blocks are scattered over the
// arena and checks Attention against a dense reference.
func testAttention(t *testing.T, be gpu.Backend) { attentionCase(t, be, nil, 0) }

// testAttentionWindow is testAttention with windows of 1 (a row sees only
// itself), 5 (the query rows of sequence 1, at consecutive positions,
// see overlapping windows) and 40 (wider than every sequence: full causal).
func testAttentionWindow(t *testing.T, be gpu.Backend, ops gpu.ArchOps) {
	for _, w := range []int{1, 5, 40} {
		attentionCase(t, be, ops, w)
	}
}

// attentionCase checks Attention (window 0) or ops.AttentionWindow.
func attentionCase(t *testing.T, be gpu.Backend, ops gpu.ArchOps, window int) {
	r := rand.New(rand.NewPCG(11, 12))
	const heads, kvHeads, hd, layers = 6, 2, 8, 2
	kvDim := kvHeads * hd
	kv, err := be.NewKV(gpu.KVConfig{Layers: layers, KVDim: kvDim, BlockTokens: 16, Blocks: 12})
	if err != nil {
		t.Fatal(err)
	}
	lens := []int{5, 37, 16}
	tables := [][]int32{{7}, {2, 11, 0}, {5}}
	// Fill every position of every sequence through StoreKV.
	var allPos, allSeq []int32
	for s, n := range lens {
		for p := 0; p < n; p++ {
			allPos = append(allPos, int32(p))
			allSeq = append(allSeq, int32(s))
		}
	}
	kvs := make([][2][]float32, layers)
	for l := 0; l < layers; l++ {
		kvs[l][0] = randVec(r, len(allPos)*kvDim, 1)
		kvs[l][1] = randVec(r, len(allPos)*kvDim, 1)
		b := &gpu.Batch{Pos: allPos, Seq: allSeq, Tables: tables}
		be.StoreKV(kv, l, tensor(t, be, len(allPos), kvDim, kvs[l][0]), tensor(t, be, len(allPos), kvDim, kvs[l][1]), b)
	}
	// Query: the last 3 positions of sequence 1 and the last of 0 and 2.
	var qPos, qSeq []int32
	for i := range allPos {
		s, p := allSeq[i], allPos[i]
		if (s == 1 && int(p) >= lens[1]-3) || (s != 1 && int(p) == lens[s]-1) {
			qPos, qSeq = append(qPos, p), append(qSeq, s)
		}
	}
	qs := randVec(r, len(qPos)*heads*hd, 1)
	b := &gpu.Batch{Pos: qPos, Seq: qSeq, Tables: tables}
	for l := 0; l < layers; l++ {
		q := tensor(t, be, len(qPos), heads*hd, qs)
		dst := tensor(t, be, len(qPos), heads*hd, nil)
		if window == 0 {
			be.Attention(dst, q, kv, l, heads, b)
		} else {
			ops.AttentionWindow(dst, q, kv, l, heads, window, b)
		}
		want := make([]float32, len(qs))
		for i := range qPos {
			// rows of the same sequence at positions <= qPos[i]
			var rows []int
			for j := range allPos {
				if allSeq[j] == qSeq[i] && allPos[j] <= qPos[i] && (window == 0 || qPos[i]-allPos[j] < int32(window)) {
					rows = append(rows, j)
				}
			}
			for h := 0; h < heads; h++ {
				kh := h / (heads / kvHeads) * hd
				qv := qs[i*heads*hd+h*hd:]
				sc := make([]float64, len(rows))
				mx := math.Inf(-1)
				for n, j := range rows {
					for d := 0; d < hd; d++ {
						sc[n] += float64(qv[d]) * float64(kvs[l][0][j*kvDim+kh+d])
					}
					sc[n] /= math.Sqrt(hd)
					mx = math.Max(mx, sc[n])
				}
				var sum float64
				for n := range sc {
					sc[n] = math.Exp(sc[n] - mx)
					sum += sc[n]
				}
				for d := 0; d < hd; d++ {
					var acc float64
					for n, j := range rows {
						acc += sc[n] / sum * float64(kvs[l][1][j*kvDim+kh+d])
					}
					want[i*heads*hd+h*hd+d] = float32(acc)
				}
			}
		}
		closeTo(t, fmt.Sprintf("attention layer %d window %d", l, window), read(t, be, dst), want, 2e-5)
	}
}

func testKVBlockCopy(t *testing.T, be gpu.Backend) {
	r := rand.New(rand.NewPCG(13, 14))
	const kvDim = 8
	kv, err := be.NewKV(gpu.KVConfig{Layers: 2, KVDim: kvDim, Blocks: 4})
	if err != nil {
		t.Fatal(err)
	}
	cfg := kv.Config()
	if cfg.BlockTokens != 16 || cfg.BlockFloats() != 2*2*16*kvDim {
		t.Fatalf("config %+v", cfg)
	}
	pos := make([]int32, 16)
	for i := range pos {
		pos[i] = int32(i)
	}
	b := &gpu.Batch{Pos: pos, Seq: make([]int32, 16), Tables: [][]int32{{1}}}
	for l := 0; l < 2; l++ {
		be.StoreKV(kv, l, tensor(t, be, 16, kvDim, randVec(r, 16*kvDim, 1)), tensor(t, be, 16, kvDim, randVec(r, 16*kvDim, 1)), b)
	}
	q := randVec(r, 2*kvDim, 1)
	attend := func(tab int32) []float32 {
		bq := &gpu.Batch{Pos: []int32{15}, Seq: []int32{0}, Tables: [][]int32{{tab}}}
		dst := tensor(t, be, 1, 2*kvDim, nil)
		be.Attention(dst, tensor(t, be, 1, 2*kvDim, q), kv, 1, 2, bq)
		return read(t, be, dst)
	}
	before := attend(1)
	// Swap block 1 out to host memory and back into block 3.
	host := make([]byte, cfg.BlockBytes())
	kv.ReadBlock(1, host)
	kv.WriteBlock(1, make([]byte, cfg.BlockBytes()))
	kv.WriteBlock(3, host)
	closeTo(t, "attention after block move", attend(3), before, 0)
}

// testHostTier moves blocks through the backend's host tier with kernels
// queued between the copies, as the scheduler does: a block overwritten
// right after it is swapped out, a slot reused right after it is swapped in.
func testHostTier(t *testing.T, be gpu.Backend) {
	r := rand.New(rand.NewPCG(29, 30))
	const kvDim, layers, bt = 8, 2, 16
	kv, err := be.NewKV(gpu.KVConfig{Layers: layers, KVDim: kvDim, Blocks: 6})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gpu.NewHostTier(be, kv, 0); err == nil {
		t.Fatal("a host tier of 0 blocks was accepted")
	}
	tier, err := gpu.NewHostTier(be, kv, 3)
	if err != nil {
		t.Fatal(err)
	}
	if tier.Blocks() != 3 {
		t.Fatalf("tier has %d slots, want 3", tier.Blocks())
	}
	pos := make([]int32, bt)
	for i := range pos {
		pos[i] = int32(i)
	}
	fill := func(blk int32) {
		b := &gpu.Batch{Pos: pos, Seq: make([]int32, bt), Tables: [][]int32{{blk}}}
		for l := 0; l < layers; l++ {
			be.StoreKV(kv, l, tensor(t, be, bt, kvDim, randVec(r, bt*kvDim, 1)), tensor(t, be, bt, kvDim, randVec(r, bt*kvDim, 1)), b)
		}
	}
	q := randVec(r, 2*kvDim, 1)
	attend := func(blk int32) []float32 {
		bq := &gpu.Batch{Pos: []int32{bt - 1}, Seq: []int32{0}, Tables: [][]int32{{blk}}}
		dst := tensor(t, be, 1, 2*kvDim, nil)
		be.Attention(dst, tensor(t, be, 1, 2*kvDim, q), kv, 1, 2, bq)
		return read(t, be, dst)
	}
	block := func(blk int) []byte {
		x := make([]byte, kv.Config().BlockBytes())
		kv.ReadBlock(blk, x)
		return x
	}
	for blk := int32(0); blk < 4; blk++ {
		fill(blk)
	}
	want := [][]byte{block(0), block(1), block(2), block(3)}
	att := [][]float32{attend(0), attend(1), attend(2), attend(3)}

	// Swap blocks 1 and 3 out and overwrite them at once.
	if err := tier.Out([]gpu.BlockMove{{From: 1, To: 0}, {From: 3, To: 2}}); err != nil {
		t.Fatal(err)
	}
	fill(1)
	fill(3)
	// Bring them back into blocks 4 and 5; attention queued next reads them.
	if err := tier.In([]gpu.BlockMove{{From: 0, To: 4}, {From: 2, To: 5}}); err != nil {
		t.Fatal(err)
	}
	closeTo(t, "attention over swapped-in block 4", attend(4), att[1], 0)
	closeTo(t, "attention over swapped-in block 5", attend(5), att[3], 0)
	sameBlock(t, "block 4 after the round trip", block(4), want[1])
	sameBlock(t, "block 5 after the round trip", block(5), want[3])

	// Reuse slot 0 right after the In that read it was queued.
	if err := tier.In([]gpu.BlockMove{{From: 2, To: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := tier.Out([]gpu.BlockMove{{From: 0, To: 2}}); err != nil {
		t.Fatal(err)
	}
	fill(0)
	if err := tier.In([]gpu.BlockMove{{From: 2, To: 3}}); err != nil {
		t.Fatal(err)
	}
	sameBlock(t, "block 1 from a slot then reused", block(1), want[3])
	sameBlock(t, "block 3 from the reused slot", block(3), want[0])
	closeTo(t, "attention over block 3", attend(3), att[0], 0)
}

func testSwiGLU(t *testing.T, be gpu.Backend) {
	r := rand.New(rand.NewPCG(15, 16))
	g, u := randVec(r, 2*40, 3), randVec(r, 2*40, 1)
	want := make([]float32, len(g))
	for i := range g {
		x := float64(g[i])
		want[i] = float32(x / (1 + math.Exp(-x)) * float64(u[i]))
	}
	gt := tensor(t, be, 2, 40, g)
	be.SwiGLU(gt, gt, tensor(t, be, 2, 40, u))
	closeTo(t, "swiglu", read(t, be, gt), want, 1e-5)
}

func testSoftmax(t *testing.T, be gpu.Backend) {
	xs := []float32{1, 2, 3, 1000, 1000, -1000}
	x := tensor(t, be, 2, 3, xs)
	be.Softmax(x)
	e := math.Exp(1)
	s := 1 + e + e*e
	closeTo(t, "softmax", read(t, be, x), []float32{float32(1 / s), float32(e / s), float32(e * e / s), 0.5, 0.5, 0}, 1e-6)
}

func testGatherView(t *testing.T, be gpu.Backend) {
	xs := []float32{0, 1, 10, 11, 20, 21, 30, 31}
	x := tensor(t, be, 4, 2, xs)
	dst := tensor(t, be, 2, 2, nil)
	be.Gather(dst, x, []int32{3, 1})
	closeTo(t, "gather", read(t, be, dst), []float32{30, 31, 10, 11}, 0)
	v := be.View(x, 1, 2)
	if v.Rows() != 2 || v.Cols() != 2 {
		t.Fatalf("view shape %d×%d", v.Rows(), v.Cols())
	}
	closeTo(t, "view", read(t, be, v), []float32{10, 11, 20, 21}, 0)
	be.Add(v, tensor(t, be, 1, 2, []float32{100, 100}))
	closeTo(t, "write through view", read(t, be, x), []float32{0, 1, 110, 111, 120, 121, 30, 31}, 0)
}

func testRMSNormHeads(t *testing.T, be gpu.Backend, ops gpu.ArchOps) {
	r := rand.New(rand.NewPCG(17, 18))
	const rows, heads, hd = 3, 4, 48
	const cols = heads * hd
	xs, ws := randVec(r, rows*cols, 3), randVec(r, hd, 1)
	want := make([]float32, rows*cols)
	for i := 0; i < rows*heads; i++ {
		v := xs[i*hd : (i+1)*hd]
		var ss float64
		for _, x := range v {
			ss += float64(x) * float64(x)
		}
		s := 1 / math.Sqrt(ss/hd+1e-6)
		for j, x := range v {
			want[i*hd+j] = float32(float64(x) * s * float64(ws[j]))
		}
	}
	x := tensor(t, be, rows, cols, xs)
	ops.RMSNormHeads(x, heads, tensor(t, be, 1, hd, ws), 1e-6)
	closeTo(t, "rmsnorm heads", read(t, be, x), want, 1e-5)
}

func testGeGLU(t *testing.T, be gpu.Backend, ops gpu.ArchOps) {
	r := rand.New(rand.NewPCG(19, 20))
	g, u := randVec(r, 2*40, 3), randVec(r, 2*40, 1)
	g[0], g[1], g[2] = 0, -20, 20 // gelu(0) = 0, the far tails
	want := make([]float32, len(g))
	for i := range g {
		x := float64(g[i])
		want[i] = float32(0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x))) * float64(u[i]))
	}
	gt := tensor(t, be, 2, 40, g)
	ops.GeGLU(gt, gt, tensor(t, be, 2, 40, u))
	closeTo(t, "geglu", read(t, be, gt), want, 1e-5)
}

func testScale(t *testing.T, be gpu.Backend, ops gpu.ArchOps) {
	xs := []float32{1, -2, 0.5, 3, 0, -1e-3}
	x := tensor(t, be, 2, 3, xs)
	ops.Scale(x, 2.5)
	closeTo(t, "scale", read(t, be, x), []float32{2.5, -5, 1.25, 7.5, 0, -2.5e-3}, 1e-7)
}

// sameBlock fails t unless a block read back holds the bytes of want.
func sameBlock(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: the block's bytes differ", what)
	}
}
