package tools

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/zerolayer/zerolayer/contracts"
)

// budgetSalt makes each compile of these tests a compile-cache miss (the
// budget is part of the key, and MaxDFAStates above the states these
// patterns reach changes nothing else), so a first Mask walks the whole
// trie and spends its full fuel.
var budgetSalt atomic.Int64

func freshBudget(b Budget) Budget {
	b.MaxDFAStates = 20_000 + int(budgetSalt.Add(1))
	return b
}

func inPool(t contracts.Tool, id string) contracts.Tool {
	t.ContextID = id
	return t
}

// firstMaskFuel is the least step fuel with which the first Mask of a
// fresh compile of spec succeeds.
func firstMaskFuel(t *testing.T, spec contracts.Tool) int64 {
	t.Helper()
	ok := func(f int64) bool {
		set := mustCompile(t, fake, freshBudget(Budget{MaxStepFuel: f}), spec)
		_, err := set.NewRun().Mask(make([]uint64, set.vi.Words))
		return err == nil
	}
	lo, hi := int64(1), int64(1<<20)
	if !ok(hi) {
		t.Fatalf("%s: a first mask needs more than %d steps", spec.Name, hi)
	}
	for lo < hi {
		mid := (lo + hi) / 2
		if ok(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// TestContextPoolsFuel: tools of one pool share one step fuel per call,
// so the second tool of a call can be starved by the first; with
// separate context_ids each has its own, and neither fails.
func TestContextPoolsFuel(t *testing.T) {
	t.Parallel()
	regex := tool(contracts.ToolRegexMatcher, map[string]any{"pattern": "[a-z]+x[0-9]*"})
	xml := tool(contracts.ToolXMLValidator, map[string]any{"allowed_tags": []string{"b", "i"}})
	fr, fx := firstMaskFuel(t, regex), firstMaskFuel(t, xml)
	fuel := max(fr, fx) // each alone fits, both together do not
	t.Logf("first mask: regex_matcher %d steps, xml_validator %d; budget %d", fr, fx, fuel)

	set := mustCompile(t, fake, freshBudget(Budget{MaxStepFuel: fuel}), regex, xml)
	r := set.NewRun()
	_, err := r.Mask(make([]uint64, set.vi.Words))
	var ce *contracts.Error
	if !errors.As(err, &ce) || ce.ToolCode != ToolStepBudget || ce.Tool != "xml_validator" {
		t.Fatalf("one pool: want xml_validator starved (TOOL_STEP_BUDGET), got %v", err)
	}
	// on_tool_failure retry_without_tool: the starved tool is dropped,
	// the other goes on.
	r.DropFailed()
	r.Reset()
	if _, err := r.Mask(make([]uint64, set.vi.Words)); err != nil {
		t.Fatalf("after dropping the starved tool: %v", err)
	}

	set = mustCompile(t, fake, freshBudget(Budget{MaxStepFuel: fuel}), inPool(regex, "extract"), inPool(xml, "markup"))
	r = set.NewRun()
	mask := make([]uint64, set.vi.Words)
	if c, err := r.Mask(mask); err != nil || !c {
		t.Fatalf("separate pools: %v", err)
	}
	if id := fake.id("ab"); !vocabHas(mask, id) || r.Accept(id) != nil {
		t.Fatal("separate pools: both constraints allow \"ab\"")
	}
	if len(r.pools) != 2 || r.st[0].pool == r.st[1].pool {
		t.Fatalf("pools %+v", r.pools)
	}
}

// TestContextPoolsMemory: the tools of one pool are capped together by
// MaxMemoryBytes; in separate pools each has the whole cap, so the one
// that would exhaust a shared pool fails nothing.
func TestContextPoolsMemory(t *testing.T) {
	t.Parallel()
	a := tool(contracts.ToolRegexMatcher, map[string]any{"pattern": "[a-z]+q[0-9]*"})
	b := tool(contracts.ToolRegexMatcher, map[string]any{"pattern": "[a-z]+w[0-9]*"})
	const capBytes = 2000
	set := mustCompile(t, fake, freshBudget(Budget{MaxMemoryBytes: capBytes}), inPool(a, "a"), inPool(b, "b"))
	r := set.NewRun()
	if _, err := r.Mask(make([]uint64, set.vi.Words)); err != nil {
		t.Fatalf("separate pools: %v", err)
	}
	ma, mb := set.tools[0].memBytes(), set.tools[1].memBytes()
	t.Logf("after a first mask: %d and %d bytes, cap %d", ma, mb, capBytes)
	if ma > capBytes || mb > capBytes || ma+mb <= capBytes {
		t.Fatalf("the test needs each tool under the cap and both over it: %d + %d, cap %d", ma, mb, capBytes)
	}

	set = mustCompile(t, fake, freshBudget(Budget{MaxMemoryBytes: capBytes}), inPool(a, "shared"), inPool(b, "shared"))
	r = set.NewRun()
	_, err := r.Mask(make([]uint64, set.vi.Words))
	var ce *contracts.Error
	if !errors.As(err, &ce) || ce.ToolCode != contracts.ToolMemoryExhausted || !strings.Contains(ce.Message, `context pool "shared"`) {
		t.Fatalf("one pool: want TOOL_MEMORY_EXHAUSTED for the pool, got %v", err)
	}
	if f := r.Failure(); f == nil || f.ToolCode != contracts.ToolMemoryExhausted {
		t.Fatalf("Failure() = %v", f)
	}

	// The default pool caps each tool alone, as before pools existed.
	set = mustCompile(t, fake, freshBudget(Budget{MaxMemoryBytes: capBytes}), a, b)
	if _, err := set.NewRun().Mask(make([]uint64, set.vi.Words)); err != nil {
		t.Fatalf("default pool: %v", err)
	}
}

// TestContextPoolsCompileApart: the compile cache keeps one compiled copy
// per context_id, so pools never share automata, mask caches or a memory
// meter; the same declaration in the same pool is a cache hit.
func TestContextPoolsCompileApart(t *testing.T) {
	t.Parallel()
	spec := tool(contracts.ToolRegexMatcher, map[string]any{"pattern": "pool-[0-9]+"})
	b := freshBudget(Budget{})
	s1 := mustCompile(t, fake, b, inPool(spec, "x"), inPool(spec, "y"), spec)
	if s1.tools[0].regex == s1.tools[1].regex || s1.tools[0].regex == s1.tools[2].regex {
		t.Fatal("tools of different pools share a compiled copy")
	}
	s2 := mustCompile(t, fake, b, inPool(spec, "y"))
	if s2.CacheHits() != 1 || s2.tools[0].regex != s1.tools[1].regex {
		t.Fatal("the same pool's declaration is not a cache hit")
	}
}

func vocabHas(mask []uint64, id int32) bool { return mask[id/64]&(1<<(id%64)) != 0 }
