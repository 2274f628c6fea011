package model

import (
	"fmt"

	"github.com/zerolayer/zerolayer/gpu"
)

// KVLayout is how a paged KV arena whose memory follows the attention
// windows holds a model's layers. The layers are cut into groups of
// layers that attend alike (all global, or all with the same sliding
// window), every group the same size, so that one arena block holds
// GroupLayers layers of one group and any block can serve any group; each
// sequence then keeps one block table per group. A group with a window
// needs only the blocks its window reaches, so its older blocks can be
// given back while the global groups keep theirs. A model without
// windows has one group of all its layers: the whole-model layout of
// NewKV.
type KVLayout struct {
	// GroupLayers is the number of layer slots in one block.
	GroupLayers int
	// Groups holds each group's layers, in layer order.
	Groups [][]int
	// Windows holds each group's attention window (0: full causal).
	Windows []int
	// group and slot place each layer: its group and its slot in the
	// group's blocks.
	group, slot []int
}

// KVLayout returns the model's grouped layout: global layers and
// sliding-window layers in separate groups, as many layers per group as
// the smaller kind has (gemma3-270m: 3 global and 15 local layers make
// one global group and five local groups of three). A group left short
// (gemma3 with 4 global and 22 local layers: the sixth local group holds
// 2) leaves slots of its blocks unused. An encoder keeps nothing past a
// pass and computes each input whole: its layout is the whole-model one.
func (c *Config) KVLayout() KVLayout {
	if c.Encoder {
		return c.WholeKVLayout()
	}
	var global, local []int
	for i := 0; i < c.Layers; i++ {
		if w, _ := c.LayerAttention(i); w > 0 {
			local = append(local, i)
		} else {
			global = append(global, i)
		}
	}
	l := KVLayout{group: make([]int, c.Layers), slot: make([]int, c.Layers)}
	if len(global) == 0 || len(local) == 0 {
		l = c.WholeKVLayout()
		if len(global) == 0 {
			l.Windows[0] = c.SlidingWindow
		}
		return l
	}
	l.GroupLayers = min(len(global), len(local))
	for _, kind := range []struct {
		layers []int
		window int
	}{{global, 0}, {local, c.SlidingWindow}} {
		for i := 0; i < len(kind.layers); i += l.GroupLayers {
			l.Groups = append(l.Groups, kind.layers[i:min(i+l.GroupLayers, len(kind.layers))])
			l.Windows = append(l.Windows, kind.window)
		}
	}
	for g, ls := range l.Groups {
		for j, li := range ls {
			l.group[li], l.slot[li] = g, j
		}
	}
	return l
}

// WholeKVLayout is the layout of NewKV: one group of every layer, kept
// whole (no window), so a windowed layer's blocks are never given back.
func (c *Config) WholeKVLayout() KVLayout {
	l := KVLayout{GroupLayers: c.Layers, Groups: [][]int{make([]int, c.Layers)}, Windows: []int{0},
		group: make([]int, c.Layers), slot: make([]int, c.Layers)}
	for i := range l.Groups[0] {
		l.Groups[0][i], l.slot[i] = i, i
	}
	return l
}

// Window is the attention window shared by every windowed group (0 when
// no group has one).
func (l KVLayout) Window() int {
	for _, w := range l.Windows {
		if w > 0 {
			return w
		}
	}
	return 0
}

// KVConfig is the arena configuration of the layout: blocks of
// GroupLayers layers.
func (m *Model) KVConfig(l KVLayout, blocks, blockTokens int) gpu.KVConfig {
	return gpu.KVConfig{Layers: l.GroupLayers, KVDim: m.KVDim(), HeadDim: m.HeadDim, BlockTokens: blockTokens, Blocks: blocks, Type: m.kvType}.WithDefaults()
}

// NewGroupedKV allocates an arena in layout l (ForwardGroups).
func (m *Model) NewGroupedKV(l KVLayout, blocks, blockTokens int) (gpu.KV, error) {
	return m.be.NewKV(m.KVConfig(l, blocks, blockTokens))
}

// placement puts each layer of a step in its batch and its slot of the
// arena's blocks: the whole-model layout (layout nil: one batch, slot =
// layer) or the grouped one (a batch per group). A value, so that a step
// allocates nothing for it.
type placement struct {
	bs     []gpu.Batch
	layout *KVLayout
}

func (p placement) of(li int) (*gpu.Batch, int) {
	if p.layout == nil {
		return &p.bs[0], li
	}
	return &p.bs[p.layout.group[li]], p.layout.slot[li]
}

// place returns the placement of a step on arena kv with batches bs.
func (m *Model) place(kv gpu.KV, bs []gpu.Batch) (placement, error) {
	layers := kv.Config().Layers
	if layers == m.Layers && len(bs) == 1 {
		return placement{bs: bs}, nil
	}
	if m.layout == nil {
		l := m.KVLayout()
		m.layout = &l
	}
	l := m.layout
	if layers != l.GroupLayers || len(bs) != len(l.Groups) {
		return placement{}, fmt.Errorf("%w: an arena of %d-layer blocks with %d block tables a sequence fits neither the whole model (%d layers, one table) nor its groups (%d layers a block, %d tables)",
			errBatch, layers, len(bs), m.Layers, l.GroupLayers, len(l.Groups))
	}
	return placement{bs: bs, layout: l}, nil
}
