package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// The conventions every subcommand shares live here: `zerolayer CMD -h`
// (also --help, and `zerolayer CMD help`) prints the command's help on
// stdout and exits 0; a usage error (unknown flag, bad value, missing flag,
// extra argument) prints the error and a hint to run -h on stderr and exits
// 2; any other error exits 1. A command builds its flags with newFlags and
// parses them with parseFlags (or parseArgs, parseSub when it takes
// arguments), and returns usagef errors for what the parser cannot check.

// stdout and stderr are where commands write their results and their
// messages; run points them at its writers.
var (
	stdout io.Writer = os.Stdout
	stderr io.Writer = os.Stderr
)

// command is a subcommand, or a sub-subcommand ("models pull") that its
// parent dispatches (run is nil).
type command struct {
	name     string // "report", or "models pull"
	synopsis string // what follows the name on the usage line
	summary  string // one line: what it does
	run      func(ctx context.Context, args []string) error
}

// commandTable lists every command, in the order of `zerolayer -h`. It is
// a function, not a variable, because the commands look themselves up in
// it.
func commandTable() []command {
	return []command{
		{"dev", "[--demo] [--http ADDR] [--model NAME]... [flags]",
			"the whole system in one process (--demo: submit a batch and print the reports)", runDev},
		{"gen", "--model PATH|NAME (--prompt TEXT | --prompt-ids 1,2,3) [flags]",
			"generate text locally with a model, without the queue", runGen},
		{"models", "list | fleet | pull NAME", "list, see the live fleet's or pull models", runModels},
		{"models list", "", "list the models on disk (ZEROLAYER_MODEL_PATH, then the cache: architecture, parameters, context, tensor types, chat template; a split model once) and the pullable catalog", nil},
		{"models pull", "[--dir DIR] NAME", "download a catalog model into the cache, checking its sha256", nil},
		{"models fleet", "[--nats-url URL] [--format table|json]", "the live workers (ZL_WORKERS: models, context, KV arena, last heartbeat) and the models served now or within 6 h (ZL_MODELS): what a submit accepts without wait_for_model", nil},
		{"bench", "(--model PATH|NAME | --synthetic 134m | --pipeline N | --gateway N | --scheduler) [flags]",
			"measure prompt processing and generation speed", runBench},
		{"migrate", "up|down|status [flags]", "apply, revert or list database migrations", runMigrate},
		{"migrate up", "[--database-url URL]", "apply every pending migration, River's included", nil},
		{"migrate down", "[--steps N | --all] [--database-url URL]", "revert the last --steps zerolayer migrations (or --all: every migration, River's included)", nil},
		{"migrate status", "[--database-url URL]", "list the migrations and whether each is applied", nil},
		{"report", "(--tenant T (--from DATE --to DATE | --month 2026-11 | --batch ID | --batches) | --all-tenants --from DATE --to DATE) [flags]",
			"a tenant's usage and cost over a period or billing month, for one batch, or per batch (table, CSV per view, JSON or HTML); every tenant's revenue against resource cost", runReport},
		{"rerate", "--tenant T (--from DATE --to DATE | --month 2026-12) [--model M] [--book pbN] [--dry-run] [flags]",
			"price a tenant's usage of a period, or the charges of a billing month (late usage included), again (shows the difference first; refuses invoiced months)", runRerate},
		{"invoice", "close | show | list | supplier", "close a tenant's month with a numbered invoice or credit note, show it (table, HTML, PDF, CSV, JSON), list them, set the supplier", runInvoice},
		{"invoice close", "--tenant T --month 2026-11 [--out DIR] [--early] [--allow-unrated] [--by NAME]",
			"invoice a tenant's month (one document per currency; a negative month is a credit note whose amount is carried to the next invoices) and lock it: no re-rating, late usage goes to the next month", nil},
		{"invoice show", "(NUMBER | --tenant T --month 2026-11 [--currency C]) [--format table|html|pdf|csv|json] [-o FILE]",
			"print a stored invoice or credit note: html and pdf are the customer's document, table the internal view", nil},
		{"invoice list", "[--tenant T]", "list the invoices and credit notes, newest month first", nil},
		{"invoice supplier", "[--name N --address A] [--tax-id X] [--email E] [--payment-instructions TEXT] [--format table|json]",
			"show the supplier printed on every invoice, or set it (required before the first close; details not given keep their value)", nil},
		{"credit", "add | list", "add or list credits and adjustments on a tenant's open month", runCredit},
		{"credit add", "--tenant T --amount 25.00 --reason TEXT [--kind credit|adjustment] [--month 2026-12] [--by NAME]",
			"record a credit (taken off the invoice) or an adjustment (either sign) with who added it and why", nil},
		{"credit list", "--tenant T [--month 2026-12]", "list a tenant's credits and adjustments", nil},
		{"costs", "list | set", "the operator's resource rates: the cost side of report --all-tenants", runCosts},
		{"costs list", "[--database-url URL]", "list the versions of the resource rates", nil},
		{"costs set", "--effective-from TIME --engine-ms C --kv-mib-ms C --tool-ms C [--currency USD] [--note TEXT]",
			"add a version of the resource rates (engine time, KV memory held, tool time)", nil},
		{"worker", "--model NAME|PATH... [flags]", "pull jobs from NATS JetStream and run them", runWorker},
		{"submit", "--tenant T --model NAME (--prompt TEXT | --request FILE.json) [flags]",
			"submit a job and stream its output (or --async)", runSubmit},
		{"gateway", "(--keys FILE | --insecure-tenant-header) [flags]",
			"serve the HTTP APIs: jobs, OpenAI chat completions, Anthropic messages", runGateway},
		{"keys", "add | list | revoke", "create, list or revoke the gateway's API keys, stored hashed in a key file", runKeys},
		{"keys add", "--file FILE --tenant T", "make a key for a tenant: its hash goes in the file (created 0600), the key is printed once", nil},
		{"keys list", "--file FILE", "list the keys of a file: id, tenant, creation time (never a secret)", nil},
		{"keys revoke", "--file FILE ID", "remove a key from the file; a running gateway refuses it from its next request", nil},
		{"secrets", "init", "make the secrets of a docker compose deployment: NATS passwords and their bcrypt hashes, database passwords, gateway API keys", runSecrets},
		{"secrets init", "[--env-file .env] [--nats-conf ops/nats/nats.conf] [--keys-file secrets/api-keys]",
			"write a random password for every NATS user (the server gets bcrypt hashes) and PostgreSQL and Grafana into --env-file, and a gateway key per tenant into --keys-file; what the files hold is kept", nil},
		{"batch", "--tenant T --id BATCH --input IN.jsonl [--output OUT.jsonl] [--status | --cancel] [flags]",
			"run a JSONL file of jobs as one batch: results in input order, resumable, cancelable", runBatch},
		{"billing", "[flags]", "ingest usage from NATS into Postgres and rate it with River", runBilling},
		{"tenants", "set-limits | limits | set-billing | billing",
			"set or list per-tenant limits (rate, concurrency, monthly spend) that the gateway and workers enforce, and tenants' invoice details", runTenants},
		{"tenants set-limits", "TENANT [--rpm N|none] [--tpm N|none] [--concurrency N|none] [--monthly-spend 100.00|none] [--currency USD] [--database-url URL]",
			"set a tenant's limits (flags not given keep their value); billing publishes them to the gateways and workers at once", nil},
		{"tenants limits", "[--database-url URL]", "list every tenant's limits", nil},
		{"tenants set-billing", "TENANT [--name N] [--address A] [--email E] [--tax-id X] [--tax-rate 0.2] [--tax-rounding invoice|line] [--terms-days 30] [flags]",
			"set a tenant's invoice details (flags not given keep their value; \\n in --address starts a line)", nil},
		{"tenants billing", "TENANT [--format table|json] [--database-url URL]", "show a tenant's invoice details", nil},
		{"pricebook", "create | list | show | end", "create, list, show or end the versioned price books billing rates usage with", runPriceBook},
		{"pricebook create", "[--tenant T] [--model M] --effective-from TIME [--effective-to TIME] [--input P] [--output P] [flags]",
			"create the next version of a tenant's or the default book; coefficients not given are copied from the book in force at --effective-from", nil},
		{"pricebook list", "[--tenant T] [--model M] [--at TIME] [--format table|json] [--database-url URL]",
			"list the price books (--at: those in force at that time), named pbN", nil},
		{"pricebook show", "pbN [--format table|json] [--database-url URL]", "show one price book", nil},
		{"pricebook end", "pbN --at TIME [--format table|json] [--database-url URL]",
			"end a price book: from --at on a less specific scope's book applies; charges made keep theirs until 'zerolayer rerate'", nil},
		{"tags", "list | set | delete | test", "list, set, delete or test the value-tag rules (high_latency_risk, …) rating gives jobs", runTags},
		{"tags list", "[--tenant T] [--format table|json] [--database-url URL]",
			"list the rules in force for a tenant (its own and the default rules of the other tags), or the default rules", nil},
		{"tags set", "[--tenant T] TAG RULE... [--database-url URL]",
			"replace a tenant's (or the default) rules of TAG; RULE is METRIC OP THRESHOLD, such as 'time_to_first_token_ms>50'", nil},
		{"tags delete", "[--tenant T] TAG [--database-url URL]", "delete a tenant's rules of TAG (it falls back to the default rules) or the default rules", nil},
		{"tags test", "(--tenant T --job ID | --usage FILE) [--format table|json] [--database-url URL]",
			"show which rules hold for a job's usage and the tags it gets", nil},
		{"nats-server", "--config FILE", "run the NATS server this binary embeds (JetStream, clustering) with a nats-server configuration file until SIGTERM: for a machine without nats-server (bench --fleet runs its cluster's nodes so)", runNATSServer},
		{"version", "", "print the version, VCS revision and Go version of this binary (also --version)", runVersion},
	}
}

