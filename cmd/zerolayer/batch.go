package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/zerolayer/zerolayer/producer"
)

// runBatch submits a JSONL file of {"custom_id", "request"} lines as one
// batch and writes a JSONL file of results in input order.
func runBatch(ctx context.Context, args []string) error {
	fs := newFlags("batch")
	nf := addNATSFlag(fs)
	tenant := fs.String("tenant", os.Getenv("ZEROLAYER_TENANT"), "tenant to submit as (env ZEROLAYER_TENANT)")
	input := fs.String("input", "", "JSONL input, one {\"custom_id\": …, \"request\": {job request}} per line ('-' for stdin)")
	output := fs.String("output", "", "JSONL output, one {\"custom_id\", \"job_id\", \"result\" | \"error\"} per input line, in input order (default stdout)")
	id := fs.String("id", "", "batch id (required): line custom_id runs as job <id>-<custom_id>; run again with the same id to resume")
	window := fs.Int("window", 256, "lines in flight between the oldest unanswered line and the newest submitted")
	cancelBatch := fs.Bool("cancel", false, "cancel the batch's jobs (every custom_id of --input) instead of running it")
	status := fs.Bool("status", false, "print where the batch stands (completed, failed, canceled, pending; from the stored results) instead of running it")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *id == "" || *input == "" {
		return usagef("give --id and --input")
	}
	var in io.Reader = os.Stdin
	if *input != "-" {
		f, err := os.Open(*input)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	// Every model on disk, so prompts are bucketed by their real token
	// counts.
	c, closeAll, err := connectProducer(nf, "batch", *tenant, modelFiles())
	if err != nil {
		return err
	}
	defer closeAll()
	if *status {
		p, err := c.BatchStatus(ctx, in, *id)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "batch %s: %d lines: %d completed, %d failed, %d canceled, %d pending, %d invalid\n",
			*id, p.Lines, p.Completed, p.Failed, p.Canceled, p.Pending, p.Invalid)
		return nil
	}
	if *cancelBatch {
		n, err := c.CancelBatch(ctx, in, *id)
		fmt.Fprintf(os.Stderr, "batch %s: cancel sent to %d jobs\n", *id, n)
		return err
	}
	var out io.Writer = stdout
	if *output != "" {
		f, err := os.OpenFile(*output, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		out = f
	}
	start := time.Now()
	last := time.Time{}
	progress := func(c producer.BatchCounts) {
		if *quiet || time.Since(last) < time.Second {
			return
		}
		last = time.Now()
		fmt.Fprintf(os.Stderr, "batch %s: %d done of %d read (%d completed, %d failed, %d canceled, %d invalid), %s\n",
			*id, c.Done(), c.Total, c.Completed, c.Failed, c.Canceled, c.Invalid, time.Since(start).Round(time.Second))
	}
	counts, err := c.RunBatch(ctx, in, out, producer.BatchOpts{ID: *id, Window: *window, Progress: progress})
	fmt.Fprintf(os.Stderr, "batch %s: %d lines: %d completed, %d failed, %d canceled, %d invalid in %s\n",
		*id, counts.Total, counts.Completed, counts.Failed, counts.Canceled, counts.Invalid, time.Since(start).Round(time.Millisecond))
	return err
}
