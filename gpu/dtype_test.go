package gpu

import "testing"

// The GGML names, ids and block geometry of the supported types
// (ggml-common.h), and the names the bench's --type flag parses.
func TestDTypeTable(t *testing.T) {
	want := []struct {
		t            DType
		id           uint32
		name         string
		block, bytes int
	}{
		{F32, 0, "F32", 1, 4}, {F16, 1, "F16", 1, 2}, {Q4_0, 2, "Q4_0", 32, 18},
		{Q4_1, 3, "Q4_1", 32, 20}, {Q5_0, 6, "Q5_0", 32, 22}, {Q5_1, 7, "Q5_1", 32, 24},
		{Q8_0, 8, "Q8_0", 32, 34}, {Q2_K, 10, "Q2_K", 256, 84}, {Q3_K, 11, "Q3_K", 256, 110},
		{Q4_K, 12, "Q4_K", 256, 144}, {Q5_K, 13, "Q5_K", 256, 176}, {Q6_K, 14, "Q6_K", 256, 210},
		{BF16, 30, "BF16", 1, 2},
	}
	if len(want) != len(DTypes) {
		t.Errorf("%d types listed, DTypes has %d", len(want), len(DTypes))
	}
	for _, w := range want {
		if uint32(w.t) != w.id || w.t.String() != w.name || w.t.BlockSize() != w.block || w.t.BlockBytes() != w.bytes || !w.t.Supported() {
			t.Errorf("%v: id %d block %d bytes %d, want %s id %d block %d bytes %d", w.t, uint32(w.t), w.t.BlockSize(), w.t.BlockBytes(), w.name, w.id, w.block, w.bytes)
		}
		for _, n := range []string{w.name, lower(w.name)} {
			if p, err := ParseDType(n); err != nil || p != w.t {
				t.Errorf("ParseDType(%q) = %v, %v", n, p, err)
			}
		}
	}
	if DType(23).Supported() || DType(23).String() != "IQ4_XS" {
		t.Errorf("IQ4_XS: %v %v", DType(23).Supported(), DType(23))
	}
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
