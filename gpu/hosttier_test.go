package gpu

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// sliceKV is an arena in a slice, for host tier tests.
type sliceKV struct {
	cfg  KVConfig
	data []float32
}

func newSliceKV(blocks int) *sliceKV {
	cfg := KVConfig{Layers: 2, KVDim: 256, BlockTokens: 16, Blocks: blocks} // 64 KiB blocks: allocated whole from the heap's pages
	return &sliceKV{cfg: cfg, data: make([]float32, blocks*cfg.BlockFloats())}
}

func (k *sliceKV) Config() KVConfig { return k.cfg }
func (k *sliceKV) bytes() []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(k.data))), 4*len(k.data))
}
func (k *sliceKV) ReadBlock(b int, dst []byte) {
	bb := int(k.cfg.BlockBytes())
	copy(dst[:bb], k.bytes()[b*bb:(b+1)*bb])
}
func (k *sliceKV) WriteBlock(b int, src []byte) {
	bb := int(k.cfg.BlockBytes())
	copy(k.bytes()[b*bb:(b+1)*bb], src[:bb])
}

func minorFaults(t *testing.T) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Skip("no getrusage:", err)
	}
	return ru.Minflt
}

// TestHostTierCommitsAhead: once the tier's first slots are used, the
// next commitAhead slots are committed in the background, so that filling
// them faults (almost) no page; where the tier allocated slots on first
// use, every page faulted inside the step that swapped out.
func TestHostTierCommitsAhead(t *testing.T) {
	// The faults are the process's: on a machine busy with the rest of
	// the suite another goroutine's (the GC's) may land in the count, so
	// the fill is measured on up to three fresh tiers and the best taken.
	var faults []string
	for range 3 {
		msg := hostTierFillFaults(t)
		if msg == "" {
			return
		}
		faults = append(faults, msg)
	}
	t.Errorf("on three tiers: %s", strings.Join(faults, "; "))
}

// hostTierFillFaults uses a fresh tier's first slots, waits for the next
// commitAhead to be committed, fills them, and says how many pages that
// faulted when it is more than an eighth ("" otherwise, or under -race).
func hostTierFillFaults(t *testing.T) string {
	t.Helper()
	kv := newSliceKV(64)
	tr, err := NewHostTier(nil, kv, 4096)
	if err != nil {
		t.Fatal(err)
	}
	tier := tr.(*memTier)
	out := func(lo, hi int) {
		moves := make([]BlockMove, 0, hi-lo)
		for s := lo; s < hi; s++ {
			moves = append(moves, BlockMove{From: s % 64, To: s})
		}
		if err := tier.Out(moves); err != nil {
			t.Fatal(err)
		}
	}
	const first = 100
	out(0, first)
	want := int64(first + commitAhead)
	for deadline := time.Now().Add(10 * time.Second); tier.ready.Load() < want; {
		if time.Now().After(deadline) {
			t.Fatalf("10 s after %d slots were used, %d are committed; want %d", first, tier.ready.Load(), want)
		}
		time.Sleep(time.Millisecond)
	}
	if r := tier.ready.Load(); r > want {
		t.Errorf("%d slots committed after %d were used; want %d, not the whole tier", r, first, want)
	}
	if raceOn {
		return "" // its shadow memory faults as the copies first write there
	}
	pages := int64(want-first) * int64(kv.cfg.BlockFloats()) * 4 / 4096
	before := minorFaults(t)
	out(first, int(want))
	if n := minorFaults(t) - before; n > pages/8 {
		return fmt.Sprintf("filling %d slots committed ahead (%d pages) faulted %d pages", want-first, pages, n)
	}
	return ""
}

// TestHostTierRoundTrip: blocks copied out and back in come back whole,
// in any order of slots, with the committer running beside the copies
// (under -race: it touches no slot a copy uses).
func TestHostTierRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	kv := newSliceKV(32)
	for i := range kv.data {
		kv.data[i] = r.Float32()
	}
	orig := slices.Clone(kv.data)
	tr, err := NewHostTier(nil, kv, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.In([]BlockMove{{From: 5, To: 0}}); err == nil {
		t.Fatal("a slot never written was read")
	}
	bf := kv.cfg.BlockFloats()
	for round := range 20 {
		// The scheduler's slots: mostly low, some far up the slab.
		slots := r.Perm(40 + 40*round)[:32]
		out := make([]BlockMove, 32)
		in := make([]BlockMove, 32)
		for b := range 32 {
			out[b] = BlockMove{From: b, To: slots[b]}
			in[b] = BlockMove{From: slots[b], To: 31 - b}
		}
		if err := tr.Out(out); err != nil {
			t.Fatal(err)
		}
		clear(kv.data)
		if err := tr.In(in); err != nil {
			t.Fatal(err)
		}
		for b := range 32 {
			if !slices.Equal(kv.data[(31-b)*bf:(32-b)*bf], orig[b*bf:(b+1)*bf]) {
				t.Fatalf("round %d: block %d came back from slot %d changed", round, b, slots[b])
			}
		}
		copy(kv.data, orig)
	}
}

// TestHostTierPauses: while the tier is paused its committer commits no
// slot (Out still commits the slots it writes), and once resumed it goes
// on to commitAhead past the highest slot used.
func TestHostTierPauses(t *testing.T) {
	kv := newSliceKV(8)
	for i := range kv.data {
		kv.data[i] = float32(i)
	}
	tr, err := NewHostTier(nil, kv, 256)
	if err != nil {
		t.Fatal(err)
	}
	tier, p := tr.(*memTier), tr.(Pauser)
	p.Pause()
	if err := tr.Out([]BlockMove{{From: 0, To: 0}, {From: 1, To: 1}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if r := tier.ready.Load(); r != 2 {
		t.Errorf("paused: %d slots committed, want the 2 Out wrote", r)
	}
	// Out goes past what the committer reached, paused or not.
	if err := tr.Out([]BlockMove{{From: 2, To: 5}}); err != nil {
		t.Fatal(err)
	}
	p.Resume()
	want := int64(6 + commitAhead)
	for deadline := time.Now().Add(10 * time.Second); tier.ready.Load() < want; {
		if time.Now().After(deadline) {
			t.Fatalf("10 s after Resume %d slots are committed; want %d", tier.ready.Load(), want)
		}
		time.Sleep(time.Millisecond)
	}
	if err := tr.In([]BlockMove{{From: 5, To: 7}}); err != nil {
		t.Fatal(err)
	}
	bf := kv.cfg.BlockFloats()
	if !slices.Equal(kv.data[7*bf:8*bf], kv.data[2*bf:3*bf]) {
		t.Error("the block written while paused came back changed")
	}
}
