package migrations

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

//go:embed *.sql
var sqlFiles embed.FS

// Table is the table that records which zerolayer migrations are applied,
// in the schema the connection's search_path selects.
const Table = "zl_schema_migrations"

// AllSteps, passed to Down, reverts every zerolayer migration and then
// River's own, leaving the schema as it was before Up.
const AllSteps = -1

// Migration lines: the two independent sequences of migrations Up applies.
const (
	// LineZerolayer is this package's migrations.
	LineZerolayer = "zerolayer"
	// LineRiver is River's own migrations (its main line).
	LineRiver = "river"
)

// Directions of a Change.
const (
	DirectionUp   = "up"
	DirectionDown = "down"
)

// Migration is one embedded zerolayer migration: the SQL of its
// NNNN_name.up.sql and NNNN_name.down.sql files.
type Migration struct {
	// Version is NNNN, counting up from 1 without gaps.
	Version int
	// Name is the file name's part after the version.
	Name string
	// Up is the SQL that applies the migration.
	Up string
	// Down is the SQL that reverts it.
	Down string
}

// Change is one migration applied or reverted by Up or Down.
type Change struct {
	// Line is LineZerolayer or LineRiver.
	Line string
	// Version is the migration's version within its line.
	Version int
	// Name is the migration's name.
	Name string
	// Direction is DirectionUp or DirectionDown.
	Direction string
	// Duration is how long the migration's SQL took.
	Duration time.Duration
}

// State is what Status found in the database.
type State struct {
	// Migrations lists every zerolayer migration this binary knows, oldest
	// first, then any the database records that this binary does not know
	// (applied by a newer release).
	Migrations []MigrationState
	// RiverApplied lists the River migration versions applied, oldest
	// first.
	RiverApplied []int
	// RiverLatest is the newest River migration version this binary knows.
	RiverLatest int
}

// MigrationState is one zerolayer migration and whether it is applied.
type MigrationState struct {
	// Version and Name identify the migration.
	Version int
	Name    string
	// Applied says whether the database records it as applied.
	Applied bool
	// AppliedAt is when it was applied; zero when it is not.
	AppliedAt time.Time
	// Known is false for a migration applied by a release newer than this
	// binary.
	Known bool
}

// Pending returns the known migrations that are not applied.
func (s *State) Pending() []MigrationState {
	var out []MigrationState
	for _, m := range s.Migrations {
		if m.Known && !m.Applied {
			out = append(out, m)
		}
	}
	return out
}

// UpToDate reports whether every known zerolayer and River migration is
// applied.
func (s *State) UpToDate() bool {
	return len(s.Pending()) == 0 && len(s.RiverApplied) > 0 && slices.Max(s.RiverApplied) >= s.RiverLatest
}

var all = mustLoad()

// All returns the embedded zerolayer migrations, oldest first.
func All() []Migration { return slices.Clone(all) }

