package cuda

import "github.com/zerolayer/zerolayer/gpu"

//go:generate make -C ../.. kernels

// argKind is the C type of a kernel parameter; every parameter travels in
// an 8-byte slot (see kernels/common.cuh).
type argKind uint8

const (
	aPtr argKind = iota // a device pointer (.u64 in PTX)
	aInt                // int (.u32)
	aF32                // float (.f32)
	aF64                // double (.f64)
)

// kernelSpec names a kernel, the module (kernels/<module>.cu) that holds
// it, and its parameters; a test checks the specs against the PTX.
type kernelSpec struct {
	module string
	name   string
	args   []argKind
}

// kernelID indexes kernelSpecs.
type kernelID int

// The kernels, in kernelSpecs order. The matmul kernels come first:
// kMatMul + typeIndex·4 + tileIndex, see mmKernel.
const (
	kMatMul kernelID = iota
	kEmbed           = kMatMul + numMMKernels + iota - 1
	kGather
	kAdd
	kSwiGLU
	kRMSNorm
	kRoPE
	kSoftmax
	kArgmax
	kMaskLogits
	kStoreKV
	kAttention
	numKernels
)

// numMMKernels is len(mmTypes)·len(mmTiles).
const numMMKernels = 7 * 4

// mmTypes lists the weight types with a matmul kernel, in kernel order;
// mmTiles the rows of x each variant takes per block.
var (
	mmTypes = []gpu.DType{gpu.F32, gpu.F16, gpu.BF16, gpu.Q8_0, gpu.Q4_0, gpu.Q4_K, gpu.Q6_K}
	mmNames = []string{"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k"}
	mmTiles = []int{1, 2, 4, 8}
)

// hasMMKernel reports whether weights of type t have a matmul kernel.
func hasMMKernel(t gpu.DType) bool {
	for _, x := range mmTypes {
		if x == t {
			return true
		}
	}
	return false
}

// mmKernel returns the matmul kernel for weights of type t and m rows of x,
// and the rows per block (the tile) it takes.
func mmKernel(t gpu.DType, m int) (kernelID, int) {
	ti := 0
	for i, x := range mmTypes {
		if x == t {
			ti = i
		}
	}
	tile := len(mmTiles) - 1
	for i, x := range mmTiles {
		if m <= x {
			tile = i
			break
		}
	}
	return kMatMul + kernelID(ti*len(mmTiles)+tile), mmTiles[tile]
}

var kernelSpecs = func() []kernelSpec {
	P, I, F, D := aPtr, aInt, aF32, aF64
	var s []kernelSpec
	for _, t := range mmNames {
		for _, m := range mmTiles {
			s = append(s, kernelSpec{"matmul", "mm_" + t + "_" + itoa(m), []argKind{P, P, P, P, P, P, I, I, I, I}})
		}
	}
	return append(s,
		kernelSpec{"rows", "embed", []argKind{P, P, P, P, P, P, I, I, I, I}},
		kernelSpec{"rows", "gather", []argKind{P, P, P, I}},
		kernelSpec{"rows", "add", []argKind{P, P, I, I, I}},
		kernelSpec{"rows", "swiglu", []argKind{P, P, P, I}},
		kernelSpec{"rows", "rmsnorm", []argKind{P, P, P, I, F}},
		kernelSpec{"rows", "rope", []argKind{P, P, P, I, I, I, I, D, I}},
		kernelSpec{"rows", "softmax", []argKind{P, I}},
		kernelSpec{"rows", "argmax", []argKind{P, P, I}},
		kernelSpec{"rows", "mask_logits", []argKind{P, P, I, I, I}},
		kernelSpec{"attention", "store_kv", []argKind{P, P, P, P, P, P, P, I, I, I, I, I}},
		kernelSpec{"attention", "attention", []argKind{P, P, P, P, P, P, P, I, I, I, I, I, I, F}},
	)
}()

// kernelModules lists the modules (kernels/<name>.cu, .ptx).
var kernelModules = []string{"matmul", "rows", "attention"}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
