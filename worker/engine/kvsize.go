package engine

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"

	"github.com/zerolayer/zerolayer/gpu"
)

// KV arena defaults, written once for everything that sizes an arena
// without being told: the in-order engine (Config), the scheduler
// (sched.Config, through DefaultKVArena) and the worker's model serving
// (worker.OpenModels), the gen, bench and dev commands. Blocks hold
// gpu.DefaultBlockTokens (16) positions.
const (
	// DefaultKVMemoryMB is the least KV arena DefaultKVArena gives a
	// scheduled model on the CPU (the default before arenas were sized
	// from the model). On CUDA the arena is sized from the device's free
	// memory instead (gpu.KVSizer).
	DefaultKVMemoryMB = 256
	// DefaultKVContexts is how many sequences of the full context the
	// in-order engine's arena holds.
	DefaultKVContexts = 2
	// DefaultSchedContexts is how many sequences of the model's full
	// context DefaultKVArena aims a scheduler's arena at (before the
	// machine's memory caps it): several documents of the whole context
	// at once, as llama.cpp's server sizes its context for its slots.
	DefaultSchedContexts = 4
	// MaxSchedContexts bounds the contexts DefaultKVArena grows to on a
	// machine with memory to spare (KVShareOfMemory).
	MaxSchedContexts = 16
	// KVShareOfMemory is the share of the machine's memory a default arena
	// grows into beyond DefaultSchedContexts: 1/32 (3%) of MemTotal.
	KVShareOfMemory = 32
	// KVCapOfMemory and KVCapOfAvailable cap a default arena at 1/4 of
	// the machine's memory and 1/2 of what is available when it is sized
	// (the arena is committed at once on the CPU: gpu/cpu writes its
	// pages).
	KVCapOfMemory, KVCapOfAvailable = 4, 2
)

// DefaultKVBlocks returns the in-order engine's default arena for a model
// of the given context: DefaultKVContexts full contexts in blocks of
// blockTokens positions (0: gpu.DefaultBlockTokens).
func DefaultKVBlocks(context, blockTokens int) int {
	if blockTokens <= 0 {
		blockTokens = gpu.DefaultBlockTokens
	}
	return DefaultKVContexts * ((context + blockTokens - 1) / blockTokens)
}

// Memory is the machine's memory as /proc/meminfo reports it (ReadMemory),
// in bytes; zero where unknown.
type Memory struct {
	Total, Available int64
}

// ReadMemory reads MemTotal and MemAvailable from /proc/meminfo; it
// returns a zero Memory where the file cannot be read (not Linux) and
// leaves a field zero that the file lacks.
func ReadMemory() Memory {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return Memory{}
	}
	return parseMemInfo(b)
}

// parseMemInfo reads /proc/meminfo's "MemTotal:  123 kB" lines.
func parseMemInfo(b []byte) Memory {
	var m Memory
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 2 {
			continue
		}
		var dst *int64
		switch string(f[0]) {
		case "MemTotal:":
			dst = &m.Total
		case "MemAvailable:":
			dst = &m.Available
		default:
			continue
		}
		n, err := strconv.ParseInt(string(f[1]), 10, 64)
		if err != nil || n < 0 {
			continue
		}
		if len(f) >= 3 && string(f[2]) == "kB" {
			n <<= 10
		}
		*dst = n
	}
	return m
}

// KVArena is a default arena's size and the reason for it, to log.
type KVArena struct {
	// Blocks is the arena's size in blocks.
	Blocks int
	// Bytes is Blocks × the block's bytes.
	Bytes int64
	// Contexts is how many sequences of the model's full context it holds.
	Contexts float64
	// Why says how it was chosen, e.g. "4 contexts of 8,192 tokens".
	Why string
}

