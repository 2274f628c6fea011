package modeltest

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// ArchCase is one case of a ref-<model>.txt file of shared/models/archs:
// llama.cpp's greedy ids, the logit margin (top1 − top2) of each step,
// and every logit of step 0.
type ArchCase struct {
	Prompt  []int32
	IDs     []int32   // greedy ids, one per step
	Margins []float64 // top1 − top2 logit of each step
	Logits0 []float32 // every logit of step 0
}

// ReadArchCases parses a ref-<model>.txt file of shared/models/archs (5
// cases of 40 steps; see its README).
func ReadArchCases(t testing.TB, path string) []ArchCase {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var refs []ArchCase
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<22)
	ints := func(fs []string) []int32 {
		var out []int32
		for _, s := range fs {
			v, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			out = append(out, int32(v))
		}
		return out
	}
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) == 0 {
			continue
		}
		if fs[0] == "CASE" {
			refs = append(refs, ArchCase{})
			continue
		}
		if len(refs) == 0 {
			t.Fatalf("%s: %q before the first CASE", path, fs[0])
		}
		r := &refs[len(refs)-1]
		switch fs[0] {
		case "PROMPT_IDS":
			r.Prompt = ints(fs[1:])
		case "GEN": // GEN step pos id piecehex
			if s := ints(fs[1:2])[0]; int(s) != len(r.IDs) {
				t.Fatalf("%s: GEN step %d after %d", path, s, len(r.IDs))
			}
			r.IDs = append(r.IDs, ints(fs[3:4])[0])
		case "MARGIN":
			v, err := strconv.ParseFloat(fs[2], 64)
			if err != nil {
				t.Fatal(err)
			}
			r.Margins = append(r.Margins, v)
		case "LOGITS0":
			for _, s := range fs[1:] {
				v, err := strconv.ParseFloat(s, 32)
				if err != nil {
					t.Fatal(err)
				}
				r.Logits0 = append(r.Logits0, float32(v))
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(refs) != 5 {
		t.Fatalf("%s: %d cases, want 5", path, len(refs))
	}
	for i, r := range refs {
		if len(r.Prompt) == 0 || len(r.IDs) != 40 || len(r.Margins) != len(r.IDs) || len(r.Logits0) == 0 {
			t.Fatalf("%s: case %d is incomplete: %d prompt ids, %d ids, %d margins, %d logits", path, i, len(r.Prompt), len(r.IDs), len(r.Margins), len(r.Logits0))
		}
	}
	return refs
}
