//go:build cudaemu && !cuda

// The CPU emulator of the CUDA kernels (build tag cudaemu): the .cu sources
// compiled as host C++ against kernels/emu.h, run block after block, each
// CUDA thread of a block a fiber on the calling OS thread. Fibers switch
// only at __syncthreads and warp shuffles, with a context switch of our own
// (a few instructions, no system call), so a block of 256 threads costs
// microseconds per barrier. It is a test device: slow, but it runs the real
// kernel code and the real launch geometry, and it reports a deadlock
// (threads of a block waiting at different barriers) as an error.

#define ZL_EMU 1
#include "kernels/matmul.cu"
#include "kernels/rows.cu"
#include "kernels/attention.cu"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <utility>

// zl_emu_switch saves the callee-saved registers on the current stack,
// stores the stack pointer in *save and continues on the stack to, which
// holds the same frame (System V x86-64). The floating-point control words
// (MXCSR, x87 CW), callee-saved too, are left alone: nothing here changes
// them.
extern "C" void zl_emu_switch(void** save, void* to);
extern "C" void zl_emu_start(void);
__asm__(
    ".text\n"
    ".p2align 4\n"
    ".hidden zl_emu_switch\n"
    ".globl zl_emu_switch\n"
    ".type zl_emu_switch,@function\n"
    "zl_emu_switch:\n"
    "  pushq %rbp\n"
    "  pushq %rbx\n"
    "  pushq %r12\n"
    "  pushq %r13\n"
    "  pushq %r14\n"
    "  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  popq %r15\n"
    "  popq %r14\n"
    "  popq %r13\n"
    "  popq %r12\n"
    "  popq %rbx\n"
    "  popq %rbp\n"
    "  ret\n"
    ".size zl_emu_switch, .-zl_emu_switch\n"
    ".p2align 4\n"
    ".hidden zl_emu_start\n"
    ".globl zl_emu_start\n"
    ".type zl_emu_start,@function\n"
    "zl_emu_start:\n"
    "  movq %r12, %rdi\n"
    "  callq *%r13\n"
    "  ud2\n"
    ".size zl_emu_start, .-zl_emu_start\n");

namespace {

typedef void (*tramp_fn)(const uint64_t*);

template <typename T>
T slot(uint64_t v) {
	T t;
	memcpy(&t, &v, sizeof(T));
	return t;
}

template <typename... A, size_t... I>
void call_with(void (*k)(A...), const uint64_t* a, std::index_sequence<I...>) {
	k(slot<A>(a[I])...);
}

template <typename... A>
constexpr size_t arity(void (*)(A...)) {
	return sizeof...(A);
}

template <auto K>
void tramp_n(const uint64_t* a) {
	call_with(K, a, std::make_index_sequence<arity(K)>{});
}

struct kernel_entry {
	const char* name;
	tramp_fn fn;
	int nargs;
};

#define ZL_K(name) {#name, &tramp_n<name>, (int)arity(name)},
#define ZL_MM(t) ZL_K(mm_##t##_1) ZL_K(mm_##t##_2) ZL_K(mm_##t##_4) ZL_K(mm_##t##_8)

const kernel_entry kernels[] = {
    ZL_MM(f32) ZL_MM(f16) ZL_MM(bf16) ZL_MM(q8_0) ZL_MM(q4_0) ZL_MM(q4_k) ZL_MM(q6_k)
    ZL_K(embed) ZL_K(gather) ZL_K(add) ZL_K(swiglu) ZL_K(rmsnorm) ZL_K(rope) ZL_K(softmax)
    ZL_K(argmax) ZL_K(mask_logits) ZL_K(store_kv) ZL_K(attention)
    ZL_K(geglu) ZL_K(scale) ZL_K(attention_window)
};

const int kStack = 64 << 10;
const int kMaxThreads = 1024;

enum { RUN, WAIT_BLOCK, WAIT_WARP, DONE };

} // namespace

struct zl_fiber {
	void* sp;
	char* stack;
	uint3 tid;
	int lin;      // linear thread index in the block
	int state;
	unsigned gen; // generation of the barrier waited on
	uint64_t slot[2]; // published values of warp exchanges, by parity
	int parity;
};

thread_local zl_fiber* zl_cur;
thread_local uint3 blockIdx;
thread_local dim3 blockDim;
thread_local dim3 gridDim;