// String is the arena for a log: "KV arena 1,152 MB: 4 contexts of 8,192
// tokens".
func (a KVArena) String() string {
	mb := thousands((a.Bytes + 1<<19) >> 20)
	if a.Bytes < 10<<20 {
		mb = strconv.FormatFloat(float64(a.Bytes)/(1<<20), 'f', 1, 64)
	}
	return fmt.Sprintf("KV arena %s MB: %s", mb, a.Why)
}

// DefaultKVArena sizes a KV arena nobody gave a size (no --kv-memory-mb,
// no KVBlocks) on the CPU, for a model whose full context of context
// tokens takes contextBlocks blocks of blockBytes bytes each (blockBytes
// from gpu.KVConfig.BlockBytes, so the KV element type counts:
// F16 blocks are half F32's). As llama.cpp sizes its context from the
// model's trained one:
//
//   - it holds DefaultSchedContexts (4) full contexts, so that a document
//     of the whole context always fits and several run at once; more, up
//     to MaxSchedContexts, while they fit in 1/KVShareOfMemory of the
//     machine's memory;
//   - it is capped at 1/KVCapOfMemory of the machine's memory and
//     1/KVCapOfAvailable of the memory available (mem; a zero field is
//     not known and does not cap), even below one full context;
//   - with mem wholly unknown it holds one full context;
//   - it is never below DefaultKVMemoryMB (256 MB), the old default.
func DefaultKVArena(blockBytes int64, contextBlocks, context int, mem Memory) KVArena {
	if blockBytes <= 0 {
		blockBytes = 1
	}
	contextBlocks = max(contextBlocks, 1)
	ctxBytes := int64(contextBlocks) * blockBytes
	n := DefaultSchedContexts
	why := ""
	switch {
	case mem.Total <= 0 && mem.Available <= 0:
		n = 1
		why = "the machine's memory unknown"
	case mem.Total > 0:
		n = max(n, int(min(int64(MaxSchedContexts), mem.Total/KVShareOfMemory/ctxBytes)))
	}
	want := int64(n) * ctxBytes
	limit := int64(-1)
	if mem.Total > 0 {
		limit = mem.Total / KVCapOfMemory
	}
	if mem.Available > 0 && (limit < 0 || mem.Available/KVCapOfAvailable < limit) {
		limit = mem.Available / KVCapOfAvailable
	}
	bytes := want
	if limit >= 0 && bytes > limit {
		bytes = limit
		why = fmt.Sprintf("capped by the machine's memory (%s MB, %s MB available)", thousands(mem.Total>>20), thousands(mem.Available>>20))
	}
	if floor := int64(DefaultKVMemoryMB) << 20; bytes < floor {
		bytes = floor
		why = fmt.Sprintf("the least default, %d MB", DefaultKVMemoryMB)
	}
	a := KVArena{Blocks: int(bytes / blockBytes)}
	a.Bytes = int64(a.Blocks) * blockBytes
	a.Contexts = float64(a.Blocks) / float64(contextBlocks)
	held := fmt.Sprintf("%d contexts of %s tokens", n, thousands(int64(context)))
	if n == 1 {
		held = fmt.Sprintf("1 context of %s tokens", thousands(int64(context)))
	}
	if a.Blocks != n*contextBlocks {
		held = fmt.Sprintf("%.1f contexts of %s tokens", a.Contexts, thousands(int64(context)))
	}
	if why != "" {
		held += "; " + why
	}
	a.Why = held
	return a
}

// ConfiguredKVArena describes an arena of blocks given by its
// configuration (a size in MB, a number of blocks, or a device's free
// memory) for the same model as DefaultKVArena: "0.4 contexts of 8,192
// tokens, as configured".
func ConfiguredKVArena(blocks int, blockBytes int64, contextBlocks, context int) KVArena {
	a := KVArena{Blocks: blocks, Bytes: int64(blocks) * blockBytes, Contexts: float64(blocks) / float64(max(contextBlocks, 1))}
	a.Why = fmt.Sprintf("%.1f contexts of %s tokens, as configured", a.Contexts, thousands(int64(context)))
	return a
}

// thousands writes n with commas: 8192 → "8,192".
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
