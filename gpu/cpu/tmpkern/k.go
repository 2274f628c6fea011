// Package tmpkern is a temporary naive stand-in for internal/kernels.
package tmpkern

import (
	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/quant"
)

type Pool struct{ n int }

func NewPool(n int) *Pool { return &Pool{n} }
func (p *Pool) Close()   {}
func (p *Pool) For(n int, fn func(lo, hi int)) {
	if n > 0 {
		fn(0, n)
	}
}

type Weights struct {
	Type       gpu.DType
	Rows, Cols int
	Data       []byte
}

type MatMul struct{}

func NewMatMul(p *Pool) *MatMul { return &MatMul{} }

func DequantizeRow(w *Weights, r int, dst []float32) {
	rb, _ := w.Type.RowBytes(w.Cols)
	if err := quant.Dequantize(w.Type, w.Data[r*rb:(r+1)*rb], dst); err != nil {
		panic(err)
	}
}

func (mm *MatMul) Run(dst, x []float32, M int, w *Weights) {
	row := make([]float32, w.Cols)
	for r := 0; r < w.Rows; r++ {
		DequantizeRow(w, r, row)
		for m := 0; m < M; m++ {
			xr := x[m*w.Cols : (m+1)*w.Cols]
			var s float32
			for k, v := range row {
				s += v * xr[k]
			}
			dst[m*w.Rows+r] = s
		}
	}
}

func Sum(x []float32) float32 {
	var s float32
	for _, v := range x {
		s += v
	}
	return s
}
