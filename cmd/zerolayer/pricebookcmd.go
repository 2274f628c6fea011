package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shopspring/decimal"
	"github.com/zerolayer/zerolayer/billing/finance"
	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/billing/price"
)

// runPriceBook is `zerolayer pricebook`: create, list, show and end the
// versioned price books billing rates usage with.
func runPriceBook(ctx context.Context, args []string) error {
	sub, args, err := parseSub(newFlags("pricebook"), args)
	if err != nil {
		return err
	}
	switch sub {
	case "create":
		return priceBookCreate(ctx, args)
	case "list":
		return priceBookList(ctx, args)
	case "show":
		return priceBookShow(ctx, args)
	default: // "end": parseSub knows only these.
		return priceBookEnd(ctx, args)
	}
}

// priceBookCreate is `zerolayer pricebook create`: a new version of a
// scope, its coefficients not given copied from the book in force.
func priceBookCreate(ctx context.Context, args []string) error {
	fs := newFlags("pricebook create")
	tenant := fs.String("tenant", "", "`TENANT` the book is for (default: a default book, for every tenant without a book of its own)")
	model := fs.String("model", "", "`MODEL` the book is for (default: any model)")
	fromS := fs.String("effective-from", "", "when the prices start to apply to jobs submitted from then on: 2026-11-15 (midnight UTC) or an RFC 3339 `TIME` (required)")
	toS := fs.String("effective-to", "", "when the book ends, a `TIME` as --effective-from (default: open, until a later version takes over)")
	currency := fs.String("currency", "", "ISO 4217 `CODE` of the prices (default: the currency of the book in force, else USD)")
	prices := []struct {
		name string
		f    *decimalFlag
		dst  func(*price.Book) *decimal.Decimal
	}{
		{"input", decimalVar(fs, "input", "price of one input token", false, false), func(pb *price.Book) *decimal.Decimal { return &pb.PIn }},
		{"output", decimalVar(fs, "output", "price of one output token", false, false), func(pb *price.Book) *decimal.Decimal { return &pb.POut }},
		{"ttft", decimalVar(fs, "ttft", "price of one millisecond of time to first token", false, false), func(pb *price.Book) *decimal.Decimal { return &pb.PTTFT }},
		{"tool", decimalVar(fs, "tool", "price of one millisecond of inline tool execution", false, false), func(pb *price.Book) *decimal.Decimal { return &pb.PTool }},
	}
	cached := decimalVar(fs, "cached-input", "price of one cached input token (prefix cache), or none: the input price", true, false)
	embed := decimalVar(fs, "embedding-input", "price of one input token of an embedding job, or none: the input price", true, false)
	mults := []struct {
		name string
		f    *decimalFlag
		dst  func(*price.Book) *decimal.Decimal
	}{
		{"priority-high", decimalVar(fs, "priority-high", "multiplier of the cost of a high-priority job", false, true), func(pb *price.Book) *decimal.Decimal { return &pb.MultHigh }},
		{"priority-normal", decimalVar(fs, "priority-normal", "multiplier of the cost of a normal-priority job", false, true), func(pb *price.Book) *decimal.Decimal { return &pb.MultNormal }},
		{"priority-low", decimalVar(fs, "priority-low", "multiplier of the cost of a low-priority job", false, true), func(pb *price.Book) *decimal.Decimal { return &pb.MultLow }},
		{"batch", decimalVar(fs, "batch", "multiplier of the cost of a job of a batch, on top of its priority's", false, true), func(pb *price.Book) *decimal.Decimal { return &pb.MultBatch }},
	}
	note := fs.String("note", "", "free `TEXT` for people: why the version exists")
	formatS := fs.String("format", "table", "output format: table or json")
	dbURL := addDatabaseFlag(fs, "")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	format, err := parseBookFormat(*formatS)
	if err != nil {
		return err
	}
	if *fromS == "" {
		return usagef("--effective-from is required")
	}
	from, err := parseReportTime(*fromS)
	if err != nil {
		return usagef("--effective-from: %v", err)
	}
	pb := price.Book{Tenant: *tenant, Model: *model, EffectiveAt: from.UTC(), Note: *note}
	if *toS != "" {
		to, err := parseReportTime(*toS)
		if err != nil {
			return usagef("--effective-to: %v", err)
		}
		if !to.After(from) {
			return usagef("--effective-to %s is not after --effective-from %s", *toS, *fromS)
		}
		to = to.UTC()
		pb.EffectiveTo = &to
	}
	pool, err := openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	base, err := ledger.EffectivePriceBook(ctx, pool, *tenant, *model, from)
	hasBase := err == nil
	if err != nil && !errors.Is(err, ledger.ErrNoPriceBook) {
		return err
	}
	// Every coefficient not given comes from base; without one, the
	// prices are required and the multipliers are 1.
	var copied, copiedPrices, missing []string
	for _, p := range prices {
		switch {
		case p.f.set:
			*p.dst(&pb) = p.f.d
		case hasBase:
			*p.dst(&pb) = *p.dst(&base)
			copied, copiedPrices = append(copied, p.name), append(copiedPrices, "--"+p.name)
		default:
			missing = append(missing, "--"+p.name)
		}
	}
	// The optional prices: given, none (the input price), or copied; a
	// copied none is in no currency.
	for _, o := range []struct {
		name string
		f    *decimalFlag
		dst  func(*price.Book) **decimal.Decimal
	}{
		{"cached-input", cached, func(pb *price.Book) **decimal.Decimal { return &pb.PCachedIn }},
		{"embedding-input", embed, func(pb *price.Book) **decimal.Decimal { return &pb.PEmbedIn }},
	} {
		switch {
		case o.f.set && o.f.none:
		case o.f.set:
			d := o.f.d
			*o.dst(&pb) = &d
		case hasBase:
			*o.dst(&pb) = *o.dst(&base)
			copied = append(copied, o.name)
			if *o.dst(&base) != nil {
				copiedPrices = append(copiedPrices, "--"+o.name)
			}
		}
	}
	for _, m := range mults {
		switch {
		case m.f.set:
			*m.dst(&pb) = m.f.d
		case hasBase:
			*m.dst(&pb) = *m.dst(&base)
			copied = append(copied, m.name)
		}
	}
	if len(missing) > 0 {
		return usagef("no price book is in force for %s at %s to copy prices from: give %s",
			scopeText(*tenant, *model), from.UTC().Format(time.RFC3339), strings.Join(missing, ", "))
	}
	pb.Currency = *currency
	switch {
	case pb.Currency == "" && hasBase:
		pb.Currency = base.Currency
	case pb.Currency == "":
		pb.Currency = "USD"
	case hasBase && pb.Currency != base.Currency && len(copiedPrices) > 0:
		return usagef("--currency %s is not the currency of %s (%s, %s), whose prices would be copied: give %s too",
			pb.Currency, base.Name(), base.Scope(), base.Currency, strings.Join(copiedPrices, ", "))
	}
	created, err := finance.CreatePriceBook(ctx, pool, pb)
	if err != nil {
		return err
	}
	if len(copied) > 0 {
		fmt.Fprintf(stderr, "zerolayer pricebook create: %s copied from %s (%s), in force at %s\n",
			strings.Join(copied, ", "), base.Name(), base.Scope(), from.UTC().Format(time.RFC3339))
	}
	return writeBook(created, format)
}

