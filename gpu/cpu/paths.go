package cpu

import "github.com/zerolayer/zerolayer/gpu/cpu/internal/kernels"

// KernelPaths names the kernel paths the CPU backend runs on this machine:
// "go" (no assembly), "avx2", or "avx2+avx512" / "avx2+avx512-vnni" when
// the AVX-512 tile kernels are on.
func KernelPaths() string { return kernels.Paths() }

// SetWideKernels turns the AVX-512 kernels (the tile kernels and the
// packed VNNI ones) on (the default where the CPU has them) or off,
// process-wide, and returns the setting it replaced. They give the same
// bits as the AVX2 kernels that run instead: turning them off only changes
// the speed (for measuring, or for a CPU that clocks down under AVX-512).
func SetWideKernels(on bool) (was bool) { return kernels.SetWide(on) }
