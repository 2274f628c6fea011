package finance

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/billing/price"
	"github.com/zerolayer/zerolayer/contracts"
)

// BatchReport is what one batch of a tenant cost: the jobs whose requests
// carried metadata batch_id = Batch, with exact (unrounded) costs, whenever
// they ran.
type BatchReport struct {
	Tenant string `json:"tenant"`
	Batch  string `json:"batch"`
	// Currency is the charges' currency; empty when there are none.
	Currency string `json:"currency"`
	// Total covers the rated jobs; InvoiceTotal rounds its cost.
	Total        Group  `json:"total"`
	InvoiceTotal string `json:"invoice_total"`
	// ByStatus splits Total by how the jobs ended (completed, failed,
	// canceled: canceled jobs are billed for what ran).
	ByStatus []Group `json:"by_status"`
	// Unrated counts the batch's usage records not rated yet.
	Unrated int64 `json:"unrated"`
	// Lines has one entry per job, by custom_id.
	Lines []BatchLine `json:"lines"`
}

// BatchLine is one job of a batch.
type BatchLine struct {
	CustomID     string   `json:"custom_id"`
	JobID        string   `json:"job_id"`
	Status       string   `json:"status"`
	InputTokens  int64    `json:"input_tokens"`
	OutputTokens int64    `json:"output_tokens"`
	Tags         []string `json:"tags"`
	// Cost is nil until the job is rated; PriceBookID names the book
	// that rated it (unique: "pb<id>"), PriceBookVersion its version
	// within its scope.
	Cost             *price.Breakdown `json:"cost"`
	PriceBookID      int64            `json:"price_book_id,omitempty"`
	PriceBookVersion int              `json:"price_book_version,omitempty"`
}

