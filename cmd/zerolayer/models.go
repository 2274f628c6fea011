package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/zerolayer/zerolayer/worker/model"
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
	fmt.Fprintln(tw, "NAME\tARCH\tSIZE\tTENSOR TYPES\tPATH")
	for _, p := range store.Files(dirs) {
		name := strings.TrimSuffix(p[strings.LastIndexByte(p, '/')+1:], ".gguf")
		f, err := gguf.Open(p)
		if err != nil {
			fmt.Fprintf(tw, "%s\t?\t?\t%v\t%s\n", name, err, p)
			continue
		}
		st, _ := os.Stat(p)
		var types []string
		counts := f.TypeCounts()
		for _, t := range gguf.SortedTypes(counts) {
			types = append(types, fmt.Sprintf("%v×%d", t, counts[t]))
		}
		arch := f.Architecture()
		if cfg, err := model.ConfigFromGGUF(f); err == nil {
			arch = fmt.Sprintf("%s (%d layers, dim %d)", arch, cfg.Layers, cfg.Dim)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, arch, human(st.Size()), strings.Join(types, " "), p)
		f.Close()
	}
	for _, e := range store.Catalog {
		fmt.Fprintf(tw, "%s\t(pullable)\t%s\t\t%s\n", e.Name, human(e.Size), e.About)
	}
	tw.Flush()
	fmt.Fprintf(stdout, "\nsearched: %s\n", strings.Join(dirs, ":"))
	return nil
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
