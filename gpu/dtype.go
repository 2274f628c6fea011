package gpu

import "fmt"

// DType is the storage type of a weight matrix. The values are the GGML
// tensor type ids used by GGUF files, so a GGUF tensor type converts to a
// DType without a table.
type DType uint32

// The supported storage types. Quantized types store rows as a sequence of
// fixed-size blocks; see BlockSize and BlockBytes.
const (
	F32  DType = 0
	F16  DType = 1
	Q4_0 DType = 2
	Q4_1 DType = 3
	Q5_0 DType = 6
	Q5_1 DType = 7
	Q8_0 DType = 8
	Q2_K DType = 10
	Q3_K DType = 11
	Q4_K DType = 12
	Q5_K DType = 13
	Q6_K DType = 14
	BF16 DType = 30
)

// DTypes lists every supported type, in a stable order (tests iterate it).
var DTypes = []DType{F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q5_K}

var dtypeInfo = map[DType]struct {
	name  string
	block int // elements per block
	bytes int // bytes per block
}{
	F32:  {"F32", 1, 4},
	F16:  {"F16", 1, 2},
	BF16: {"BF16", 1, 2},
	Q8_0: {"Q8_0", 32, 34},
	Q4_0: {"Q4_0", 32, 18},
	Q4_K: {"Q4_K", 256, 144},
	Q6_K: {"Q6_K", 256, 210},
	Q4_1: {"Q4_1", 32, 20},
	Q5_0: {"Q5_0", 32, 22},
	Q5_1: {"Q5_1", 32, 24},
	Q2_K: {"Q2_K", 256, 84},
	Q3_K: {"Q3_K", 256, 110},
	Q5_K: {"Q5_K", 256, 176},
}

// ggmlNames names the GGML types this package does not support, so errors
// can say which type a file uses.
var ggmlNames = map[DType]string{
	9: "Q8_1", 15: "Q8_K", 16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS",
	19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S", 23: "IQ4_XS",
	24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64", 29: "IQ1_M",
	34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4",
}

// String returns the GGML name of the type ("Q4_K"), or "type(N)".
func (t DType) String() string {
	if i, ok := dtypeInfo[t]; ok {
		return i.name
	}
	if n, ok := ggmlNames[t]; ok {
		return n
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// Supported reports whether backends can store and multiply this type.
func (t DType) Supported() bool { _, ok := dtypeInfo[t]; return ok }

// BlockSize is the number of elements in one block of the type (1 for
// unquantized types). A row's length must be a multiple of it.
func (t DType) BlockSize() int { return dtypeInfo[t].block }

// BlockBytes is the size in bytes of one block of the type.
func (t DType) BlockBytes() int { return dtypeInfo[t].bytes }

// RowBytes returns the bytes needed for a row of n elements, or an error if
// the type is unsupported or n is not a multiple of the block size.
func (t DType) RowBytes(n int) (int, error) {
	i, ok := dtypeInfo[t]
	if !ok {
		return 0, fmt.Errorf("%w: %v", ErrUnsupportedType, t)
	}
	if n < 0 || n%i.block != 0 {
		return 0, fmt.Errorf("gpu: row of %d elements is not a multiple of the %v block size %d", n, t, i.block)
	}
	return n / i.block * i.bytes, nil
}

// ParseDType returns the type with the given GGML name ("q8_0" or "Q8_0").
func ParseDType(name string) (DType, error) {
	for t, i := range dtypeInfo {
		if equalFold(i.name, name) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("%w: %q", ErrUnsupportedType, name)
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'a' <= x && x <= 'z' {
			x -= 'a' - 'A'
		}
		if 'a' <= y && y <= 'z' {
			y -= 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