var fileRE = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.(up|down)\.sql$`)

// load reads the embedded files. Every version must have both directions
// and versions must run 1, 2, 3, … so that a missing file cannot go
// unnoticed.
func load(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	byVersion := map[int]*Migration{}
	for _, e := range entries {
		m := fileRE.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migrations: %s is not named NNNN_name.up.sql or NNNN_name.down.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		b, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, err
		}
		mg := byVersion[v]
		if mg == nil {
			mg = &Migration{Version: v, Name: m[2]}
			byVersion[v] = mg
		}
		if mg.Name != m[2] {
			return nil, fmt.Errorf("migrations: version %04d has two names, %q and %q", v, mg.Name, m[2])
		}
		if m[3] == "up" {
			mg.Up = string(b)
		} else {
			mg.Down = string(b)
		}
	}
	out := make([]Migration, 0, len(byVersion))
	for v := 1; v <= len(byVersion); v++ {
		mg := byVersion[v]
		switch {
		case mg == nil:
			return nil, fmt.Errorf("migrations: version %04d is missing; versions must run from 0001 without gaps", v)
		case mg.Up == "" || mg.Down == "":
			return nil, fmt.Errorf("migrations: version %04d_%s needs both an .up.sql and a .down.sql file", v, mg.Name)
		}
		out = append(out, *mg)
	}
	return out, nil
}

func mustLoad() []Migration {
	ms, err := load(sqlFiles)
	if err != nil {
		panic(err)
	}
	return ms
}

// Up applies River's pending migrations, then this package's, each
// zerolayer migration in a transaction of its own, all in the schema the
// pool's search_path selects. It returns what it applied, in order. Up is
// safe to run from several processes at once: they serialize on an
// advisory lock keyed by the schema, and a migration already applied is
// skipped. The pool must allow at least two connections.
func Up(ctx context.Context, pool *pgxpool.Pool) ([]Change, error) {
	changes, err := riverMigrate(ctx, pool, rivermigrate.DirectionUp)
	if err != nil {
		return changes, err
	}
	for {
		c, ok, err := applyNext(ctx, pool)
		if err != nil {
			return changes, err
		}
		if !ok {
			return changes, nil
		}
		changes = append(changes, c)
	}
}

// Down reverts the newest steps zerolayer migrations, newest first, each in
// a transaction of its own. With steps == AllSteps it reverts all of them,
// then River's migrations, and drops the tracking table, leaving the schema
// as it was before Up. Reverting fewer migrations than steps because none
// is left is not an error. A recorded migration this binary does not know
// cannot be reverted: Down stops with ErrUnknownMigration.
func Down(ctx context.Context, pool *pgxpool.Pool, steps int) ([]Change, error) {
	if steps < 1 && steps != AllSteps {
		return nil, fmt.Errorf("%w: got %d; pass a positive count or AllSteps", ErrSteps, steps)
	}
	var changes []Change
	for i := 0; steps == AllSteps || i < steps; i++ {
		c, ok, err := revertLast(ctx, pool)
		if err != nil {
			return changes, err
		}
		if !ok {
			break
		}
		changes = append(changes, c)
	}
	if steps != AllSteps {
		return changes, nil
	}
	rc, err := riverMigrate(ctx, pool, rivermigrate.DirectionDown)
	changes = append(changes, rc...)
	if err != nil {
		return changes, err
	}
	err = inLockedTx(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "DROP TABLE IF EXISTS "+Table)
		return err
	})
	return changes, err
}

// Status reports which migrations are applied. It changes nothing: on a
// schema never migrated it reports everything pending.
func Status(ctx context.Context, pool *pgxpool.Pool) (*State, error) {
	st := &State{}
	migrator, err := newRiverMigrator(pool)
	if err != nil {
		return nil, err
	}
	for _, m := range migrator.AllVersions() {
		st.RiverLatest = max(st.RiverLatest, m.Version)
	}
	existing, err := migrator.ExistingVersions(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrations: read River's migration versions: %w", err)
	}
	for _, m := range existing {
		st.RiverApplied = append(st.RiverApplied, m.Version)
	}
	slices.Sort(st.RiverApplied)

	var applied map[int]appliedRow
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", Table).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return nil
		}
		applied, err = readApplied(ctx, tx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("migrations: read %s: %w", Table, err)
	}
	for _, m := range all {
		r, ok := applied[m.Version]
		st.Migrations = append(st.Migrations, MigrationState{Version: m.Version, Name: m.Name, Applied: ok, AppliedAt: r.at, Known: true})
		delete(applied, m.Version)
	}
	for _, v := range sortedKeys(applied) {
		st.Migrations = append(st.Migrations, MigrationState{Version: v, Name: applied[v].name, Applied: true, AppliedAt: applied[v].at})
	}
	return st, nil
}

type appliedRow struct {
	name string
	at   time.Time
}

func sortedKeys(m map[int]appliedRow) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// inLockedTx runs f in a transaction holding the migration lock of the
// current schema, with the tracking table present.
func inLockedTx(ctx context.Context, pool *pgxpool.Pool, f func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// Keyed by schema so that tests migrating their own schemas in one
		// database do not wait for each other.
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1), hashtext(current_schema()))", Table); err != nil {
			return fmt.Errorf("migrations: take the migration lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+Table+` (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return fmt.Errorf("migrations: create %s: %w", Table, err)
		}
		return f(tx)
	})
}

func readApplied(ctx context.Context, tx pgx.Tx) (map[int]appliedRow, error) {
	rows, err := tx.Query(ctx, "SELECT version, name, applied_at FROM "+Table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int]appliedRow{}
	for rows.Next() {
		var v int
		var r appliedRow
		if err := rows.Scan(&v, &r.name, &r.at); err != nil {
			return nil, err
		}
		out[v] = r
	}
	return out, rows.Err()
}

