// Package gpu is the device seam of zerolayer: the small Backend interface
// that the model runner drives, the storage types of weights (DType), and the
// paged KV cache layout.
//
// A backend owns memory (tensors, weight matrices, the KV arena) and runs the
// handful of operations a Llama-family forward pass needs: embedding lookup,
// matrix multiplication against quantized weights, RMSNorm, RoPE, attention
// over a paged KV cache, SwiGLU and softmax. Backends live in sub-packages:
// gpu/cpu (pure Go with amd64 assembly kernels) and gpu/cuda (build tag
// cuda); gpu/device chooses between them (cpu, cuda, auto). Every backend
// must pass the conformance suite in gpu/gputest. What only some backends
// can do is asked through small interfaces: KVSizer sizes a KV arena from
// free device memory (CUDA).
//
// Data flows one way per step: the runner writes token ids and positions,
// calls operations in order, and reads the logits back with Read, which is
// the only point where a queued backend has to wait for the device.
//
//	be := cpu.New(cpu.Config{})
//	x, _ := be.NewTensor(1, 64)
//	be.RMSNorm(x, x, w, 1e-5)
//	_ = be.Read(x, out)
//
// The seam imports nothing of ours: backends (cpu, cuda) import it, never
// the reverse; gpu/device is the one package that imports the backends to
// choose one.
package gpu
