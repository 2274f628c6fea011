package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/chat"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
	"github.com/zerolayer/zerolayer/worker/model/store"
)

func runModels(ctx context.Context, args []string) error {
	sub, args, err := parseSub(newFlags("models"), args)
	if err != nil {
		return err
	}
	switch sub {
	case "list":
		if err := parseFlags(newFlags("models list"), args); err != nil {
			return err
		}
		return listModels()
	}
	fs := newFlags("models pull")
	dir := fs.String("dir", cacheDir(), "folder to store the model in")
	names, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(names) != 1 {
		return usageError{cmd: "models pull", msg: "want one model name"}
	}
	e, err := store.Lookup(names[0])
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 30 * time.Minute}
	p, err := store.Pull(ctx, client, e, *dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %s (sha256 %s verified)\n", e.Name, p, e.SHA256)
	return nil
}

func listModels() error {
	dirs := modelDirs()
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tARCH\tPARAMS\tCONTEXT\tTYPES\tTEMPLATE\tSIZE\tPATH")
	for _, p := range store.Files(dirs) {
		name := store.ModelName(p)
		f, err := gguf.Open(p)
		if err != nil {
			fmt.Fprintf(tw, "%s\t?\t?\t?\t%v\t?\t?\t%s\n", name, err, p)
			continue
		}
		d := describeModel(f)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, d.arch, d.params, d.context, d.types, d.template, human(fileSize(p, len(f.Shards))), p)
		f.Close()
	}
	for _, e := range store.Catalog {
		fmt.Fprintf(tw, "%s\t(pullable)\t\t\t\t\t%s\t%s\n", e.Name, human(e.Size), e.About)
	}
	tw.Flush()
	fmt.Fprintf(stdout, "\nsearched: %s\n", strings.Join(dirs, ":"))
	return nil
}

// modelDescription is what models list shows of a model file.
type modelDescription struct {
	arch     string // "llama (5 layers, dim 64)", or "mamba (unsupported: …)"
	params   string // "260K", "0.6B"
	context  string // trained context length, "?" when absent
	types    string // "Q4_K×169, Q6_K×29, F32×57", most used first
	template string // the chat template family, "none" or "unrecognised"
}

func describeModel(f *gguf.File) modelDescription {
	var d modelDescription
	arch := f.Architecture()
	d.arch = arch
	if arch == "" {
		d.arch = "?"
	}
	if cfg, err := model.ConfigFromGGUF(f); err == nil {
		d.arch = fmt.Sprintf("%s (%d layers, dim %d)", arch, cfg.Layers, cfg.Dim)
	} else if errors.Is(err, model.ErrUnsupportedArch) {
		d.arch = arch + " (unsupported)"
	}
	var n uint64
	for i := range f.Tensors {
		n += f.Tensors[i].Elements()
	}
	d.params = paramCount(n)
	d.context = "?"
	if c, ok := f.Uint(arch + ".context_length"); ok && arch != "" {
		d.context = fmt.Sprint(c)
	}
	d.types = typeCounts(f.TypeCounts())
	d.template = templateName(f)
	return d
}

// paramCount writes n with a K, M or B suffix: 260K, 134M, 0.6B, 8.0B.
func paramCount(n uint64) string {
	v, unit := float64(n), ""
	switch {
	case n >= 500_000_000:
		v, unit = v/1e9, "B"
	case n >= 500_000:
		v, unit = v/1e6, "M"
	case n >= 500:
		v, unit = v/1e3, "K"
	default:
		return fmt.Sprint(n)
	}
	if v < 10 {
		return fmt.Sprintf("%.1f%s", v, unit)
	}
	return fmt.Sprintf("%.0f%s", v, unit)
}

// typeCounts lists tensor types with their counts, most used first.
func typeCounts(counts map[gpu.DType]int) string {
	ts := gguf.SortedTypes(counts)
	sort.SliceStable(ts, func(i, j int) bool { return counts[ts[i]] > counts[ts[j]] })
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = fmt.Sprintf("%v×%d", t, counts[t])
		if !t.Supported() {
			parts[i] += " (unsupported)"
		}
	}
	return strings.Join(parts, ", ")
}

// templateName is the chat template family chat.Detect finds in the file's
// tokenizer.chat_template: "none" without one, "unrecognised" when no
// family matches.
func templateName(f *gguf.File) string {
	src, _ := f.String("tokenizer.chat_template")
	if strings.TrimSpace(src) == "" {
		return "none"
	}
	t, err := chat.Detect(src)
	if err != nil {
		return "unrecognised"
	}
	return t.Name()
}

// fileSize is the size of the model at p, with its other split files.
func fileSize(p string, shards int) int64 {
	var n int64
	if st, err := os.Stat(p); err == nil {
		n = st.Size()
	}
	if prefix, _, count, ok := gguf.SplitName(p); ok && shards > 0 {
		for k := 2; k <= count; k++ {
			if st, err := os.Stat(gguf.ShardPath(prefix, k, count)); err == nil {
				n += st.Size()
			}
		}
	}
	return n
}

func human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
