// Command zerolayer is the one binary of zerolayer: local generation,
// models, benchmarks, and (as the system grows) the worker, gateway and
// billing services.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

// stdout is where commands write their results (tests replace it).
var stdout io.Writer = os.Stdout

type command struct {
	name, usage string
	run         func(ctx context.Context, args []string) error
}

var commands = []command{
	{"dev", "the whole system in one process (--demo: submit a batch and print the reports)", runDev},
	{"gen", "generate text locally with a model, without the queue", runGen},
	{"models", "list or pull models (models list | models pull NAME)", runModels},
	{"bench", "measure prompt processing and generation speed", runBench},
	{"migrate", "apply, revert or list database migrations (migrate up|down|status)", runMigrate},
	{"report", "a tenant's usage and cost over a period (table, CSV or JSON)", runReport},
	{"worker", "pull jobs from NATS JetStream and run them", runWorker},
	{"submit", "submit a job and stream its output (or --async)", runSubmit},
	{"gateway", "serve the HTTP APIs: jobs, OpenAI chat completions, Anthropic messages", runGateway},
	{"batch", "run a JSONL file of jobs as one batch: results in input order, resumable, cancelable", runBatch},
	{"billing", "ingest usage from NATS into Postgres and rate it with River", runBilling},
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: zerolayer COMMAND [flags]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(os.Stderr, "  %-8s %s\n", c.name, c.usage)
	}
	fmt.Fprintln(os.Stderr, "\nRun 'zerolayer COMMAND -h' for a command's flags.")
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	name := os.Args[1]
	for _, c := range commands {
		if c.name == name {
			err := c.run(ctx, os.Args[2:])
			if errors.Is(err, flag.ErrHelp) {
				os.Exit(0)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "zerolayer %s: %v\n", name, err)
				var ue usageError
				if errors.As(err, &ue) {
					os.Exit(2)
				}
				os.Exit(1)
			}
			return
		}
	}
	if name == "-h" || name == "--help" || name == "help" {
		usage()
		return
	}
	fmt.Fprintf(os.Stderr, "zerolayer: unknown command %q\n", name)
	usage()
	os.Exit(2)
}

// usageError marks errors in the command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// modelDirs is the model search path: ZEROLAYER_MODEL_PATH, then the cache.
func modelDirs() []string {
	var dirs []string
	if p := os.Getenv("ZEROLAYER_MODEL_PATH"); p != "" {
		for _, d := range strings.Split(p, ":") {
			if d != "" {
				dirs = append(dirs, d)
			}
		}
	}
	return append(dirs, cacheDir())
}

// cacheDir is where pulled models go.
func cacheDir() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "zerolayer", "models")
	}
	return filepath.Join(home, ".cache", "zerolayer", "models")
}
