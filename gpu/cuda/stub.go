//go:build !cuda && !cudaemu

package cuda

import (
	"time"

	"github.com/zerolayer/zerolayer/gpu"
)

// Available reports why this binary cannot use CUDA: it was built without
// the cuda build tag (ErrNotBuilt).
func Available() error { return ErrNotBuilt }

// Backend is the CUDA backend. In this build (no cuda tag) New always
// fails with ErrNotBuilt and no Backend exists; the methods are here so that
// code using the backend compiles everywhere.
type Backend struct {
	gpu.Backend
}

var _ gpu.KVSizer = (*Backend)(nil)

// New returns ErrNotBuilt.
func New(cfg Config) (*Backend, error) { return nil, ErrNotBuilt }

// ComputeCapability is unavailable in this build.
func (b *Backend) ComputeCapability() (major, minor int) { return 0, 0 }

// MemInfo is unavailable in this build.
func (b *Backend) MemInfo() (free, total int64, err error) { return 0, 0, ErrNotBuilt }

// KVBlocks is unavailable in this build.
func (b *Backend) KVBlocks(cfg gpu.KVConfig, fraction float64) (int, error) { return 0, ErrNotBuilt }

// Argmax is unavailable in this build.
func (b *Backend) Argmax(x gpu.Tensor, out []int32) error { return ErrNotBuilt }

// MaskWords returns the number of 64-bit words of a logit mask row of n
// tokens: (n+63)/64, as the tools' packed bitsets.
func MaskWords(n int) int { return (n + 63) / 64 }

// MaskLogits is unavailable in this build.
func (b *Backend) MaskLogits(x gpu.Tensor, mask []uint64, perRow bool) { panic(ErrNotBuilt) }

// SetGraphs does nothing in this build.
func (b *Backend) SetGraphs(on bool) {}

// Stats is unavailable in this build.
func (b *Backend) Stats() (Stats, error) { return Stats{}, ErrNotBuilt }

// Time is unavailable in this build.
func (b *Backend) Time(f func()) (time.Duration, error) { return 0, ErrNotBuilt }

// HostPool is pinned host memory for swapped-out KV blocks; unavailable in
// this build.
type HostPool struct{}

// Blocks returns 0.
func (h *HostPool) Blocks() int { return 0 }

// Block panics: there are no blocks in this build.
func (h *HostPool) Block(i int) []float32 { panic(ErrNotBuilt) }

// NewHostPool is unavailable in this build.
func (b *Backend) NewHostPool(kv gpu.KV, blocks int) (*HostPool, error) { return nil, ErrNotBuilt }

// Fence tracks asynchronous block copies; unavailable in this build.
type Fence struct{}

// Done is unavailable in this build.
func (f *Fence) Done() (bool, error) { return false, ErrNotBuilt }

// Wait is unavailable in this build.
func (f *Fence) Wait() error { return ErrNotBuilt }

// Release does nothing in this build.
func (f *Fence) Release() {}

// SwapOut is unavailable in this build.
func (b *Backend) SwapOut(kv gpu.KV, pool *HostPool, moves []BlockMove) (*Fence, error) {
	return nil, ErrNotBuilt
}

// SwapIn is unavailable in this build.
func (b *Backend) SwapIn(kv gpu.KV, pool *HostPool, moves []BlockMove) (*Fence, error) {
	return nil, ErrNotBuilt
}

// NewHostTier is unavailable in this build.
func (b *Backend) NewHostTier(kv gpu.KV, blocks int) (gpu.HostTier, error) { return nil, ErrNotBuilt }
