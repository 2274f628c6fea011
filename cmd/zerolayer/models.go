package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/fleet"
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
	case "fleet":
		return listFleet(ctx, args)
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

// listFleet prints the live fleet (models fleet): the workers that
// announce themselves in ZL_WORKERS and the models served now or lately
// (ZL_MODELS), as the producers see them when they decide at submit.
func listFleet(ctx context.Context, args []string) error {
	fs := newFlags("models fleet")
	nf := addNATSFlag(fs)
	format := fs.String("format", "table", "output: table or json")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *format != "table" && *format != "json" {
		return usagef("--format %q: want table or json", *format)
	}
	nc, err := nf.connect("models fleet")
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	w := fleet.New(js)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := w.Start(sctx); err != nil {
		return fmt.Errorf("reading the fleet's buckets (%s, %s): %w", contracts.WorkersBucket, contracts.ModelsBucket, err)
	}
	defer w.Stop()
	type modelState struct {
		Model        string `json:"model"`
		LiveWorkers  int    `json:"live_workers"`
		ServedLately bool   `json:"served_lately"`
	}
	workers := w.Workers()
	var models []modelState
	for _, m := range w.Known() {
		st := modelState{Model: m, ServedLately: true}
		for _, wi := range workers {
			if slices.ContainsFunc(wi.Models, func(x contracts.WorkerModel) bool { return x.Name == m }) {
				st.LiveWorkers++
			}
		}
		models = append(models, st)
	}
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Workers []contracts.WorkerInfo `json:"workers"`
			Models  []modelState           `json:"models"`
		}{workers, models})
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tDEVICE\tMODELS\tSTARTED\tLAST SEEN")
	for _, wi := range workers {
		var ms []string
		for _, m := range wi.Models {
			ms = append(ms, fmt.Sprintf("%s (context %d, KV %d MB)", m.Name, m.ContextTokens, m.KVArenaMB))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s ago\n", wi.WorkerID, wi.Device, strings.Join(ms, ", "),
			wi.StartedAt.Format(time.RFC3339), time.Since(wi.UpdatedAt).Round(time.Second))
	}
	tw.Flush()
	fmt.Fprintln(stdout)
	tw = tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tLIVE WORKERS\tAT SUBMIT")
	for _, m := range models {
		verdict := "queued for a live worker"
		if m.LiveWorkers == 0 {
			verdict = "queued: served within the last " + contracts.ModelsTTL.String() + ", no worker live now"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", m.Model, m.LiveWorkers, verdict)
	}
	tw.Flush()
	switch {
	case len(workers) == 0:
		fmt.Fprintln(stdout, "\nno worker is live: every job is queued until one starts")
	default:
		fmt.Fprintln(stdout, "\nany other model is refused at submit (unknown_model) unless the job asks to wait (wait_for_model)")
	}
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
