package gguf

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
)

func sharedPath(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join("..", "..", "..", "..", "shared", rel)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared fixture %s not present: %v", rel, err)
	}
	return p
}

func TestOpenStories260K(t *testing.T) {
	t.Parallel()
	f, err := Open(sharedPath(t, "models/stories260K/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Version != 3 || len(f.Tensors) != 48 || len(f.Keys) != 19 {
		t.Fatalf("version %d, %d tensors, %d keys; want 3, 48, 19", f.Version, len(f.Tensors), len(f.Keys))
	}
	if f.DataOffset != 14176 {
		t.Errorf("data offset %d, want 14176", f.DataOffset)
	}
	if f.Architecture() != "llama" {
		t.Errorf("arch %q", f.Architecture())
	}
	toks, ok := f.Strings("tokenizer.ggml.tokens")
	if !ok || len(toks) != 512 {
		t.Fatalf("tokens: %d %v", len(toks), ok)
	}
	ti, ok := f.Tensor("blk.0.attn_k.weight")
	if !ok || !reflect.DeepEqual(ti.Dims, []uint64{64, 32}) || ti.Type != gpu.F32 {
		t.Fatalf("attn_k: %+v", ti)
	}
	data, err := f.Data(ti)
	if err != nil || len(data) != 64*32*4 {
		t.Fatalf("data %d %v", len(data), err)
	}
	if n, ok := f.Uint("llama.embedding_length"); !ok || n != 64 {
		t.Errorf("embedding_length %d %v", n, ok)
	}
}

func TestWriterRoundTrip(t *testing.T) {
	t.Parallel()
	w := NewWriter()
	meta := map[string]any{
		"general.architecture": "llama",
		"u8":                   uint8(7),
		"i8":                   int8(-7),
		"u16":                  uint16(700),
		"i16":                  int16(-700),
		"u32":                  uint32(70000),
		"i32":                  int32(-70000),
		"u64":                  uint64(1 << 40),
		"i64":                  int64(-1 << 40),
		"f32":                  float32(1.5),
		"f64":                  2.25,
		"b":                    true,
		"strs":                 []string{"a", "", "ünï"},
		"f32s":                 []float32{1, -2, 3.5},
		"i32s":                 []int32{1, -2, 3},
		"u8s":                  []uint8{1, 2},
	}
	for k, v := range meta {
		w.Set(k, v)
	}
	a := bytes.Repeat([]byte{1, 2, 3, 4}, 8*3)
	b := bytes.Repeat([]byte{9}, 34*2)
	if err := w.AddTensor("a", gpu.F32, []uint64{8, 3}, a); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("b", gpu.Q8_0, []uint64{64}, b); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("bad", gpu.Q8_0, []uint64{33}, b); err == nil {
		t.Fatal("AddTensor accepted a row that is not a multiple of the block size")
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.Metadata, meta) {
		t.Fatalf("metadata mismatch:\n got %v\nwant %v", f.Metadata, meta)
	}
	for name, want := range map[string][]byte{"a": a, "b": b} {
		ti, _ := f.Tensor(name)
		got, err := f.Data(ti)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("tensor %s: %v", name, err)
		}
		if (f.DataOffset+ti.Offset)%f.Alignment != 0 {
			t.Errorf("tensor %s misaligned", name)
		}
	}
}

func TestMalformed(t *testing.T) {
	t.Parallel()
	w := NewWriter()
	w.Set("general.architecture", "llama")
	w.Set("tokens", []string{"x", "y"})
	if err := w.AddTensor("a", gpu.F32, []uint64{4, 4}, make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w.WriteTo(&buf)
	good := buf.Bytes()
	// Every truncation is an error, never a panic.
	for n := 0; n < len(good); n++ {
		if _, err := Parse(good[:n]); err == nil {
			t.Fatalf("truncated to %d bytes: no error", n)
		}
	}
	tests := []struct {
		name    string
		mutate  func([]byte)
		wantErr error
	}{
		{"bad magic", func(b []byte) { b[0] = 'X' }, ErrFormat},
		{"version 1", func(b []byte) { b[4] = 1 }, ErrVersion},
		{"huge tensor count", func(b []byte) { b[15] = 0x7f }, ErrFormat},
		{"huge kv count", func(b []byte) { b[23] = 0x7f }, ErrFormat},
	}
	for _, tt := range tests {
		b := bytes.Clone(good)
		tt.mutate(b)
		if _, err := Parse(b); !errors.Is(err, tt.wantErr) {
			t.Errorf("%s: err %v, want %v", tt.name, err, tt.wantErr)
		}
	}
}

func TestUnsupportedTensorType(t *testing.T) {
	t.Parallel()
	w := NewWriter()
	w.AddTensor("a", gpu.F32, []uint64{4}, make([]byte, 16))
	var buf bytes.Buffer
	w.WriteTo(&buf)
	b := buf.Bytes()
	// Patch the type id of tensor "a" (after name, ndims, dims) to IQ4_XS (23).
	i := bytes.Index(b, []byte("a")) + 1 + 4 + 8
	b[i] = 23
	f, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Data(&f.Tensors[0]); !errors.Is(err, gpu.ErrUnsupportedType) || !bytes.Contains([]byte(err.Error()), []byte("IQ4_XS")) {
		t.Fatalf("err %v, want unsupported IQ4_XS", err)
	}
}

func FuzzParse(f *testing.F) {
	w := NewWriter()
	w.Set("general.architecture", "llama")
	w.Set("arr", []string{"a", "bc"})
	w.Set("n", uint32(3))
	w.AddTensor("t", gpu.F32, []uint64{2, 2}, make([]byte, 16))
	var buf bytes.Buffer
	w.WriteTo(&buf)
	f.Add(buf.Bytes())
	f.Add([]byte("GGUF"))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrVersion) {
				t.Fatalf("error not classified: %v", err)
			}
			return
		}
		for i := range file.Tensors {
			file.Data(&file.Tensors[i])
		}
	})
}
