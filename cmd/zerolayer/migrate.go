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
	"github.com/zerolayer/zerolayer/ops/devstack"
)

// runMigrate is `zerolayer migrate up|down|status`.
func runMigrate(ctx context.Context, args []string) error {
	sub, args, err := parseSub(newFlags("migrate"), args)
	if err != nil {
		return err
	}
	fs := newFlags("migrate " + sub)
	dbURL := addDatabaseFlag(fs, "; add search_path=NAME to use another schema")
	steps, all := new(int), new(bool)
	if sub == "down" {
		fs.IntVar(steps, "steps", 1, "how many zerolayer migrations to revert")
		fs.BoolVar(all, "all", false, "revert every migration, River's included")
	}
	if err := parseFlags(fs, args); err != nil {
		return err
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
			return usageError{cmd: "migrate down", msg: fmt.Sprintf("--steps %d must be at least 1 (or use --all)", n)}
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

// addDatabaseFlag registers --database-url on fs; more is added to its
// description. An empty value means $DATABASE_URL, else the running
// zerolayer dev's (resolved by openDB after parsing, so that the help never
// shows a password).
func addDatabaseFlag(fs *flag.FlagSet, more string) *string {
	return fs.String("database-url", "", "PostgreSQL `URL`"+more+" (default $DATABASE_URL, else the running zerolayer dev's)")
}

// openDB connects to the database at url (DATABASE_URL when empty, else
// the running zerolayer dev's, said on stderr) and checks that it answers.
func openDB(ctx context.Context, url string) (*pgxpool.Pool, error) {
	if url == "" {
		url = os.Getenv("DATABASE_URL")
	}
	if url == "" {
		e, source, ok := runningDev()
		if !ok || e.DatabaseURL == "" {
			return nil, usagef("no database: pass --database-url, set DATABASE_URL, or start zerolayer dev")
		}
		url = e.DatabaseURL
		fmt.Fprintf(stderr, "zerolayer: PostgreSQL %s (%s)\n", devstack.Redact(url), source)
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
