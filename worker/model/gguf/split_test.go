package gguf

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
)

// fiveTensors is a writer with five F32 tensors of distinct contents.
func fiveTensors(t *testing.T) (*Writer, map[string][]byte) {
	t.Helper()
	w := NewWriter()
	w.Set("general.architecture", "llama")
	w.Set("general.name", "split test")
	want := map[string][]byte{}
	for i := 0; i < 5; i++ {
		name := fmt.Sprintf("t%d", i)
		data := bytes.Repeat([]byte{byte(i + 1), 0, 0, 0}, 3*(i+1))
		if err := w.AddTensor(name, gpu.F32, []uint64{3, uint64(i + 1)}, data); err != nil {
			t.Fatal(err)
		}
		want[name] = data
	}
	return w, want
}

func TestOpenSplit(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			w, want := fiveTensors(t)
			prefix := filepath.Join(t.TempDir(), "model")
			paths, err := w.WriteSplit(prefix, n)
			if err != nil {
				t.Fatal(err)
			}
			if len(paths) != n || paths[0] != prefix+fmt.Sprintf("-00001-of-%05d.gguf", n) {
				t.Fatalf("paths %v", paths)
			}
			f, err := Open(paths[0])
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if len(f.Tensors) != 5 || len(f.Shards) != n-1 {
				t.Fatalf("%d tensors, %d other shards; want 5, %d", len(f.Tensors), len(f.Shards), n-1)
			}
			if s, _ := f.String("general.name"); s != "split test" {
				t.Errorf("general.name %q", s)
			}
			shards := map[int]bool{}
			for name, data := range want {
				ti, ok := f.Tensor(name)
				if !ok {
					t.Fatalf("tensor %s missing", name)
				}
				shards[ti.Shard] = true
				got, err := f.Data(ti)
				if err != nil || !bytes.Equal(got, data) {
					t.Errorf("tensor %s (shard %d): %v", name, ti.Shard, err)
				}
			}
			if len(shards) != n {
				t.Errorf("tensors spread over %d shards, want %d", len(shards), n)
			}
			if c := f.TypeCounts()[gpu.F32]; c != 5 {
				t.Errorf("TypeCounts F32 %d", c)
			}
			if n > 1 {
				// A later shard opened directly names the first.
				_, err := Open(paths[1])
				if err == nil || !strings.Contains(err.Error(), "open the first") || !strings.Contains(err.Error(), filepath.Base(paths[0])) {
					t.Errorf("opening shard 2: %v", err)
				}
				if !IsLaterShard(filepath.Base(paths[1])) || IsLaterShard(filepath.Base(paths[0])) {
					t.Error("IsLaterShard")
				}
			}
		})
	}
}

func TestOpenSplitMissingShard(t *testing.T) {
	t.Parallel()
	w, _ := fiveTensors(t)
	prefix := filepath.Join(t.TempDir(), "m")
	paths, err := w.WriteSplit(prefix, 3)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(paths[2])
	_, err = Open(paths[0])
	if !errors.Is(err, ErrMissingShard) || !strings.Contains(err.Error(), "m-00003-of-00003.gguf") {
		t.Fatalf("err %v, want ErrMissingShard naming m-00003-of-00003.gguf", err)
	}
}

func TestOpenSplitRenamed(t *testing.T) {
	t.Parallel()
	w, _ := fiveTensors(t)
	dir := t.TempDir()
	paths, err := w.WriteSplit(filepath.Join(dir, "m"), 2)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "renamed.gguf")
	if err := os.Rename(paths[0], other); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(other); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "split.count") {
		t.Fatalf("err %v", err)
	}
}

func TestSplitName(t *testing.T) {
	t.Parallel()
	p, no, c, ok := SplitName("/x/qwen-7b-00002-of-00004.gguf")
	if !ok || p != "/x/qwen-7b" || no != 2 || c != 4 {
		t.Errorf("got %q %d %d %v", p, no, c, ok)
	}
	for _, bad := range []string{"m.gguf", "m-00005-of-00004.gguf", "m-00000-of-00004.gguf", "m-1-of-2.gguf"} {
		if _, _, _, ok := SplitName(bad); ok {
			t.Errorf("%s parsed as a split name", bad)
		}
	}
}

// TestAlignment writes files with general.alignment 32 and 64 (and the
// default) and checks every tensor's data lies on the boundary and reads
// back whole.
func TestAlignment(t *testing.T) {
	t.Parallel()
	for _, align := range []uint32{0, 32, 64} {
		w, want := fiveTensors(t)
		if align != 0 {
			w.Set("general.alignment", align)
		}
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		f, err := Parse(buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		wantAlign := uint64(align)
		if align == 0 {
			wantAlign = DefaultAlignment
		}
		if f.Alignment != wantAlign || f.DataOffset%wantAlign != 0 {
			t.Fatalf("alignment %d: file says %d, data at %d", align, f.Alignment, f.DataOffset)
		}
		for name, data := range want {
			ti, _ := f.Tensor(name)
			if ti.Offset%wantAlign != 0 {
				t.Errorf("alignment %d: %s at offset %d", align, name, ti.Offset)
			}
			got, err := f.Data(ti)
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("alignment %d: tensor %s: %v", align, name, err)
			}
		}
	}
	// A tensor offset that is not a multiple of the alignment is an error.
	w, _ := fiveTensors(t)
	w.Set("general.alignment", uint32(64))
	var buf bytes.Buffer
	w.WriteTo(&buf)
	b := buf.Bytes()
	// Patch t1's offset (name, ndims, 2 dims, type, then offset) by +32.
	i := bytes.Index(b, []byte("t1")) + 2 + 4 + 16 + 4
	b[i] += 32
	if _, err := Parse(b); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "aligned to 64") {
		t.Fatalf("misaligned offset: %v", err)
	}
}