// priceBookList is `zerolayer pricebook list`.
func priceBookList(ctx context.Context, args []string) error {
	fs := newFlags("pricebook list")
	tenant := fs.String("tenant", "", "only `TENANT`'s books and the default books")
	model := fs.String("model", "", "only `MODEL`'s books and the books of any model")
	atS := fs.String("at", "", "only the books in force at `TIME` (2026-11-15 or RFC 3339), one per scope")
	formatS := fs.String("format", "table", "output format: table or json")
	dbURL := addDatabaseFlag(fs, "")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	format, err := parseBookFormat(*formatS)
	if err != nil {
		return err
	}
	f := ledger.PriceBookFilter{Tenant: *tenant, Model: *model}
	if *atS != "" {
		if f.At, err = parseReportTime(*atS); err != nil {
			return usagef("--at: %v", err)
		}
	}
	pool, err := openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	books, err := ledger.ListPriceBooks(ctx, pool, f)
	if err != nil {
		return err
	}
	if format == finance.FormatJSON {
		out := make([]priceBookJSON, len(books))
		for i, pb := range books {
			out[i] = bookJSON(pb)
		}
		return writeJSON(out)
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(bookColumns, "\t"))
	for _, pb := range books {
		fmt.Fprintln(tw, strings.Join(bookCells(pb), "\t"))
	}
	return tw.Flush()
}

