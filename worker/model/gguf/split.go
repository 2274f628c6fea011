package gguf

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"

	"github.com/zerolayer/zerolayer/gpu"
)

// The metadata keys of a split model, as llama.cpp's gguf-split writes
// them: every shard carries them; the first also holds all other metadata.
const (
	KeySplitNo           = "split.no"            // 0-based index of this file
	KeySplitCount        = "split.count"         // number of files
	KeySplitTensorsCount = "split.tensors.count" // tensors over all files
)

// ErrMissingShard is returned when a file of a split model is absent.
var ErrMissingShard = errors.New("gguf: split model file missing")

var splitName = regexp.MustCompile(`^(.*)-([0-9]{5})-of-([0-9]{5})\.gguf$`)

// SplitName parses a split file name ("m-00002-of-00003.gguf", or a path
// ending in one): its prefix ("m"), 1-based number and count. ok is false
// for other names.
func SplitName(path string) (prefix string, no, count int, ok bool) {
	m := splitName.FindStringSubmatch(path)
	if m == nil {
		return "", 0, 0, false
	}
	no, _ = strconv.Atoi(m[2])
	count, _ = strconv.Atoi(m[3])
	if no < 1 || count < 1 || no > count {
		return "", 0, 0, false
	}
	return m[1], no, count, true
}

// ShardPath is the path of file no (1-based) of count of a split model.
func ShardPath(prefix string, no, count int) string {
	return fmt.Sprintf("%s-%05d-of-%05d.gguf", prefix, no, count)
}

// IsLaterShard reports whether the name is a split file other than the
// first: listings show a split model once, by its first file.
func IsLaterShard(name string) bool {
	_, no, _, ok := SplitName(name)
	return ok && no > 1
}

// openShards opens the other files of a split model whose first file f was
// opened from path, and merges their tensors into f. It does nothing for a
// file that is not split.
func (f *File) openShards(path string) error {
	count, ok := f.Uint(KeySplitCount)
	if !ok || count <= 1 {
		return nil
	}
	no, _ := f.Uint(KeySplitNo)
	prefix, pno, pcount, named := SplitName(path)
	if no != 0 {
		if named {
			return fmt.Errorf("%s is file %d of a split model of %d: open the first, %s", path, no+1, count, ShardPath(prefix, 1, pcount))
		}
		return fmt.Errorf("%s is file %d of a split model of %d: open the first", path, no+1, count)
	}
	if !named || pno != 1 || uint64(pcount) != count {
		return fmt.Errorf("%w: %s: split.count is %d, but the name is not NAME-00001-of-%05d.gguf, so the other files cannot be found", ErrFormat, path, count, count)
	}
	if count > 10000 {
		return fmt.Errorf("%w: %s: split.count %d", ErrFormat, path, count)
	}
	for k := 1; k < int(count); k++ {
		sp := ShardPath(prefix, k+1, int(count))
		s, err := openOne(sp)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%w: %s (file %d of %d of %s)", ErrMissingShard, sp, k+1, count, path)
			}
			return err
		}
		f.Shards = append(f.Shards, s)
		if sno, ok := s.Uint(KeySplitNo); !ok || sno != uint64(k) {
			return fmt.Errorf("%w: %s: split.no is %d, want %d", ErrFormat, sp, sno, k)
		}
		if sc, ok := s.Uint(KeySplitCount); !ok || sc != count {
			return fmt.Errorf("%w: %s: split.count is %d, want %d as in %s", ErrFormat, sp, sc, count, path)
		}
		for _, ti := range s.Tensors {
			if _, dup := f.byName[ti.Name]; dup {
				return fmt.Errorf("%w: %s: tensor %s is also in an earlier file", ErrFormat, sp, ti.Name)
			}
			ti.Shard = k
			f.byName[ti.Name] = len(f.Tensors)
			f.Tensors = append(f.Tensors, ti)
		}
	}
	if want, ok := f.Uint(KeySplitTensorsCount); ok && want != uint64(len(f.Tensors)) {
		return fmt.Errorf("%w: %s: split.tensors.count is %d, the %d files hold %d tensors", ErrFormat, path, want, count, len(f.Tensors))
	}
	return nil
}

// AddRawTensor appends a tensor without checking its type or data size:
// tests use it to write files with types this build cannot run.
func (w *Writer) AddRawTensor(name string, t gpu.DType, dims []uint64, data []byte) {
	w.tensors = append(w.tensors, wtensor{name, append([]uint64(nil), dims...), t, data})
}

// WriteSplit writes the model as n files prefix-00001-of-0000n.gguf …, as
// gguf-split does: the first holds all the metadata and the split keys, the
// others only the split keys; the tensors are dealt out in order, about
// len/n to each file (the first file gets at least one when there are
// tensors). It returns the paths.
func (w *Writer) WriteSplit(prefix string, n int) ([]string, error) {
	if n < 1 {
		return nil, fmt.Errorf("gguf: split into %d files", n)
	}
	per := (len(w.tensors) + n - 1) / n
	var paths []string
	for k := 0; k < n; k++ {
		sw := &Writer{vals: map[string]any{}, alignment: w.alignment}
		if k == 0 {
			for _, key := range w.keys {
				sw.Set(key, w.vals[key])
			}
		} else if a, ok := w.vals["general.alignment"]; ok {
			sw.Set("general.alignment", a)
		}
		sw.Set(KeySplitNo, uint16(k))
		sw.Set(KeySplitCount, uint16(n))
		sw.Set(KeySplitTensorsCount, int32(len(w.tensors)))
		lo, hi := min(k*per, len(w.tensors)), min((k+1)*per, len(w.tensors))
		sw.tensors = w.tensors[lo:hi]
		p := ShardPath(prefix, k+1, n)
		if err := sw.WriteFile(p); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// Get returns a metadata value set on the writer.
func (w *Writer) Get(key string) (any, bool) {
	v, ok := w.vals[key]
	return v, ok
}