namespace {

struct warp_state {
	int arrived, alive;
	unsigned gen;
};

struct sched {
	zl_fiber fibers[kMaxThreads];
	warp_state warps[kMaxThreads / 32];
	void* sp; // the scheduler's own stack
	int n, alive, arrived;
	unsigned gen;
	tramp_fn fn;
	const uint64_t* args;
};

thread_local sched* S;

sched* get_sched() {
	if (!S) {
		S = (sched*)calloc(1, sizeof(sched));
	}
	return S;
}

void yield() { zl_emu_switch(&zl_cur->sp, S->sp); }

// release_checks opens barriers whose missing members have all exited.
void release_checks(int warp) {
	if (S->arrived > 0 && S->arrived == S->alive) S->arrived = 0, S->gen++;
	warp_state& w = S->warps[warp];
	if (w.arrived > 0 && w.arrived == w.alive) w.arrived = 0, w.gen++;
}

void fiber_main(zl_fiber* f) {
	S->fn(S->args);
	f->state = DONE;
	S->alive--;
	S->warps[f->lin / 32].alive--;
	release_checks(f->lin / 32);
	yield();
	abort(); // a finished fiber is never resumed
}

void prepare(zl_fiber* f) {
	if (!f->stack) {
		f->stack = (char*)malloc(kStack);
		if (!f->stack) abort();
	}
	// Stacks are kStack apart: stagger their tops so that the frames of
	// consecutive fibers do not all fall into the same cache sets.
	uintptr_t top = ((uintptr_t)f->stack + kStack - (uintptr_t)(f->lin % 64) * 192) & ~(uintptr_t)15;
	// The frame zl_emu_switch pops: r15, r14, r13, r12, rbx, rbp, then the
	// return address; zl_emu_start then runs with the stack 16-aligned.
	uint64_t* fr = (uint64_t*)(top - 72);
	fr[0] = fr[1] = 0;                    // r15, r14
	fr[2] = (uint64_t)(void*)&fiber_main; // r13: entry
	fr[3] = (uint64_t)f;                  // r12: its argument
	fr[4] = fr[5] = 0;                    // rbx, rbp
	fr[6] = (uint64_t)(void*)&zl_emu_start;
	f->sp = fr;
	f->state = RUN;
	f->parity = 0;
}

// run_block runs every thread of the current block to completion; false on
// a deadlock.
bool run_block() {
	S->alive = S->n;
	S->arrived = 0;
	for (int w = 0; w < (S->n + 31) / 32; w++) {
		int left = S->n - 32 * w;
		S->warps[w] = warp_state{0, left < 32 ? left : 32, 0};
	}
	for (int i = 0; i < S->n; i++) prepare(&S->fibers[i]);
	for (;;) {
		bool progress = false, live = false;
		for (int i = 0; i < S->n; i++) {
			zl_fiber* f = &S->fibers[i];
			if (f->state == DONE) continue;
			live = true;
			if (f->state == WAIT_BLOCK && f->gen == S->gen) continue;
			if (f->state == WAIT_WARP && f->gen == S->warps[i / 32].gen) continue;
			f->state = RUN;
			zl_cur = f;
			zl_emu_switch(&S->sp, f->sp);
			progress = true;
		}
		if (!live) return true;
		if (!progress) return false;
	}
}

} // namespace

const uint3& zl_thread_idx(zl_fiber* f) { return f->tid; }

int zl_lane() { return zl_cur->lin & 31; }

// The last fiber to arrive at a barrier opens it and runs on; the others
// wait for the scheduler's next round.
void zl_syncthreads() {
	zl_fiber* f = zl_cur;
	if (++S->arrived == S->alive) {
		S->arrived = 0, S->gen++;
		return;
	}
	f->gen = S->gen;
	f->state = WAIT_BLOCK;
	yield();
}

// Exchanges alternate between two slots: a lane overwrites the slot of
// exchange n at exchange n+2, after every lane has passed the barrier of
// exchange n+1 and so has read it.
unsigned long long zl_warp_exchange(unsigned long long v, int src) {
	zl_fiber* f = zl_cur;
	int w = f->lin / 32, par = f->parity;
	warp_state& ws = S->warps[w];
	f->slot[par] = v;
	f->parity = par ^ 1;
	if (++ws.arrived == ws.alive) {
		ws.arrived = 0, ws.gen++;
	} else {
		f->gen = ws.gen;
		f->state = WAIT_WARP;
		yield();
	}
	return S->fibers[w * 32 + (src & 31)].slot[par];
}

extern "C" int zl_emu_kernel(const char* name, int* nargs) {
	for (size_t i = 0; i < sizeof(kernels) / sizeof(kernels[0]); i++)
		if (strcmp(kernels[i].name, name) == 0) {
			*nargs = kernels[i].nargs;
			return (int)i;
		}
	return -1;
}

// zl_emu_launch runs kernel k over the grid; 0 on success, 1 on a bad
// geometry, 2 on a deadlock.
extern "C" int zl_emu_launch(int k, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                             const uint64_t* args) {
	unsigned n = bx * by * bz;
	if (n == 0 || n > (unsigned)kMaxThreads || n % 32 != 0) return 1;
	get_sched();
	S->n = (int)n;
	S->fn = kernels[k].fn;
	S->args = args;
	gridDim = dim3{gx, gy, gz};
	blockDim = dim3{bx, by, bz};
	for (unsigned i = 0; i < n; i++) {
		zl_fiber* f = &S->fibers[i];
		f->lin = (int)i;
		f->tid = uint3{i % bx, (i / bx) % by, i / (bx * by)};
	}
	for (unsigned z = 0; z < gz; z++)
		for (unsigned y = 0; y < gy; y++)
			for (unsigned x = 0; x < gx; x++) {
				blockIdx = uint3{x, y, z};
				if (!run_block()) return 2;
			}
	return 0;
}