// priceBookShow is `zerolayer pricebook show`.
func priceBookShow(ctx context.Context, args []string) error {
	fs := newFlags("pricebook show")
	formatS := fs.String("format", "table", "output format: table or json")
	dbURL := addDatabaseFlag(fs, "")
	id, err := parseBookArgs(fs, args)
	if err != nil {
		return err
	}
	format, err := parseBookFormat(*formatS)
	if err != nil {
		return err
	}
	pool, err := openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	pb, err := ledger.GetPriceBook(ctx, pool, id)
	if err != nil {
		return bookError(id, err)
	}
	return writeBook(pb, format)
}

// priceBookEnd is `zerolayer pricebook end`.
func priceBookEnd(ctx context.Context, args []string) error {
	fs := newFlags("pricebook end")
	atS := fs.String("at", "", "when the book ends: 2026-11-15 (midnight UTC) or an RFC 3339 `TIME` (required)")
	formatS := fs.String("format", "table", "output format: table or json")
	dbURL := addDatabaseFlag(fs, "")
	id, err := parseBookArgs(fs, args)
	if err != nil {
		return err
	}
	format, err := parseBookFormat(*formatS)
	if err != nil {
		return err
	}
	if *atS == "" {
		return usagef("--at is required")
	}
	at, err := parseReportTime(*atS)
	if err != nil {
		return usagef("--at: %v", err)
	}
	pool, err := openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	pb, err := finance.EndPriceBook(ctx, pool, id, at)
	if err != nil {
		return bookError(id, err)
	}
	if err := writeBook(pb, format); err != nil {
		return err
	}
	next := "no price book: such usage cannot be rated until one is created"
	if nb, err := ledger.EffectivePriceBook(ctx, pool, pb.Tenant, pb.Model, at); err == nil {
		next = fmt.Sprintf("%s (%s)", nb.Name(), nb.Scope())
	} else if !errors.Is(err, ledger.ErrNoPriceBook) {
		return err
	}
	fmt.Fprintf(stderr, "zerolayer pricebook end: %s (%s) ends at %s; usage of %s submitted from then on is priced by %s. "+
		"Charges already made keep their price book until re-rated with 'zerolayer rerate'.\n",
		pb.Name(), pb.Scope(), at.UTC().Format(time.RFC3339), scopeText(pb.Tenant, pb.Model), next)
	return nil
}

// parseBookArgs parses the flags of fs and its one argument, a price
// book: pb7 or 7.
func parseBookArgs(fs *flag.FlagSet, args []string) (int64, error) {
	pos, err := parseArgs(fs, args)
	if err != nil {
		return 0, err
	}
	if len(pos) != 1 {
		return 0, usagef("give one price book, such as pb7 (its NAME in 'zerolayer pricebook list')")
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(pos[0], "pb"), 10, 64)
	if err != nil || id <= 0 {
		return 0, usagef("%q is not a price book: want pbN or N, such as pb7", pos[0])
	}
	return id, nil
}

// bookError explains an unknown book id; other errors are returned as
// they are.
func bookError(id int64, err error) error {
	if errors.Is(err, ledger.ErrNotFound) {
		return fmt.Errorf("there is no price book pb%d (id %d); 'zerolayer pricebook list' lists them", id, id)
	}
	return err
}

// scopeText names a scope as PriceBook.Scope does, without the version.
func scopeText(tenant, model string) string {
	return cmp.Or(tenant, "default") + "/" + cmp.Or(model, "any model")
}