// BuildBatchReport reads the report of tenant's batch from db. It returns
// ledger.ErrUnknownTenant for a tenant billing has never heard of, ErrUnknownBatch
// for a batch with no usage recorded under tenant, and ErrMixedCurrency
// when the batch's charges are in more than one currency.
func BuildBatchReport(ctx context.Context, db DB, tenant, batch string) (*BatchReport, error) {
	if err := contracts.ValidateTenant(tenant); err != nil {
		return nil, err
	}
	if batch == "" {
		return nil, fmt.Errorf("billing: batch report of %s: no batch id", tenant)
	}
	if err := ledger.CheckTenant(ctx, db, tenant); err != nil {
		return nil, err
	}
	r := &BatchReport{Tenant: tenant, Batch: batch}
	fail := func(err error) (*BatchReport, error) {
		return nil, fmt.Errorf("billing: report of %s batch %s: %w", tenant, batch, err)
	}
	var known bool
	if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM usage WHERE tenant_id = $1 AND batch_id = $2)`, tenant, batch).Scan(&known); err != nil {
		return fail(err)
	}
	if !known {
		return nil, fmt.Errorf("%w %q of tenant %s: no usage recorded for it (a batch appears once its first job's usage is ingested)", ErrUnknownBatch, batch, tenant)
	}
	const where = `FROM charges c JOIN usage u USING (tenant_id, job_id) WHERE u.tenant_id = $1 AND u.batch_id = $2`
	cur, currencies, err := currencyOf(ctx, db, where, tenant, batch)
	if err != nil {
		return fail(err)
	}
	if currencies != nil {
		return nil, fmt.Errorf("%w: %s batch %s has charges in %v", ErrMixedCurrency, tenant, batch, currencies)
	}
	r.Currency = cur
	if r.Total, err = scanGroup(db.QueryRow(ctx, `SELECT `+groupColumns+` `+where, tenant, batch), false); err != nil {
		return fail(err)
	}
	r.InvoiceTotal = price.RoundInvoice(r.Total.Cost.Total, r.Currency).StringFixedBank(price.MinorUnits(r.Currency))
	rows, err := db.Query(ctx, `SELECT u.status, `+groupColumns+` `+where+` GROUP BY 1 ORDER BY 1`, tenant, batch)
	if err != nil {
		return fail(err)
	}
	if r.ByStatus, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Group, error) { return scanGroup(row, true) }); err != nil {
		return fail(err)
	}
	rows, err = db.Query(ctx, `
		SELECT coalesce(u.custom_id, ''), u.job_id, u.status, u.input_tokens, u.output_tokens,
			c.job_id IS NOT NULL, coalesce(c.tags, '{}'), coalesce(c.price_book_version, 0), coalesce(c.price_book_id, 0),
			coalesce(c.cost_input, 0), coalesce(c.cost_cached_input, 0), coalesce(c.cost_embedding_input, 0), coalesce(c.cost_output, 0),
			coalesce(c.cost_ttft, 0), coalesce(c.cost_tool, 0), coalesce(c.total, 0)
		FROM usage u LEFT JOIN charges c USING (tenant_id, job_id)
		WHERE u.tenant_id = $1 AND u.batch_id = $2
		ORDER BY u.custom_id, u.job_id`, tenant, batch)
	if err != nil {
		return fail(err)
	}
	r.Lines, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (BatchLine, error) {
		var l BatchLine
		var rated bool
		var b price.Breakdown
		err := row.Scan(&l.CustomID, &l.JobID, &l.Status, &l.InputTokens, &l.OutputTokens, &rated, &l.Tags, &l.PriceBookVersion, &l.PriceBookID,
			&b.Input, &b.CachedInput, &b.EmbeddingInput, &b.Output, &b.TTFT, &b.Tool, &b.Total)
		if rated {
			l.Cost = &b
		} else {
			r.Unrated++
		}
		return l, err
	})
	if err != nil {
		return fail(err)
	}
	return r, nil
}

// Write writes r in format f: table (totals, then one line per job), csv
// (one row per job, BatchCSVHeader) or json. HTML is for period reports.
func (r *BatchReport) Write(w io.Writer, f Format) error {
	switch f {
	case FormatJSON:
		return writeIndentedJSON(w, r)
	case FormatCSV:
		return r.writeCSV(w)
	case FormatTable:
		return r.writeTable(w)
	}
	return fmt.Errorf("%w %q for a batch report; use table, csv or json", ErrInvalidFormat, f)
}

// BatchCSVHeader is the header of a batch report's CSV: one row per job,
// amounts exact and unrounded, empty while the job is not rated.
var BatchCSVHeader = []string{
	"tenant", "batch", "custom_id", "job_id", "status", "input_tokens", "output_tokens", "currency",
	"cost_input", "cost_cached_input", "cost_embedding_input", "cost_output", "cost_ttft", "cost_tool", "cost_total", "price_book",
	"price_book_version", "tags",
}

func (r *BatchReport) writeCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(BatchCSVHeader); err != nil {
		return err
	}
	for _, l := range r.Lines {
		cost := make([]string, 9)
		if c := l.Cost; c != nil {
			cost = []string{c.Input.String(), c.CachedInput.String(), c.EmbeddingInput.String(), c.Output.String(), c.TTFT.String(), c.Tool.String(), c.Total.String(),
				fmt.Sprintf("pb%d", l.PriceBookID), strconv.Itoa(l.PriceBookVersion)}
		}
		row := append([]string{r.Tenant, r.Batch, l.CustomID, l.JobID, l.Status, itoa(l.InputTokens), itoa(l.OutputTokens), r.Currency},
			append(cost, strings.Join(l.Tags, " "))...)
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func (r *BatchReport) writeTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	cur := r.Currency
	if cur == "" {
		cur = "-"
	}
	p("tenant %s, batch %s, currency %s\n", r.Tenant, r.Batch, cur)
	p("jobs %d rated, %d not yet rated; input tokens %d, output tokens %d\n", r.Total.Jobs, r.Unrated, r.Total.InputTokens, r.Total.OutputTokens)
	for _, g := range r.ByStatus {
		p("  %s: %d jobs, %s\n", g.Key, g.Jobs, g.Cost.Total)
	}
	p("total %s, invoice total %s %s\n\n", r.Total.Cost.Total, r.InvoiceTotal, cur)
	p("custom_id\tjob_id\tstatus\tinput tok\toutput tok\ttotal\ttags\t\n")
	for _, l := range r.Lines {
		total := "(not rated)"
		if l.Cost != nil {
			total = l.Cost.Total.String()
		}
		p("%s\t%s\t%s\t%d\t%d\t%s\t%s\t\n", l.CustomID, l.JobID, l.Status, l.InputTokens, l.OutputTokens, total, strings.Join(l.Tags, " "))
	}
	return tw.Flush()
}

// WriteBatchTotals writes batch totals as a table, CSV (one row per batch
// and currency, amounts exact) or JSON.
func WriteBatchTotals(w io.Writer, totals []ledger.BatchTotal, f Format) error {
	switch f {
	case FormatJSON:
		return writeIndentedJSON(w, totals)
	case FormatCSV:
		cw := csv.NewWriter(w)
		cw.Write([]string{"tenant", "batch", "currency", "jobs", "completed", "failed", "canceled", "input_tokens", "output_tokens",
			"embedding_input_tokens", "cost_input", "cost_cached_input", "cost_embedding_input", "cost_output", "cost_ttft", "cost_tool", "cost_total",
			"first_created_at", "last_finished_at"})
		for _, b := range totals {
			cw.Write([]string{b.Tenant, b.Batch, b.Currency, itoa(b.Jobs), itoa(b.Completed), itoa(b.Failed), itoa(b.Canceled),
				itoa(b.InputTokens), itoa(b.OutputTokens), itoa(b.EmbeddingInputTokens), b.Cost.Input.String(), b.Cost.CachedInput.String(),
				b.Cost.EmbeddingInput.String(), b.Cost.Output.String(), b.Cost.TTFT.String(), b.Cost.Tool.String(), b.Cost.Total.String(),
				b.FirstCreatedAt.Format(time.RFC3339), b.LastFinishedAt.Format(time.RFC3339)})
		}
		cw.Flush()
		return cw.Error()
	case FormatTable:
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "batch\tjobs\tcompleted\tfailed\tcanceled\tinput tok\toutput tok\ttotal\tcurrency\tlast finished\t\n")
		for _, b := range totals {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t\n", b.Batch, b.Jobs, b.Completed, b.Failed, b.Canceled,
				b.InputTokens, b.OutputTokens, b.Cost.Total, b.Currency, b.LastFinishedAt.Format(time.RFC3339))
		}
		return tw.Flush()
	}
	return fmt.Errorf("%w %q for batch totals; use table, csv or json", ErrInvalidFormat, f)
}
