// Package cuda is the GPU backend of zerolayer: gpu.Backend on NVIDIA GPUs
// through the CUDA driver API (gorgonia.org/cu), built with the cuda build
// tag. Without the tag the package compiles to a stub whose New returns
// ErrNotBuilt, so CGO_ENABLED=0 builds and machines without CUDA are
// unaffected.
//
// # Data flow
//
// All driver calls of a device run on one engine goroutine locked to its
// OS thread, where the device's primary context is current. Backend
// methods validate their arguments on the caller's goroutine (misuse
// panics there, as on the CPU backend) and queue a launch; queued
// operations go to the engine in batches, which launches them in order on
// the compute stream. Read, Sync and the methods returning an error wait
// for the queue. KV blocks move to and from page-locked host memory on a
// second, copy stream, ordered against compute with events (HostPool,
// SwapOut, SwapIn, Fence), so eviction overlaps decoding.
//
// A decode step is a few hundred small kernels, more than the CPU can
// launch one by one in the time the GPU runs them. The backend therefore
// remembers each segment of work between two waits, and when a segment
// repeats with the same kernels and parameters (decode steps do: tokens,
// positions and block tables travel in device buffers, not parameters), it
// captures it into a CUDA graph and from then on replays it with one launch
// (graph.go; Config.NoGraphs turns this off).
//
// Weights are repacked when uploaded (pack.go): quantized values in
// natural element order, scales in arrays of their own, rows padded for
// 16-byte loads. The kernels (kernels/*.cu) dequantize F16, BF16, Q8_0,
// Q4_0, Q4_K and Q6_K on the fly inside the matrix multiplication, which
// takes up to 8 rows of activations per pass over the weights. Q4_1,
// Q5_0, Q5_1, Q2_K, Q3_K and Q5_K have no kernel here: NewMatrix refuses
// them with gpu.ErrUnsupportedType ("... Q5_K on cuda"); the CPU backend
// runs them. Attention
// reads the paged KV cache through each sequence's block table with an
// online softmax. Extra kernels: Argmax, and MaskLogits, which applies a
// packed token bitset to the logits.
//
// The kernels are compiled to PTX for compute_80 by `make kernels` (nvcc
// 11.8 from Debian non-free) and the PTX is committed and embedded; the
// driver JIT-compiles it for the device (sm_80 and newer, the H100 and H200
// included) when the backend opens.
//
// # Without a device
//
// gorgonia.org/cu calls cuInit in its package init and exits the process
// if it fails. This package interposes cuInit (driver_cgo.go), so a cuda
// build on a machine without a GPU runs: Available and New return a
// *NoDeviceError, "no CUDA device (cuInit(0) = CUDA_ERROR_NO_DEVICE (100):
// …)", which matches gpu.ErrBackendUnavailable, and callers fall back to
// the CPU backend. The binary still needs libcuda.so.1 to start.
//
// The build tag cudaemu (without cuda) replaces the driver with a CPU
// emulator of the same kernel sources (emu.cc), so the kernels and the
// backend run, slowly, where there is no GPU: `go test -tags cudaemu`
// (linux/amd64 and a C++ compiler; make cuda-check runs it).
//
//	var be gpu.Backend
//	if g, err := cuda.New(cuda.Config{}); err == nil {
//		be = g
//	} else if errors.Is(err, gpu.ErrBackendUnavailable) {
//		be = cpu.New(cpu.Config{}) // no GPU here: err says why
//	} else {
//		return err
//	}
//	m, err := model.New(f, be)
//
// Building with the tag needs cuda.h and a libcuda.so (the toolkit's stub
// does): make cuda-check fetches both from Debian. The device check of a
// GPU machine is gpu/devicecheck/run.sh.
//
// It imports gpu and gpu/quant, and cgo (gorgonia.org/cu) only under the
// cuda tag; nothing above the seam.
package cuda
