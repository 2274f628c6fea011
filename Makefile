# zerolayer — build, test, benchmark and demo targets.
GO      ?= go
BIN     ?= bin/zerolayer
SHARED  ?= ../shared
# Packages with goroutines of their own, run again under the race detector.
RACE_PKGS = ./gpu/... ./worker ./worker/sched/... ./worker/engine/... ./billing/... ./contracts/... ./producer/...

.PHONY: all build test test-race vet fmt-check fuzz bench bench-kernels demo clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/zerolayer

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# The test command: vet, the whole suite, the concurrent packages under -race,
# and a build without cgo.
test: fmt-check vet
	$(GO) test -count=1 ./...
	$(GO) test -count=1 -race -short $(RACE_PKGS)
	CGO_ENABLED=0 $(GO) build ./...

# Short fuzzing runs of every fuzz target.
fuzz:
	$(GO) test -run x -fuzz FuzzParse -fuzztime 30s ./worker/model/gguf/
	$(GO) test -run x -fuzz FuzzRoundTrip -fuzztime 30s ./worker/model/tokenizer/

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

clean:
	rm -rf bin
