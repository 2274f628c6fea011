# zerolayer — build, test, benchmark and demo targets.
GO      ?= go
BIN     ?= bin/zerolayer
SHARED  ?= ../shared
# Packages with goroutines of their own, run again under the race detector.
RACE_PKGS = ./gpu/... ./worker ./worker/sched/... ./worker/engine/... ./billing/... ./contracts/... ./producer/... ./ops/...

.PHONY: chaos all build test test-race vet staticcheck fmt-check fuzz bench bench-kernels demo clean cuda-check kernels

all: build

build:
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/zerolayer

vet:
	$(GO) vet ./...

# staticcheck (a tool in go.mod: go tool staticcheck), with and without the
# CUDA emulator's build tag, so the house stays swept.
staticcheck:
	$(GO) tool staticcheck ./...
	$(GO) tool staticcheck -tags cudaemu ./gpu/...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# The test command: gofmt, vet, staticcheck, the whole suite, the concurrent
# packages under -race, and a build without cgo.
test: fmt-check vet staticcheck
	$(GO) test -count=1 -timeout 25m ./...
	$(GO) test -count=1 -race -short $(RACE_PKGS)
	CGO_ENABLED=0 $(GO) build ./...

# Short fuzzing runs of every fuzz target.
fuzz:
	$(GO) test -run x -fuzz FuzzParse -fuzztime 30s ./worker/model/gguf/
	$(GO) test -run x -fuzz FuzzRoundTrip -fuzztime 30s ./worker/model/tokenizer/
	$(GO) test -run x -fuzz FuzzDecodeJobRequest -fuzztime 30s ./contracts/
	$(GO) test -run x -fuzz FuzzDecodeUsage -fuzztime 30s ./contracts/
	$(GO) test -run x -fuzz FuzzDecodeTenantLimits -fuzztime 30s ./contracts/

# Kernel micro-benchmarks, then end-to-end model benchmarks (see README).
bench-kernels:
	$(GO) test -run x -bench . -cpu 1 ./gpu/cpu/internal/kernels/

bench: build
	$(BIN) bench --model $(SHARED)/models/stories260K/stories260K.gguf --threads 1,2 --pp 512 --tg 256
	$(BIN) bench --synthetic 134m --type f32,q8_0,q4_0 --threads 1,2 --pp 512 --tg 64
	$(BIN) bench --synthetic 134m --type q8_0 --threads 2 --pp 0 --tg 32 --batch 1,4,16

# The main job end to end: the whole system in one process (embedded NATS,
# PostgreSQL, migrations, a worker on the real TinyStories model, billing),
# a mixed batch from two tenants, one job streamed, and the reports.
demo: build
	@if [ -f $(SHARED)/models/stories260K/stories260K.gguf ]; then \
		export ZEROLAYER_MODEL_PATH="$(SHARED)/models/stories260K$${ZEROLAYER_MODEL_PATH:+:$$ZEROLAYER_MODEL_PATH}"; \
	else \
		$(BIN) models pull stories260k || exit 1; \
	fi; \
	$(BIN) dev --demo

# The cuda build tag, checked without CUDA: cuda.h and the stub libcuda.so
# of CUDA 11.8 are fetched once from Debian non-free's nvidia-cuda-dev into
# CUDA_CACHE (never into the repository: cuda.h may not be redistributed),
# then everything is vetted and built with the tag, the CUDA test binary is
# linked on its own (a package that also imports go-nvml links with
# unresolved symbols ignored) and run against the stub libcuda, where it
# must report "no CUDA device" and skip rather than exit, and the kernels
# run on the CPU emulator.
CUDA_CACHE ?= $(HOME)/.cache/zerolayer/cuda
CUDA_ENV    = CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations -I$(CUDA_CACHE)/include" CGO_LDFLAGS="-L$(CUDA_CACHE)/lib"

cuda-check:
	gpu/cuda/cuda-headers.sh $(CUDA_CACHE)
	$(CUDA_ENV) $(GO) vet -tags cuda ./...
	$(CUDA_ENV) $(GO) build -tags cuda ./...
	$(CUDA_ENV) $(GO) test -c -tags cuda -o $(CUDA_CACHE)/cuda.test ./gpu/cuda
	mkdir -p $(CUDA_CACHE)/stub && ln -sf ../lib/libcuda.so $(CUDA_CACHE)/stub/libcuda.so.1
	out=$$(cd gpu/cuda && LD_LIBRARY_PATH=$(CUDA_CACHE)/stub $(CUDA_CACHE)/cuda.test -test.v -test.run 'TestAvailable|TestConformance') && \
		echo "$$out" | grep -m1 'no CUDA device (' && echo "$$out" | grep -q -- '--- SKIP: TestAvailable'
	$(GO) vet -tags cudaemu ./gpu/cuda
	$(GO) test -count=1 -short -tags cudaemu ./gpu/cuda

# The CUDA kernels: PTX for compute_80 (JIT-compiled by the driver for newer
# GPUs), committed beside the sources and embedded in the cuda build. Needs
# nvcc 11.8 (Debian non-free: nvidia-cuda-toolkit); ptxas checks that the
# PTX assembles for sm_90 (H100, H200).
NVCC    ?= nvcc
KERNELS  = matmul rows attention

kernels:
	cd gpu/cuda/kernels && for k in $(KERNELS); do \
		$(NVCC) -ptx -arch=compute_80 -O3 -o $$k.ptx $$k.cu && ptxas -arch=sm_90 $$k.ptx -o /dev/null || exit 1; \
	done

clean:
	rm -rf bin

# The chaos suite (not part of test): a three-node JetStream cluster in the
# test process, workers, billing and a gateway as processes of the binary,
# the machine's PostgreSQL (stopped for a while: run as root, loopback
# only), mixed load from three tenants and timed faults; it prints a table
# and fails on a lost, double-billed or falsely failed job. CHAOS_PG_STOP
# (default 30s) sets how long PostgreSQL is down.
chaos:
	$(GO) test -tags chaos -count=1 -timeout 15m ./ops/chaos -v
