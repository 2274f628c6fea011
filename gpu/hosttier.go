package gpu

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// BlockMove moves one KV block between an arena and a host tier: From is
// the source (an arena block for Out, a host slot for In), To the
// destination.
type BlockMove struct {
	From, To int
}

// HostTier is host memory for KV blocks moved out of an arena: the swap
// tier of preemptive eviction. Its slots, 0..Blocks()-1, each hold one
// block.
//
// Copies are ordered like any other backend operation and may run
// asynchronously to the caller: Out reads the arena blocks after the work
// queued so far, and work queued later may overwrite those blocks at once;
// work queued after In sees the blocks it wrote. Copies of one tier run in
// the order they were queued, so a slot may be handed to a later Out as
// soon as the In that reads it is queued. Device failures are reported by
// the backend's Sync or Read.
type HostTier interface {
	// Blocks is the number of slots.
	Blocks() int
	// Out copies arena blocks m.From to slots m.To.
	Out(moves []BlockMove) error
	// In copies slots m.From to arena blocks m.To.
	In(moves []BlockMove) error
}

// Pauser is implemented by host tiers that work in the background (the
// tier in ordinary memory writes its slots ahead of use): Pause holds that
// work off, within a page run of the tier's, until Resume. The scheduler
// pauses it for a step carrying a high-priority job's prompt, whose
// processors it would otherwise share.
type Pauser interface {
	Pause()
	Resume()
}

// Swapper is implemented by backends with a host tier of their own, such
// as page-locked memory and copies on a separate stream of a GPU.
type Swapper interface {
	NewHostTier(kv KV, blocks int) (HostTier, error)
}

// NewHostTier returns a host tier of blocks slots for the arena kv of be:
// be's own when it is a Swapper, otherwise one in ordinary memory that
// moves blocks with ReadBlock and WriteBlock (memTier).
func NewHostTier(be Backend, kv KV, blocks int) (HostTier, error) {
	if blocks <= 0 {
		return nil, fmt.Errorf("gpu: host tier of %d blocks; want at least 1", blocks)
	}
	if s, ok := be.(Swapper); ok {
		return s.NewHostTier(kv, blocks)
	}
	return &memTier{kv: kv, bb: int(kv.Config().BlockBytes()), slots: make([][]byte, blocks), written: make([]bool, blocks),
		resumed: make(chan struct{}, 1)}, nil
}

// memTier is a HostTier in Go memory; its copies are synchronous, which
// orders them trivially.
//
// Its slots are allocated and their pages written ahead of use, by a
// goroutine of the tier's own: the first write to a page faults, and on a
// VM it faults in the host too (about 4 ms a 1.2 MiB block of the 134M
// model on a Firecracker guest), which Out paid inside the step that
// preempted for a high-priority arrival, in front of that job's first
// token. Committing
// every slot when the tier is made would cost its full size at start in
// every scheduler, used or not (a 256 MiB tier each, and a test binary
// making schedulers by the dozen ran out of memory); the tier instead keeps
// commitAhead slots past the highest used committed. The scheduler
// reuses slots given back before it takes a fresh one, and takes fresh
// ones in order, so the slots it has ever used are a prefix.
//
// The committer works a run of commitRun pages at a time and stops between
// runs while the tier is paused (Pauser): on two processors it took one
// from the steps it ran beside, and a high-priority job's first step,
// right after the preemption that made room for it, met it there (8
// blocks committed during the step: 39 ms against 23, 134M model, two
// threads).
type memTier struct {
	kv      KV
	bb      int      // bytes per block
	slots   [][]byte // nil from ready on
	written []bool   // the slots Out has filled; the caller's goroutine only

	mu         sync.Mutex   // held while a slot is published (ensure: committed)
	ready      atomic.Int64 // slots [0, ready) are allocated and committed
	goal       atomic.Int64 // the committer's target for ready
	committing atomic.Bool  // a committer goroutine runs
	paused     atomic.Bool
	resumed    chan struct{} // a token after Resume, for a committer waiting
}

// commitAhead is how many slots past the highest used the tier keeps
// committed: four preemptions' worth of an 8-block (128-token) sequence.
const commitAhead = 32

func (t *memTier) Blocks() int { return len(t.written) }