// lookup returns the command named name ("models pull" for a
// sub-subcommand).
func lookup(name string) (command, bool) {
	for _, c := range commandTable() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// run runs the command line args (without the program name) and returns
// the exit status. It points the package's stdout and stderr at its
// writers while it runs, so it is not safe for concurrent use.
func run(args []string, out, errOut io.Writer) int {
	oldOut, oldErr := stdout, stderr
	stdout, stderr = out, errOut
	defer func() { stdout, stderr = oldOut, oldErr }()

	if len(args) == 0 {
		writeUsage(stderr)
		return 2
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "-help", "--help", "help":
		if len(rest) == 0 {
			writeUsage(stdout)
			return 0
		}
		// `zerolayer help CMD` is `zerolayer CMD -h`.
		name, rest = rest[0], []string{"-h"}
	case "-version", "--version":
		name = "version"
	}
	c, ok := lookup(name)
	if !ok || c.run == nil {
		fmt.Fprintf(stderr, "zerolayer: unknown command %q\nRun 'zerolayer -h' for the commands.\n", name)
		return 2
	}
	if len(rest) > 0 && rest[0] == "help" {
		rest = append([]string{"-h"}, rest[1:]...)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return exitCode(name, c.run(ctx, rest))
}

// exitStatus ends a command with status code, reporting msg.
type exitStatus struct {
	code int
	msg  string
}

func (e exitStatus) Error() string { return e.msg }

// exitCode reports err of command name and returns the exit status.
func exitCode(name string, err error) int {
	var he helpError
	var ue usageError
	var es exitStatus
	switch {
	case err == nil:
		return 0
	case errors.As(err, &es):
		fmt.Fprintf(stderr, "zerolayer %s: %s\n", name, es.msg)
		return es.code
	case errors.As(err, &he):
		writeHelp(stdout, he.fs)
		return 0
	case errors.As(err, &ue):
		if ue.cmd != "" {
			name = ue.cmd
		}
		fmt.Fprintf(stderr, "zerolayer %s: %s\nRun 'zerolayer %s -h' for usage.\n", name, ue.msg, name)
		return 2
	}
	fmt.Fprintf(stderr, "zerolayer %s: %v\n", name, err)
	return 1
}

// writeUsage writes the list of commands.
func writeUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: zerolayer COMMAND [flags]\n\ncommands:")
	var top []command
	for _, c := range commandTable() {
		if !strings.Contains(c.name, " ") {
			top = append(top, c)
		}
	}
	writeCommands(w, top, "")

	fmt.Fprintln(w, "\nRun 'zerolayer COMMAND -h' for a command's flags; 'zerolayer --version' for the build.")
}

// writeHelp writes the help of the command fs parses: its usage line, what
// it does, its sub-subcommands and its flags.
func writeHelp(w io.Writer, fs *flag.FlagSet) {
	c, _ := lookup(fs.Name())
	fmt.Fprintf(w, "usage: zerolayer %s\n\n%s.\n", strings.TrimSpace(c.name+" "+c.synopsis), upperFirst(c.summary))
	var subs []command
	for _, s := range commandTable() {
		if strings.HasPrefix(s.name, c.name+" ") {
			subs = append(subs, s)
		}
	}
	if len(subs) > 0 {
		fmt.Fprintln(w, "\ncommands:")
		writeCommands(w, subs, c.name+" ")
	}
	header := false
	fs.VisitAll(func(f *flag.Flag) {
		if !header {
			fmt.Fprintln(w, "\nflags:")
			header = true
		}
		arg, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  --%s", f.Name)
		if arg != "" {
			fmt.Fprintf(w, " %s", arg)
		}
		fmt.Fprintf(w, "\n        %s", strings.ReplaceAll(usage, "\n", "\n        "))
		switch f.DefValue {
		case "", "0", "false", "0s":
		default:
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
	if len(subs) > 0 && !header {
		// The sub-subcommands have flags of their own.
		fmt.Fprintf(w, "\nRun 'zerolayer %s COMMAND -h' for a command's help.\n", c.name)
	}
}

// writeCommands lists cs, their names without prefix, with their
// summaries aligned.
func writeCommands(w io.Writer, cs []command, prefix string) {
	width := 8
	for _, c := range cs {
		width = max(width, len(c.name)-len(prefix))
	}
	for _, c := range cs {
		fmt.Fprintf(w, "  %-*s %s\n", width, strings.TrimPrefix(c.name, prefix), c.summary)
	}
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// newFlags returns the flag set of command name ("models pull" for a
// sub-subcommand), which must be in commandTable. Parse it with
// parseFlags, parseArgs or parseSub: they turn -h into a helpError and a
// bad flag into a usageError, and print nothing themselves.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args, which must be flags only.
func parseFlags(fs *flag.FlagSet, args []string) error {
	rest, err := parseArgs(fs, args)
	if err == nil && len(rest) > 0 {
		err = usageError{cmd: fs.Name(), msg: fmt.Sprintf("unexpected argument %q", rest[0])}
	}
	return err
}

// parseArgs parses args, flags placed before, between or after the
// positional arguments, which it returns (all of what follows "--", too).
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := parseOnce(fs, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// parseSub parses the flags of fs up to its first argument, a
// sub-subcommand, which it returns with the arguments after it ("help"
// right after it made "-h"). No sub-subcommand, or one not in
// commandTable, is a usage error.
func parseSub(fs *flag.FlagSet, args []string) (sub string, rest []string, err error) {
	if err := parseOnce(fs, args); err != nil {
		return "", nil, err
	}
	if fs.NArg() == 0 {
		return "", nil, usageError{cmd: fs.Name(), msg: "missing command"}
	}
	sub, rest = fs.Arg(0), fs.Args()[1:]
	if _, ok := lookup(fs.Name() + " " + sub); !ok {
		return "", nil, usageError{cmd: fs.Name(), msg: fmt.Sprintf("unknown command %q", sub)}
	}
	if len(rest) > 0 && rest[0] == "help" {
		rest = append([]string{"-h"}, rest[1:]...)
	}
	return sub, rest, nil
}

func parseOnce(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return helpError{fs}
	case err != nil:
		return usageError{cmd: fs.Name(), msg: err.Error()}
	}
	return nil
}

// helpError asks for the help of the command fs parses.
type helpError struct{ fs *flag.FlagSet }

func (e helpError) Error() string { return "help requested for " + e.fs.Name() }

// Is makes errors.Is(err, flag.ErrHelp) hold.
func (e helpError) Is(target error) bool { return target == flag.ErrHelp }

// usageError marks errors in the command line: exit status 2 and a hint to
// run the help of cmd (the failing command's when empty).
type usageError struct{ cmd, msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{msg: fmt.Sprintf(format, a...)} }
