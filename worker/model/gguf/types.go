package gguf

// valueType is the GGUF metadata value type tag.
type valueType uint32

const (
	tUint8   valueType = 0
	tInt8    valueType = 1
	tUint16  valueType = 2
	tInt16   valueType = 3
	tUint32  valueType = 4
	tInt32   valueType = 5
	tFloat32 valueType = 6
	tBool    valueType = 7
	tString  valueType = 8
	tArray   valueType = 9
	tUint64  valueType = 10
	tInt64   valueType = 11
	tFloat64 valueType = 12
)

// fixedSize is the encoded size of a scalar type, 0 for strings and arrays,
// -1 for unknown tags.
func (t valueType) fixedSize() int {
	switch t {
	case tUint8, tInt8, tBool:
		return 1
	case tUint16, tInt16:
		return 2
	case tUint32, tInt32, tFloat32:
		return 4
	case tUint64, tInt64, tFloat64:
		return 8
	case tString, tArray:
		return 0
	}
	return -1
}
