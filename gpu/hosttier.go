package gpu

import "fmt"

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

// Swapper is implemented by backends with a host tier of their own, such
// as page-locked memory and copies on a separate stream of a GPU.
type Swapper interface {
	NewHostTier(kv KV, blocks int) (HostTier, error)
}

// NewHostTier returns a host tier of blocks slots for the arena kv of be:
// be's own when it is a Swapper, otherwise one in ordinary memory, filled
// on first use, that moves blocks with ReadBlock and WriteBlock.
func NewHostTier(be Backend, kv KV, blocks int) (HostTier, error) {
	if blocks <= 0 {
		return nil, fmt.Errorf("gpu: host tier of %d blocks; want at least 1", blocks)
	}
	if s, ok := be.(Swapper); ok {
		return s.NewHostTier(kv, blocks)
	}
	return &memTier{kv: kv, bf: kv.Config().BlockFloats(), slots: make([][]float32, blocks)}, nil
}

// memTier is a HostTier in Go memory; its copies are synchronous, which
// orders them trivially.
type memTier struct {
	kv    KV
	bf    int
	slots [][]float32
}

func (t *memTier) Blocks() int { return len(t.slots) }

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
	if err := CheckMoves(moves, true, t.kv.Config().Blocks, len(t.slots)); err != nil {
		return err
	}
	for _, m := range moves {
		if t.slots[m.To] == nil {
			t.slots[m.To] = make([]float32, t.bf)
		}
		t.kv.ReadBlock(m.From, t.slots[m.To])
	}
	return nil
}

func (t *memTier) In(moves []BlockMove) error {
	if err := CheckMoves(moves, false, t.kv.Config().Blocks, len(t.slots)); err != nil {
		return err
	}
	for _, m := range moves {
		if t.slots[m.From] == nil {
			return fmt.Errorf("gpu: host slot %d was never written", m.From)
		}
	}
	for _, m := range moves {
		t.kv.WriteBlock(m.To, t.slots[m.From])
	}
	return nil
}
