package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

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
	window := fs.Int("window", defaultBatchWindow, "lines in flight between the oldest unanswered line and the newest submitted")
	cancelBatch := fs.Bool("cancel", false, "cancel the batch's jobs (every custom_id of --input) instead of running it")
	status := fs.Bool("status", false, "print where the batch stands (completed, failed, canceled, pending; from the stored results) instead of running it")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
	waitModel := fs.Bool("wait-for-model", false, "queue every line's job even when no live worker serves its model, until one starts (without it, such a line is answered unknown_model while other workers are live)")
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
		fmt.Fprintf(stderr, "batch %s: cancel sent to %d jobs\n", *id, n)
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
	total := -1 // unknown: stdin
	if *input != "-" {
		if total, err = countLines(*input); err != nil {
			return err
		}
	}
	pr := newBatchProgress(stderr, *id, total, *quiet)
	counts, err := c.RunBatch(ctx, in, out, producer.BatchOpts{ID: *id, Window: *window, Progress: pr.update, Stalled: pr.stalled, WaitForModel: *waitModel})
	pr.finish(counts)
	if err != nil && ctx.Err() != nil {
		resume, note := resumeCommand(nf.url, c.Tenant(), *id, *window, *input, *output, *quiet)
		if *waitModel {
			resume += " --wait-for-model"
		}
		fmt.Fprintf(stderr, "batch %s interrupted: %d lines answered%s; the jobs already submitted go on running and are billed once.\nResume (finished lines are answered from their stored results, nothing runs twice)%s:\n  %s\n",
			*id, counts.Done(), ofTotal(total), note, resume)
		return exitStatus{code: 130, msg: "interrupted"}
	}
	if err != nil {
		return err
	}
	if bad := counts.Failed + counts.Invalid; bad > 0 {
		return exitStatus{code: 1, msg: fmt.Sprintf("%d of %d lines failed or were invalid (see their error in the output)", bad, counts.Total)}
	}
	return nil
}

// defaultBatchWindow is --window's default.
const defaultBatchWindow = 256

// resumeCommand is the command that runs the interrupted batch again, one
// a user can paste into a POSIX shell: every flag given that matters, the
// tenant always, words quoted where the shell needs it. A --nats-url that
// carries credentials is not printed: the command reads it from
// $NATS_URL, and note says so (with the URL redacted, redactNATS). note
// is "" or starts with a comma.
func resumeCommand(natsURL, tenant, id string, window int, input, output string, quiet bool) (cmd, note string) {
	words := []string{"zerolayer", "batch"}
	switch {
	case natsURL == "":
		// The resume resolves the server as this run did: $NATS_URL,
		// the running zerolayer dev, else the default.
	case strings.Contains(natsURL, "@"):
		// User information: a password or a token.
		words = append(words, "--nats-url", `"${NATS_URL:?set NATS_URL to the server URL}"`)
		note = fmt.Sprintf(", with NATS_URL set to the server given to --nats-url, %s (its credentials are not printed)", redactNATS(natsURL))
	default:
		words = append(words, "--nats-url", shellQuote(natsURL))
	}
	words = append(words, "--tenant", shellQuote(tenant), "--id", shellQuote(id))
	if window != defaultBatchWindow {
		words = append(words, "--window", strconv.Itoa(window))
	}
	words = append(words, "--input", shellQuote(input))
	if input == "-" {
		note += ", fed the same input"
	}
	if output != "" {
		words = append(words, "--output", shellQuote(output))
	}
	if quiet {
		words = append(words, "--quiet")
	}
	return strings.Join(words, " "), note
}

// shellQuote quotes s for a POSIX shell: as it is when no character of it
// is special there, else in single quotes.
func shellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%_+=:,./-", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func ofTotal(total int) string {
	if total < 0 {
		return ""
	}
	return fmt.Sprintf(" of %d", total)
}

// countLines counts the lines of the file at path that a batch answers,
// each with a record (for the progress total): its non-blank lines, read
// as RunBatch reads them, too long ones included.
func countLines(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	err = producer.ReadLines(f, producer.DefaultMaxLineBytes, func(int, []byte, int64) error {
		n++
		return nil
	})
	return n, err
}

// batchProgress shows a batch's progress on w: a bar with the lines done,
// their rate and the time left when w is a terminal, else a plain line
// every batchProgressEvery; and, when nothing is answered for a while,
// which line the output waits on.
type batchProgress struct {
	w     io.Writer
	id    string
	total int
	quiet bool
	start time.Time

	mu   sync.Mutex
	bar  *progressbar.ProgressBar // nil when w is not a terminal
	last time.Time                // the last plain line
	done int
}

// batchProgressEvery is how often a plain progress line is written.
const batchProgressEvery = 5 * time.Second

func newBatchProgress(w io.Writer, id string, total int, quiet bool) *batchProgress {
	p := &batchProgress{w: w, id: id, total: total, quiet: quiet, start: time.Now(), last: time.Now()}
	if f, ok := w.(*os.File); ok && !quiet && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("batch "+id),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("lines"),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
	}
	return p
}

func (p *batchProgress) update(c producer.BatchCounts) {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = c.Done()
	if p.bar != nil {
		p.bar.Set(p.done)
		return
	}
	if time.Since(p.last) >= batchProgressEvery {
		p.last = time.Now()
		fmt.Fprintln(p.w, p.line(c))
	}
}

// line is a plain progress line.
func (p *batchProgress) line(c producer.BatchCounts) string {
	el := time.Since(p.start)
	rate := float64(c.Done()) / el.Seconds()
	s := fmt.Sprintf("batch %s: %d%s lines answered", p.id, c.Done(), ofTotal(p.total))
	if p.total > 0 {
		s += fmt.Sprintf(" (%.0f%%)", 100*float64(c.Done())/float64(p.total))
	}
	s += fmt.Sprintf(", %.1f lines/s", rate)
	if p.total > 0 && rate > 0 && c.Done() < p.total {
		s += ", ETA " + time.Duration(float64(p.total-c.Done())/rate*float64(time.Second)).Round(time.Second).String()
	}
	return s + fmt.Sprintf("; %d completed, %d failed, %d canceled, %d invalid; %s", c.Completed, c.Failed, c.Canceled, c.Invalid, el.Round(time.Second))
}

func (p *batchProgress) stalled(waitingOn string, inFlight int) {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		p.bar.Clear()
	}
	fmt.Fprintf(p.w, "batch %s: nothing answered for a while; the output waits on line custom_id %q (%d lines in flight; `zerolayer batch --status` shows where they stand)\n", p.id, waitingOn, inFlight)
}

// finish clears the bar and writes the summary.
func (p *batchProgress) finish(c producer.BatchCounts) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		p.bar.Finish()
	}
	fmt.Fprintf(p.w, "batch %s: %d lines: %d completed, %d failed, %d canceled, %d invalid in %s\n",
		p.id, c.Total, c.Completed, c.Failed, c.Canceled, c.Invalid, time.Since(p.start).Round(time.Millisecond))
}
