package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/zerolayer/zerolayer/migrations"
)

// runMigrate is `zerolayer migrate up|down|status`.
func runMigrate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: zerolayer migrate up|down|status [--database-url URL] [--steps N | --all]")
		fs.PrintDefaults()
	}
	dbURL := fs.String("database-url", os.Getenv("DATABASE_URL"), "Postgres URL; add search_path=NAME to use another schema (default $DATABASE_URL)")
	steps := fs.Int("steps", 1, "down: how many zerolayer migrations to revert")
	all := fs.Bool("all", false, "down: revert every migration, River's included")
	sub, err := parseWithSubcommand(fs, args)
	if err != nil {
		return err
	}
	switch sub {
	case "up", "down", "status":
	case "":
		return usagef("want up, down or status")
	default:
		return usagef("unknown subcommand %q; want up, down or status", sub)
	}
	if sub != "down" && (*all || flagSet(fs, "steps")) {
		return usagef("%s: --steps and --all apply to down only", sub)
	}
	pool, err := openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()

	switch sub {
	case "up":
		changes, err := migrations.Up(ctx, pool)
		printChanges(changes, "nothing to apply: up to date")
		return err
	case "down":
		n := *steps
		if *all {
			n = migrations.AllSteps
		} else if n < 1 {
			return usagef("down: --steps %d must be at least 1 (or use --all)", n)
		}
		changes, err := migrations.Down(ctx, pool, n)
		printChanges(changes, "nothing to revert")
		return err
	}
	st, err := migrations.Status(ctx, pool)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LINE\tVERSION\tNAME\tSTATE\tAPPLIED AT")
	for _, m := range st.Migrations {
		state, at := "pending", ""
		if m.Applied {
			state, at = "applied", m.AppliedAt.UTC().Format(time.RFC3339)
		}
		if !m.Known {
			state += " (unknown to this binary)"
		}
		fmt.Fprintf(tw, "%s\t%04d\t%s\t%s\t%s\n", migrations.LineZerolayer, m.Version, m.Name, state, at)
	}
	riverCurrent := 0
	if n := len(st.RiverApplied); n > 0 {
		riverCurrent = st.RiverApplied[n-1]
	}
	fmt.Fprintf(tw, "%s\t%03d\t(latest known %03d)\t%s\t\n", migrations.LineRiver, riverCurrent, st.RiverLatest,
		map[bool]string{true: "applied", false: "pending"}[riverCurrent >= st.RiverLatest])
	if err := tw.Flush(); err != nil {
		return err
	}
	if !st.UpToDate() {
		fmt.Fprintln(stdout, "pending migrations: run 'zerolayer migrate up'")
	}
	return nil
}

func printChanges(changes []migrations.Change, none string) {
	if len(changes) == 0 {
		fmt.Fprintln(stdout, none)
		return
	}
	for _, c := range changes {
		verb := "applied"
		if c.Direction == migrations.DirectionDown {
			verb = "reverted"
		}
		fmt.Fprintf(stdout, "%s %s %04d %s (%v)\n", verb, c.Line, c.Version, c.Name, c.Duration.Round(time.Millisecond))
	}
}

// parseWithSubcommand parses flags placed before or after the first
// positional argument, which it returns ("" when there is none). More
// positional arguments are a usage error.
func parseWithSubcommand(fs *flag.FlagSet, args []string) (string, error) {
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	if fs.NArg() == 0 {
		return "", nil
	}
	sub := fs.Arg(0)
	if err := fs.Parse(fs.Args()[1:]); err != nil {
		return "", err
	}
	if fs.NArg() > 0 {
		return "", usagef("%s: unexpected argument %q", sub, fs.Arg(0))
	}
	return sub, nil
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// openDB connects to the database and checks that it answers.
func openDB(ctx context.Context, url string) (*pgxpool.Pool, error) {
	if url == "" {
		return nil, usagef("no database: pass --database-url or set DATABASE_URL")
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, usagef("bad database URL: %v", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("database unreachable: %w", err)
	}
	return pool, nil
}