// applyNext applies the oldest pending migration, if any.
func applyNext(ctx context.Context, pool *pgxpool.Pool) (c Change, ok bool, err error) {
	err = inLockedTx(ctx, pool, func(tx pgx.Tx) error {
		applied, err := readApplied(ctx, tx)
		if err != nil {
			return err
		}
		for _, m := range all {
			if _, done := applied[m.Version]; done {
				continue
			}
			start := time.Now()
			if _, err := tx.Exec(ctx, m.Up); err != nil {
				return fmt.Errorf("migrations: apply %04d_%s: %w", m.Version, m.Name, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO "+Table+" (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
				return err
			}
			c = Change{Line: LineZerolayer, Version: m.Version, Name: m.Name, Direction: DirectionUp, Duration: time.Since(start)}
			ok = true
			return nil
		}
		return nil
	})
	return c, ok, err
}

// revertLast reverts the newest applied migration, if any.
func revertLast(ctx context.Context, pool *pgxpool.Pool) (c Change, ok bool, err error) {
	err = inLockedTx(ctx, pool, func(tx pgx.Tx) error {
		applied, err := readApplied(ctx, tx)
		if err != nil || len(applied) == 0 {
			return err
		}
		v := slices.Max(sortedKeys(applied))
		i := slices.IndexFunc(all, func(m Migration) bool { return m.Version == v })
		if i < 0 {
			return fmt.Errorf("%w: version %04d_%s was applied by a newer release; revert it with that release", ErrUnknownMigration, v, applied[v].name)
		}
		m := all[i]
		start := time.Now()
		if _, err := tx.Exec(ctx, m.Down); err != nil {
			return fmt.Errorf("migrations: revert %04d_%s: %w", m.Version, m.Name, err)
		}
		if _, err := tx.Exec(ctx, "DELETE FROM "+Table+" WHERE version = $1", m.Version); err != nil {
			return err
		}
		c = Change{Line: LineZerolayer, Version: m.Version, Name: m.Name, Direction: DirectionDown, Duration: time.Since(start)}
		ok = true
		return nil
	})
	return c, ok, err
}

func newRiverMigrator(pool *pgxpool.Pool) (*rivermigrate.Migrator[pgx.Tx], error) {
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return nil, fmt.Errorf("migrations: River migrator: %w", err)
	}
	return m, nil
}

// riverMigrate runs River's migrations one version at a time, holding the
// migration lock for the whole run so that concurrent Up calls do not race
// on them. River's Migrate applies each version in a transaction of its own
// (one transaction for all of them is not possible: a River migration uses
// an enum value added by the one before) on the pool's other connections,
// so the lock is the session-level form of inLockedTx's, held on a
// connection of its own (see sessionLock).
func riverMigrate(ctx context.Context, pool *pgxpool.Pool, dir rivermigrate.Direction) ([]Change, error) {
	migrator, err := newRiverMigrator(pool)
	if err != nil {
		return nil, err
	}
	unlock, err := sessionLock(ctx, pool)
	if err != nil {
		return nil, err
	}
	defer unlock()
	var changes []Change
	for {
		res, err := migrator.Migrate(ctx, dir, &rivermigrate.MigrateOpts{MaxSteps: 1})
		if err != nil {
			return changes, fmt.Errorf("migrations: River migrate %s: %w", dir, err)
		}
		if len(res.Versions) == 0 {
			return changes, nil
		}
		for _, v := range res.Versions {
			changes = append(changes, Change{Line: LineRiver, Version: v.Version, Name: v.Name, Direction: string(dir), Duration: v.Duration})
		}
	}
}

// sessionLock takes the migration lock (the advisory lock inLockedTx takes
// for a transaction; the two forms exclude each other) on a connection
// acquired for it, and holds it until unlock is called. The work done under
// it needs other connections, so the pool must have at least two.
func sessionLock(ctx context.Context, pool *pgxpool.Pool) (unlock func(), err error) {
	if n := pool.Config().MaxConns; n < 2 {
		return nil, fmt.Errorf("migrations: the pool has %d connection; migrating needs 2 (one holds the migration lock), so set pool_max_conns to 2 or more", n)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrations: take the migration lock: %w", err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtext($1), hashtext(current_schema()))", Table); err != nil {
		// Closed, the connection cannot keep a lock it may have taken.
		conn.Conn().Close(context.WithoutCancel(ctx))
		conn.Release()
		return nil, fmt.Errorf("migrations: take the migration lock: %w", err)
	}
	return func() {
		// Unlock even when ctx is done; a connection that cannot unlock
		// is closed, which releases the lock, rather than returned to the
		// pool holding it.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, "SELECT pg_advisory_unlock(hashtext($1), hashtext(current_schema()))", Table); err != nil {
			conn.Conn().Close(uctx)
		}
		conn.Release()
	}, nil
}
