package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/zerolayer/zerolayer/gpu"
)

// Writer builds a GGUF v3 file in memory order: metadata in the order set,
// tensors in the order added. Tests use it to generate models of any shape
// and tensor type.
type Writer struct {
	keys      []string
	vals      map[string]any
	tensors   []wtensor
	alignment uint64
}

type wtensor struct {
	name string
	dims []uint64
	typ  gpu.DType
	data []byte
}

// NewWriter returns an empty writer with the default alignment.
func NewWriter() *Writer {
	return &Writer{vals: map[string]any{}, alignment: DefaultAlignment}
}

// Set sets a metadata value. v must be one of the Go types File.Metadata
// holds (scalars, string, or a slice of them); an int is stored as int32
// and a []int as []int32. Setting a key twice replaces the value in place.
func (w *Writer) Set(key string, v any) {
	switch x := v.(type) {
	case int:
		v = int32(x)
	case []int:
		a := make([]int32, len(x))
		for i, e := range x {
			a[i] = int32(e)
		}
		v = a
	}
	if key == "general.alignment" {
		if a, ok := v.(uint32); ok {
			w.alignment = uint64(a)
		}
	}
	if _, ok := w.vals[key]; !ok {
		w.keys = append(w.keys, key)
	}
	w.vals[key] = v
}

// AddTensor appends a tensor. dims are fastest-varying first; data must hold
// exactly the tensor's bytes in type t.
func (w *Writer) AddTensor(name string, t gpu.DType, dims []uint64, data []byte) error {
	n := uint64(1)
	for _, d := range dims {
		n *= d
	}
	if len(dims) == 0 || len(dims) > maxDims {
		return fmt.Errorf("gguf: tensor %q: %d dimensions", name, len(dims))
	}
	rb, err := t.RowBytes(int(dims[0]))
	if err != nil {
		return fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	if want := uint64(rb) * (n / dims[0]); uint64(len(data)) != want {
		return fmt.Errorf("gguf: tensor %q: %d bytes of data, want %d", name, len(data), want)
	}
	w.tensors = append(w.tensors, wtensor{name, append([]uint64(nil), dims...), t, data})
	return nil
}

// WriteFile writes the file to path.
func (w *Writer) WriteFile(path string) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := w.WriteTo(fh); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

// WriteTo writes the file to out.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	e := &encoder{w: bufio.NewWriterSize(out, 1<<20)}
	e.u32(magic)
	e.u32(3)
	e.u64(uint64(len(w.tensors)))
	e.u64(uint64(len(w.keys)))
	for _, k := range w.keys {
		e.str(k)
		e.value(w.vals[k], true)
	}
	var off uint64
	for _, t := range w.tensors {
		e.str(t.name)
		e.u32(uint32(len(t.dims)))
		for _, d := range t.dims {
			e.u64(d)
		}
		e.u32(uint32(t.typ))
		e.u64(off)
		off = alignUp(off+uint64(len(t.data)), w.alignment)
	}
	e.pad(w.alignment)
	for _, t := range w.tensors {
		e.bytes(t.data)
		e.pad(w.alignment)
	}
	if e.err == nil {
		e.err = e.w.Flush()
	}
	return e.n, e.err
}

type encoder struct {
	w   *bufio.Writer
	n   int64
	err error
}

func (e *encoder) bytes(p []byte) {
	if e.err != nil {
		return
	}
	m, err := e.w.Write(p)
	e.n += int64(m)
	e.err = err
}

func (e *encoder) pad(a uint64) {
	if r := uint64(e.n) % a; r != 0 {
		e.bytes(make([]byte, a-r))
	}
}

func (e *encoder) u32(v uint32) { e.bytes(binary.LittleEndian.AppendUint32(nil, v)) }
func (e *encoder) u64(v uint64) { e.bytes(binary.LittleEndian.AppendUint64(nil, v)) }
func (e *encoder) str(s string) { e.u64(uint64(len(s))); e.bytes([]byte(s)) }

// value writes v, preceded by its type tag when tagged.
func (e *encoder) value(v any, tagged bool) {
	tag := func(t valueType) {
		if tagged {
			e.u32(uint32(t))
		}
	}
	switch x := v.(type) {
	case uint8:
		tag(tUint8)
		e.bytes([]byte{x})
	case int8:
		tag(tInt8)
		e.bytes([]byte{byte(x)})
	case uint16:
		tag(tUint16)
		e.bytes(binary.LittleEndian.AppendUint16(nil, x))
	case int16:
		tag(tInt16)
		e.bytes(binary.LittleEndian.AppendUint16(nil, uint16(x)))
	case uint32:
		tag(tUint32)
		e.u32(x)
	case int32:
		tag(tInt32)
		e.u32(uint32(x))
	case float32:
		tag(tFloat32)
		e.u32(math.Float32bits(x))
	case bool:
		tag(tBool)
		b := byte(0)
		if x {
			b = 1
		}
		e.bytes([]byte{b})
	case string:
		tag(tString)
		e.str(x)
	case uint64:
		tag(tUint64)
		e.u64(x)
	case int64:
		tag(tInt64)
		e.u64(uint64(x))
	case float64:
		tag(tFloat64)
		e.u64(math.Float64bits(x))
	case []uint8:
		writeArray(e, tagged, tUint8, x)
	case []int8:
		writeArray(e, tagged, tInt8, x)
	case []uint16:
		writeArray(e, tagged, tUint16, x)
	case []int16:
		writeArray(e, tagged, tInt16, x)
	case []uint32:
		writeArray(e, tagged, tUint32, x)
	case []int32:
		writeArray(e, tagged, tInt32, x)
	case []float32:
		writeArray(e, tagged, tFloat32, x)
	case []bool:
		writeArray(e, tagged, tBool, x)
	case []string:
		writeArray(e, tagged, tString, x)
	case []uint64:
		writeArray(e, tagged, tUint64, x)
	case []int64:
		writeArray(e, tagged, tInt64, x)
	case []float64:
		writeArray(e, tagged, tFloat64, x)
	default:
		if e.err == nil {
			e.err = fmt.Errorf("gguf: cannot encode metadata value of type %T", v)
		}
	}
}

func writeArray[T any](e *encoder, tagged bool, et valueType, xs []T) {
	if tagged {
		e.u32(uint32(tArray))
	}
	e.u32(uint32(et))
	e.u64(uint64(len(xs)))
	for _, x := range xs {
		e.value(x, false)
	}
}
