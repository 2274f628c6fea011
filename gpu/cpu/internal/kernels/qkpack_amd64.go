//go:build amd64 && !purego

package kernels

// The packed K-quant kernels of qkpack_amd64.s (q8gen), by activation rows
// (1 to 6).
var (
	dotQ4KP = [q8MaxRows]func(w *byte, nb int, x *blockQ8K, xstride int, out *float32){
		dotQ4KP1VNNI, dotQ4KP2VNNI, dotQ4KP3VNNI, dotQ4KP4VNNI, dotQ4KP5VNNI, dotQ4KP6VNNI,
	}
	dotQ6KP = [q8MaxRows]func(w *byte, nb int, x *blockQ8K, xstride int, out *float32){
		dotQ6KP1VNNI, dotQ6KP2VNNI, dotQ6KP3VNNI, dotQ6KP4VNNI, dotQ6KP5VNNI, dotQ6KP6VNNI,
	}
)

//go:noescape
func dotQ4KP1VNNI(w *byte, nb int, x *blockQ8K, xstride int, out *float32)

//go:noescape
func dotQ4KP2VNNI(w *byte, nb int, x *blockQ8K, xstride int, out *float32)

//go:noescape
func dotQ4KP3VNNI(w *byte, nb int, x *blockQ8K, xstride int, out *float32)

//go:noescape
func dotQ4KP4VNNI(w *byte, nb int, x *blockQ8K, xstride int, out *float32)

//go:noescape
func dotQ4KP5VNNI(w *byte, nb int, x *blockQ8K, xstride int, out *float32)

//go:noescape
func dotQ4KP6VNNI(w *byte, nb int, x *blockQ8K, xstride int, out *float32)

//go:noescape
func dotQ6KP1VNNI(w *byte, nb int, x *blockQ8K, xstride int, out *float32)

//go:noescape
func dotQ6KP2VNNI(w *byte, nb int, x *blockQ8K, xstride int, out *float32)

//go:noescape
func dotQ6KP3VNNI(w *byte, nb int, x *blockQ8K, xstride int, out *float32)

//go:noescape
func dotQ6KP4VNNI(w *byte, nb int, x *blockQ8K, xstride int, out *float32)

//go:noescape
func dotQ6KP5VNNI(w *byte, nb int, x *blockQ8K, xstride int, out *float32)

//go:noescape
func dotQ6KP6VNNI(w *byte, nb int, x *blockQ8K, xstride int, out *float32)
