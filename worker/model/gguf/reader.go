package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"sort"

	"github.com/zerolayer/zerolayer/gpu"
)

const magic = 0x46554747 // "GGUF" little endian

// DefaultAlignment is the tensor data alignment when general.alignment is absent.
const DefaultAlignment = 32

// maxDims bounds the number of dimensions of a tensor (GGML uses 4).
const maxDims = 4

// TensorInfo describes one tensor of the file.
type TensorInfo struct {
	Name string
	// Dims lists the dimensions fastest-varying first, as GGUF stores them:
	// a weight matrix with Dims [cols, rows] has rows of cols elements.
	Dims []uint64
	Type gpu.DType
	// Offset is the byte offset of the data from the start of the data section.
	Offset uint64
	// Size is the byte size of the data.
	Size uint64
	// Shard is the index of the split file holding the data (0 for the
	// file opened, or a file that is not split; see OpenSplit).
	Shard int
}

// Elements is the product of the dimensions.
func (t *TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// File is an opened GGUF file. Tensor data is memory-mapped where the
// platform allows it and stays valid until Close.
type File struct {
	Version uint32
	// Metadata maps keys to values decoded to Go types: uint8, int8,
	// uint16, int16, uint32, int32, uint64, int64, float32, float64, bool,
	// string, or a slice of one of them ([]string, []float32, []int32, ...;
	// nested arrays as []any).
	Metadata map[string]any
	// Keys lists the metadata keys in file order.
	Keys    []string
	Tensors []TensorInfo
	// Alignment is the data alignment in bytes.
	Alignment uint64
	// DataOffset is the file offset of the tensor data section.
	DataOffset uint64

	// Shards are the other files of a split model (NAME-0000k-of-0000N),
	// in order; empty for a single file. Tensors with Shard k > 0 live in
	// Shards[k-1].
	Shards []*File

	byName map[string]int
	data   []byte // the whole file
	unmap  func() error
}

// Open maps the file at path and decodes its header, metadata and tensor
// infos. Malformed files give errors wrapping ErrFormat; nothing panics and
// no allocation exceeds what the file's own size allows.
//
// A split model (gguf-split's NAME-00001-of-0000N.gguf, whose first file
// holds the metadata and split.count > 1) is opened as one File: the other
// shards are opened too and their tensors merged in (see openShards). A
// missing shard is an error naming it.
func Open(path string) (*File, error) {
	f, err := openOne(path)
	if err != nil {
		return nil, err
	}
	if err := f.openShards(path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func openOne(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	data, unmap, err := mapFile(fh, st.Size())
	if err != nil {
		return nil, fmt.Errorf("gguf: map %s: %w", path, err)
	}
	f, err := Parse(data)
	if err != nil {
		unmap()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.unmap = unmap
	return f, nil
}

// Close releases the mapping; tensor data must not be used afterwards.
func (f *File) Close() error {
	var err error
	for _, s := range f.Shards {
		if e := s.Close(); err == nil {
			err = e
		}
	}
	f.Shards = nil
	if f.unmap == nil {
		return err
	}
	if e := f.unmap(); err == nil {
		err = e
	}
	f.unmap, f.data = nil, nil
	return err
}

// Parse decodes a GGUF file held in memory. The returned File's tensor data
// aliases b.
func Parse(b []byte) (*File, error) {
	d := &decoder{b: b}
	if d.u32("magic") != magic {
		if d.err == nil {
			return nil, &FormatError{0, "magic", "not a GGUF file (expected \"GGUF\")"}
		}
		return nil, d.err
	}
	f := &File{Version: d.u32("version"), Metadata: map[string]any{}, byName: map[string]int{}}
	if d.err != nil {
		return nil, d.err
	}
	if f.Version != 2 && f.Version != 3 {
		return nil, fmt.Errorf("%w: %d (supported: 2, 3)", ErrVersion, f.Version)
	}
	nTensors := d.u64("tensor count")
	nKV := d.u64("metadata count")
	if d.err != nil {
		return nil, d.err
	}
	// Every KV needs at least 12 bytes and every tensor info at least 24.
	if nKV > uint64(d.remaining())/12 || nTensors > uint64(d.remaining())/24 {
		return nil, d.fail("header", fmt.Sprintf("%d tensors and %d metadata entries cannot fit in %d bytes", nTensors, nKV, len(b)))
	}
	for i := uint64(0); i < nKV; i++ {
		key := d.str("metadata key")
		t := valueType(d.u32("metadata type"))
		v := d.value(t, key, 0)
		if d.err != nil {
			return nil, d.err
		}
		if _, dup := f.Metadata[key]; dup {
			return nil, d.fail(key, "duplicate metadata key")
		}
		f.Metadata[key] = v
		f.Keys = append(f.Keys, key)
	}
	f.Alignment = DefaultAlignment
	if a, ok := f.Uint("general.alignment"); ok {
		if a == 0 || a&(a-1) != 0 || a > 1<<20 {
			return nil, d.fail("general.alignment", fmt.Sprintf("alignment %d is not a power of two up to 1 MiB", a))
		}
		f.Alignment = a
	}
	f.Tensors = make([]TensorInfo, 0, nTensors)
	for i := uint64(0); i < nTensors; i++ {
		var ti TensorInfo
		ti.Name = d.str("tensor name")
		nd := d.u32("tensor dims")
		if d.err == nil && (nd == 0 || nd > maxDims) {
			return nil, d.fail(ti.Name, fmt.Sprintf("%d dimensions (1..%d supported)", nd, maxDims))
		}
		for j := uint32(0); j < nd && d.err == nil; j++ {
			ti.Dims = append(ti.Dims, d.u64("tensor dim"))
		}
		ti.Type = gpu.DType(d.u32("tensor type"))
		ti.Offset = d.u64("tensor offset")
		if d.err != nil {
			return nil, d.err
		}
		if _, dup := f.byName[ti.Name]; dup {
			return nil, d.fail(ti.Name, "duplicate tensor name")
		}
		f.byName[ti.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, ti)
	}
	f.DataOffset = alignUp(uint64(d.off), f.Alignment)
	if f.DataOffset > uint64(len(b)) && nTensors > 0 {
		return nil, d.fail("tensor data", "file ends before the data section")
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if err := f.sizeTensor(ti, uint64(len(b))); err != nil {
			return nil, err
		}
	}
	f.data = b
	return f, nil
}

// sizeTensor computes ti.Size and checks the tensor lies inside the file.
func (f *File) sizeTensor(ti *TensorInfo, fileLen uint64) error {
	n := uint64(1)
	for _, dim := range ti.Dims {
		if dim == 0 {
			n = 0
			continue
		}
		if n > math.MaxInt64/dim {
			return &FormatError{int64(f.DataOffset), ti.Name, "element count overflows"}
		}
		n *= dim
	}
	if !ti.Type.Supported() {
		// Unsupported types are reported when the tensor is used, so that
		// metadata-only tools can still list the file.
		ti.Size = 0
		return nil
	}
	if ti.Dims[0]%uint64(ti.Type.BlockSize()) != 0 {
		return &FormatError{int64(f.DataOffset), ti.Name, fmt.Sprintf("row length %d is not a multiple of the %v block size %d", ti.Dims[0], ti.Type, ti.Type.BlockSize())}
	}
	ti.Size = n / uint64(ti.Type.BlockSize()) * uint64(ti.Type.BlockBytes())
	if ti.Offset%f.Alignment != 0 {
		return &FormatError{int64(f.DataOffset), ti.Name, fmt.Sprintf("data offset %d is not aligned to %d", ti.Offset, f.Alignment)}
	}
	end := f.DataOffset + ti.Offset
	if end < f.DataOffset || end+ti.Size < end || end+ti.Size > fileLen {
		return &FormatError{int64(f.DataOffset), ti.Name, fmt.Sprintf("data [%d, +%d) lies past the end of the file (%d bytes): truncated?", end, ti.Size, fileLen)}
	}
	return nil
}

// Tensor returns the info of the named tensor.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// Data returns the bytes of a tensor. It fails for types this build cannot
// decode, naming the type.
func (f *File) Data(ti *TensorInfo) ([]byte, error) {
	if !ti.Type.Supported() {
		return nil, fmt.Errorf("%w: tensor %q has type %v", gpu.ErrUnsupportedType, ti.Name, ti.Type)
	}
	src := f
	if ti.Shard > 0 {
		if ti.Shard > len(f.Shards) {
			return nil, fmt.Errorf("gguf: tensor %q is in split file %d, which is not open", ti.Name, ti.Shard+1)
		}
		src = f.Shards[ti.Shard-1]
	}
	if src.data == nil {
		return nil, fmt.Errorf("gguf: file is closed")
	}
	start := src.DataOffset + ti.Offset
	return src.data[start : start+ti.Size : start+ti.Size], nil
}

// TypeCounts returns how many tensors of each type the file holds, for
// listings ("Q4_K ×97, Q6_K ×12, F32 ×45").
func (f *File) TypeCounts() map[gpu.DType]int {
	m := map[gpu.DType]int{}
	for _, t := range f.Tensors {
		m[t.Type]++
	}
	return m
}

// SortedTypes returns the keys of TypeCounts in a stable order.
func SortedTypes(m map[gpu.DType]int) []gpu.DType {
	ts := make([]gpu.DType, 0, len(m))
	for t := range m {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	return ts
}

func alignUp(x, a uint64) uint64 { return (x + a - 1) / a * a }

// decoder reads little-endian values from b; the first error sticks.
type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) remaining() int { return len(d.b) - d.off }

func (d *decoder) fail(what, reason string) error {
	if d.err == nil {
		d.err = &FormatError{int64(d.off), what, reason}
	}
	return d.err
}

func (d *decoder) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > d.remaining() {
		d.fail(what, fmt.Sprintf("needs %d bytes, %d left: truncated", n, d.remaining()))
		return nil
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p
}

func (d *decoder) u8(what string) uint8 {
	if p := d.take(1, what); p != nil {
		return p[0]
	}
	return 0
}

func (d *decoder) u16(what string) uint16 {
	if p := d.take(2, what); p != nil {
		return binary.LittleEndian.Uint16(p)
	}
	return 0
}

func (d *decoder) u32(what string) uint32 {
	if p := d.take(4, what); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (d *decoder) u64(what string) uint64 {
	if p := d.take(8, what); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (d *decoder) str(what string) string {
	n := d.u64(what)
	if d.err != nil {
		return ""
	}
	if n > uint64(d.remaining()) {
		d.fail(what, fmt.Sprintf("string of %d bytes, %d left: truncated", n, d.remaining()))
		return ""
	}
	return string(d.take(int(n), what))
}

// maxNesting bounds nested arrays.
const maxNesting = 4

func (d *decoder) value(t valueType, key string, depth int) any {
	switch t {
	case tUint8:
		return d.u8(key)
	case tInt8:
		return int8(d.u8(key))
	case tUint16:
		return d.u16(key)
	case tInt16:
		return int16(d.u16(key))
	case tUint32:
		return d.u32(key)
	case tInt32:
		return int32(d.u32(key))
	case tFloat32:
		return math.Float32frombits(d.u32(key))
	case tBool:
		v := d.u8(key)
		if v > 1 {
			d.fail(key, fmt.Sprintf("bool byte %d", v))
		}
		return v == 1
	case tString:
		return d.str(key)
	case tUint64:
		return d.u64(key)
	case tInt64:
		return int64(d.u64(key))
	case tFloat64:
		return math.Float64frombits(d.u64(key))
	case tArray:
		return d.array(key, depth)
	}
	d.fail(key, fmt.Sprintf("unknown value type %d", t))
	return nil
}

func (d *decoder) array(key string, depth int) any {
	et := valueType(d.u32(key))
	n := d.u64(key)
	if d.err != nil {
		return nil
	}
	if depth >= maxNesting {
		d.fail(key, "arrays nested too deeply")
		return nil
	}
	min := et.fixedSize()
	switch {
	case min < 0:
		d.fail(key, fmt.Sprintf("unknown array element type %d", et))
		return nil
	case min == 0:
		min = 8 // a string or array header
		if et == tArray {
			min = 12
		}
	}
	if n > uint64(d.remaining()/min) {
		d.fail(key, fmt.Sprintf("array of %d elements cannot fit in %d bytes: truncated", n, d.remaining()))
		return nil
	}
	cnt := int(n)
	switch et {
	case tUint8:
		return fill(d, cnt, func() uint8 { return d.u8(key) })
	case tInt8:
		return fill(d, cnt, func() int8 { return int8(d.u8(key)) })
	case tUint16:
		return fill(d, cnt, func() uint16 { return d.u16(key) })
	case tInt16:
		return fill(d, cnt, func() int16 { return int16(d.u16(key)) })
	case tUint32:
		return fill(d, cnt, func() uint32 { return d.u32(key) })
	case tInt32:
		return fill(d, cnt, func() int32 { return int32(d.u32(key)) })
	case tFloat32:
		return fill(d, cnt, func() float32 { return math.Float32frombits(d.u32(key)) })
	case tBool:
		return fill(d, cnt, func() bool { return d.u8(key) != 0 })
	case tString:
		return fill(d, cnt, func() string { return d.str(key) })
	case tUint64:
		return fill(d, cnt, func() uint64 { return d.u64(key) })
	case tInt64:
		return fill(d, cnt, func() int64 { return int64(d.u64(key)) })
	case tFloat64:
		return fill(d, cnt, func() float64 { return math.Float64frombits(d.u64(key)) })
	default:
		return fill(d, cnt, func() any { return d.array(key, depth+1) })
	}
}

func fill[T any](d *decoder, n int, next func() T) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = next()
		if d.err != nil {
			return nil
		}
	}
	return out
}