// newSlot allocates a slot and commits it (CommitPages) a page run at a
// time, waiting between runs while the tier is paused when pausable.
func (t *memTier) newSlot(pausable bool) []byte {
	s := make([]byte, t.bb)
	for lo := 0; lo < len(s); lo += commitRun {
		for pausable && t.paused.Load() {
			<-t.resumed
		}
		CommitPages(s[lo:min(lo+commitRun, len(s))])
	}
	return s
}

// PageBytes is the size of a page.
const PageBytes = 4096

// CommitPages writes a zero to data's first byte and every PageBytes-th
// after it, on the caller's goroutine: for a fresh allocation (zeroed,
// page-aligned beyond its first page) that makes every page of it the
// process's, so that later writes do not fault. Host memory a backend
// keeps (the CPU arena, a host tier) is committed this way before the
// steps that use it.
func CommitPages(data []byte) {
	for p := 0; p < len(data); p += PageBytes {
		data[p] = 0
	}
}

// ensure commits the slots below hi that the committer has not reached,
// on the caller's goroutine.
func (t *memTier) ensure(hi int) {
	if int(t.ready.Load()) >= hi {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for r := int(t.ready.Load()); r < hi; r++ {
		t.slots[r] = t.newSlot(false)
		t.ready.Store(int64(r + 1))
	}
}

// commitRun is the committer's unit of work between looks at the pause, in
// bytes: 16 pages, about 0.2 ms at the first touch's cost above.
const commitRun = 16 * PageBytes

// Pause holds the committer off from its next page run until Resume.
func (t *memTier) Pause() { t.paused.Store(true) }

// Resume lets the committer go on.
func (t *memTier) Resume() {
	if t.paused.Swap(false) {
		select {
		case t.resumed <- struct{}{}:
		default:
		}
	}
}

// ahead raises the committer's goal for slots below hi in use, and starts
// the committer when it is not running.
func (t *memTier) ahead(hi int) {
	g := int64(min(len(t.written), hi+commitAhead))
	if g <= t.goal.Load() {
		return
	}
	t.goal.Store(g)
	if t.committing.CompareAndSwap(false, true) {
		go t.commit()
	}
}

// commit is the committer: it commits slots one at a time, a page run at
// a time, waiting while the tier is paused and giving its processor away
// between slots (it runs beside the steps), until ready reaches goal; a
// goal raised as it stops starts it again. It holds mu only to publish a
// slot, so that Out never waits for its work: a slot ensure committed
// meanwhile is not published twice.
func (t *memTier) commit() {
	for {
		for r := t.ready.Load(); r < t.goal.Load(); r = t.ready.Load() {
			s := t.newSlot(true)
			t.mu.Lock()
			if t.ready.Load() == r {
				t.slots[r] = s
				t.ready.Store(r + 1)
			}
			t.mu.Unlock()
			runtime.Gosched()
		}
		t.committing.Store(false)
		if t.ready.Load() >= t.goal.Load() || !t.committing.CompareAndSwap(false, true) {
			return
		}
	}
}

// CheckMoves reports an ErrShape error when a move of Out (out) or In
// names a block outside an arena of blocks or a slot outside a tier of
// slots; tiers check their moves with it before copying any.
func CheckMoves(moves []BlockMove, out bool, blocks, slots int) error {
	for _, m := range moves {
		arena, slot := m.From, m.To
		if !out {
			arena, slot = m.To, m.From
		}
		if arena < 0 || arena >= blocks || slot < 0 || slot >= slots {
			return fmt.Errorf("%w: block move %d→%d outside the arena's %d blocks or the tier's %d slots", ErrShape, m.From, m.To, blocks, slots)
		}
	}
	return nil
}

func (t *memTier) Out(moves []BlockMove) error {
	if err := CheckMoves(moves, true, t.kv.Config().Blocks, len(t.written)); err != nil {
		return err
	}
	hi := 0
	for _, m := range moves {
		hi = max(hi, m.To+1)
	}
	t.ensure(hi)
	for _, m := range moves {
		t.kv.ReadBlock(m.From, t.slots[m.To])
		t.written[m.To] = true
	}
	t.ahead(hi)
	return nil
}

func (t *memTier) In(moves []BlockMove) error {
	if err := CheckMoves(moves, false, t.kv.Config().Blocks, len(t.written)); err != nil {
		return err
	}
	for _, m := range moves {
		if !t.written[m.From] {
			return fmt.Errorf("gpu: host slot %d was never written", m.From)
		}
	}
	for _, m := range moves {
		t.kv.WriteBlock(m.To, t.slots[m.From])
	}
	return nil
}