// parseBookFormat reads the --format of the pricebook and tags commands:
// table or json.
func parseBookFormat(s string) (finance.Format, error) {
	switch f := finance.Format(s); f {
	case finance.FormatTable, finance.FormatJSON:
		return f, nil
	}
	return "", usagef("--format %q: want table or json", s)
}

// writeJSON writes v to stdout as indented JSON.
func writeJSON(v any) error {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// bookColumns are the columns of a price book in tables; bookCells gives
// their values.
var bookColumns = []string{"NAME", "TENANT", "MODEL", "VERSION", "FROM", "TO", "CURRENCY", "INPUT", "CACHED INPUT", "EMBED INPUT",
	"OUTPUT", "TTFT/MS", "TOOL/MS", "HIGH×", "NORMAL×", "LOW×", "BATCH×", "NOTE"}

func bookCells(pb price.Book) []string {
	to := "open"
	if pb.EffectiveTo != nil {
		to = pb.EffectiveTo.UTC().Format(time.RFC3339)
	}
	orInput := func(p *decimal.Decimal) string {
		if p == nil {
			return "= input"
		}
		return p.String()
	}
	return []string{pb.Name(), cmp.Or(pb.Tenant, "default"), cmp.Or(pb.Model, "any"), strconv.Itoa(pb.Version),
		pb.EffectiveAt.UTC().Format(time.RFC3339), to, pb.Currency, pb.PIn.String(), orInput(pb.PCachedIn), orInput(pb.PEmbedIn), pb.POut.String(),
		pb.PTTFT.String(), pb.PTool.String(), pb.MultHigh.String(), pb.MultNormal.String(), pb.MultLow.String(),
		pb.MultBatch.String(), pb.Note}
}

// writeBook writes one book: in a table, one line per column of the
// list, with its scope.
func writeBook(pb price.Book, format finance.Format) error {
	if format == finance.FormatJSON {
		return writeJSON(bookJSON(pb))
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	cells := bookCells(pb)
	fmt.Fprintf(tw, "NAME\t%s\nSCOPE\t%s\n", cells[0], pb.Scope())
	for i := 1; i < len(bookColumns); i++ {
		fmt.Fprintf(tw, "%s\t%s\n", bookColumns[i], cells[i])
	}
	return tw.Flush()
}

// priceBookJSON is a book as the commands write it in JSON: with its
// name and scope.
type priceBookJSON struct {
	Name  string `json:"name"`
	Scope string `json:"scope"`
	price.Book
}

func bookJSON(pb price.Book) priceBookJSON {
	return priceBookJSON{Name: pb.Name(), Scope: pb.Scope(), Book: pb}
}

// decimalFlag is a decimal flag: unset, a decimal ≥ 0 (> 0 for a
// multiplier), or none where allowed.
type decimalFlag struct {
	set, none       bool
	d               decimal.Decimal
	allowNone, mult bool
}

// decimalVar defines a decimal flag; allowNone accepts "none", and mult
// asks for a multiplier (> 0).
func decimalVar(fs *flag.FlagSet, name, usage string, allowNone, mult bool) *decimalFlag {
	v := &decimalFlag{allowNone: allowNone, mult: mult}
	if mult {
		usage += ", > 0 (1 changes nothing)"
	} else {
		usage += ", a decimal ≥ 0 such as 0.000003"
	}
	fs.Var(v, name, usage+" (default: that of the book in force)")
	return v
}

func (v *decimalFlag) String() string { return "" }

func (v *decimalFlag) Set(s string) error {
	v.set = true
	if v.allowNone && s == "none" {
		v.none = true
		return nil
	}
	d, err := decimal.NewFromString(strings.TrimSpace(s))
	switch {
	case err != nil:
		return errors.New("want a decimal number such as 0.000003")
	case d.IsNegative():
		return errors.New("must not be negative")
	case v.mult && d.IsZero():
		return errors.New("a multiplier must be more than 0 (1 changes nothing)")
	}
	v.d = d
	return nil
}
