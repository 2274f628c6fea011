package billing

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/contracts"
)

// AddCredit stores a credit or an adjustment on tenant's period c.Period
// (a month, 2006-01), which must be open: a credit lowers the invoice by
// c.Amount (given positive or negative, stored negative); an adjustment
// adds c.Amount with its sign. Reason and CreatedBy are required. The
// currency must be that of the period's charges (ErrMixedCurrency). It
// returns the stored credit; an invoiced period wraps ErrPeriodLocked.
func AddCredit(ctx context.Context, db Beginner, c Credit) (Credit, error) {
	bad := func(format string, a ...any) (Credit, error) {
		return Credit{}, fmt.Errorf("%w: %s", ErrInvalidCredit, fmt.Sprintf(format, a...))
	}
	if err := contracts.ValidateTenant(c.Tenant); err != nil {
		return bad("%v", err)
	}
	m, err := ParsePeriod(c.Period)
	if err != nil {
		return Credit{}, err
	}
	switch c.Kind {
	case LineCredit:
		c.Amount = c.Amount.Abs().Neg()
	case LineAdjustment:
	default:
		return bad("kind %q is neither credit nor adjustment", c.Kind)
	}
	switch {
	case c.Amount.IsZero():
		return bad("the amount is zero")
	case !currencyRE.MatchString(c.Currency):
		return bad("currency %q is not an ISO 4217 code such as USD", c.Currency)
	case strings.TrimSpace(c.Reason) == "":
		return bad("give the reason (it is printed on the invoice)")
	case strings.TrimSpace(c.CreatedBy) == "":
		return bad("say who adds it")
	case c.Amount.Exponent() < -MinorUnits(c.Currency)-6:
		return bad("amount %s has more decimals than %s needs", c.Amount, c.Currency)
	}
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if err := checkTenant(ctx, tx, c.Tenant); err != nil {
			return err
		}
		if err := lockOpenPeriods(ctx, tx, [][2]string{{c.Tenant, c.Period}}); err != nil {
			return err
		}
		cur, others, err := currencyOf(ctx, tx, `FROM charges c WHERE c.tenant_id = $1 AND c.period = $2::date`, c.Tenant, m.Format(time.DateOnly))
		if err != nil {
			return err
		}
		if (cur != "" && cur != c.Currency) || others != nil {
			return fmt.Errorf("%w: %s's charges of %s are in %s, the credit in %s", ErrMixedCurrency, c.Tenant, c.Period,
				cmp.Or(cur, strings.Join(others, ", ")), c.Currency)
		}
		return tx.QueryRow(ctx, `INSERT INTO credits (tenant_id, period, kind, amount, currency, reason, created_by)
			VALUES ($1, $2::date, $3, $4, $5, $6, $7) RETURNING id, created_at`,
			c.Tenant, m.Format(time.DateOnly), c.Kind, c.Amount, c.Currency, c.Reason, c.CreatedBy).Scan(&c.ID, &c.CreatedAt)
	})
	if err != nil {
		return Credit{}, fmt.Errorf("billing: add %s of %s to %s: %w", c.Kind, c.Tenant, c.Period, err)
	}
	return c, nil
}

// ListCredits returns tenant's credits and adjustments, of period when
// not empty, oldest first.
func ListCredits(ctx context.Context, db DB, tenant, period string) ([]Credit, error) {
	var m *string
	if period != "" {
		p, err := ParsePeriod(period)
		if err != nil {
			return nil, err
		}
		s := p.Format(time.DateOnly)
		m = &s
	}
	rows, err := db.Query(ctx, `
		SELECT c.id, c.tenant_id, to_char(c.period, 'YYYY-MM'), c.kind, c.amount, c.currency, c.reason, c.created_by, c.created_at,
			coalesce(i.number, '')
		FROM credits c LEFT JOIN invoices i ON i.id = c.invoice_id
		WHERE c.tenant_id = $1 AND ($2::date IS NULL OR c.period = $2::date)
		ORDER BY c.id`, tenant, m)
	if err != nil {
		return nil, fmt.Errorf("billing: list credits of %s: %w", tenant, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Credit, error) {
		var c Credit
		err := row.Scan(&c.ID, &c.Tenant, &c.Period, &c.Kind, &c.Amount, &c.Currency, &c.Reason, &c.CreatedBy, &c.CreatedAt, &c.Invoice)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("billing: list credits of %s: %w", tenant, err)
	}
	return out, nil
}

// CloseRequest asks to close a tenant's period with an invoice.
type CloseRequest struct {
	Tenant string
	// Period is the month to close, 2006-01.
	Period string
	// By is who closes it (required).
	By string
	// Early allows closing the month before it ended (a customer who
	// leaves): usage of the rest of the month is billed in the next one.
	Early bool
	// AllowUnrated closes the month even while some of its usage is not
	// rated yet; those records are billed in the next period. Without it
	// such a close fails with ErrUnratedUsage.
	AllowUnrated bool
	// Now is the time of issue; the zero value is time.Now().
	Now time.Time
}

// CloseInvoice closes a tenant's period: within one transaction holding
// the period's lock (see periodLock) it gathers the period's charges into
// usage lines (one per model, priority, batch or not, price book and
// dimension), the period's credits and adjustments into lines of their
// own, applies the tenant's tax rate, numbers the invoice (gapless per
// year) and stores it. From then on the period is locked: a re-rating of
// it fails with ErrPeriodLocked, and usage of it rated later is billed in
// the next open period. It returns ErrPeriodLocked for a period already
// invoiced, ErrInvalidPeriod for one not ended (without Early),
// ErrUnratedUsage (without AllowUnrated), ErrMixedCurrency when the
// period's charges and credits are not all in one currency, and
// ErrUnknownTenant.
func CloseInvoice(ctx context.Context, db Beginner, req CloseRequest) (*Invoice, error) {
	if err := contracts.ValidateTenant(req.Tenant); err != nil {
		return nil, err
	}
	m, err := ParsePeriod(req.Period)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.By) == "" {
		return nil, fmt.Errorf("%w: say who closes the period", ErrInvalidPeriod)
	}
	now := req.Now
	if now.IsZero() {
		now = time.Now()
	}
	now = now.UTC()
	end := m.AddDate(0, 1, 0)
	note := ""
	if now.Before(end) {
		if !req.Early {
			return nil, fmt.Errorf("%w: %s has not ended (it ends %s); close it early only for a tenant that leaves (Early)",
				ErrInvalidPeriod, req.Period, end.Format(time.RFC3339))
		}
		note = fmt.Sprintf("closed early, at %s: later usage of %s is billed in %s", now.Format(time.RFC3339), req.Period, periodName(end))
	}
	var inv *Invoice
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var err error
		inv, err = closeTx(ctx, tx, req, m, now, note)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("billing: close %s of %s: %w", req.Period, req.Tenant, err)
	}
	return inv, nil
}

func closeTx(ctx context.Context, tx pgx.Tx, req CloseRequest, m, now time.Time, note string) (*Invoice, error) {
	cust, err := GetTenantBilling(ctx, tx, req.Tenant)
	if err != nil {
		return nil, err
	}
	// The tenant's row first (two closes of one tenant queue here; FOR NO
	// KEY UPDATE, so that the charges and credits a rating or a credit
	// inserts meanwhile, whose foreign key takes a KEY SHARE lock of the
	// row, do not wait for this close while it waits for their period
	// lock: a deadlock), then the period, exclusively: ratings,
	// re-ratings and credits of it hold the shared side while they write.
	if _, err := tx.Exec(ctx, `SELECT 1 FROM tenants WHERE id = $1 FOR NO KEY UPDATE`, req.Tenant); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+periodLock+`)`, req.Tenant, periodName(m)); err != nil {
		return nil, err
	}
	if number, err := invoiceOf(ctx, tx, req.Tenant, m); err != nil {
		return nil, err
	} else if number != "" {
		return nil, fmt.Errorf("%w: %s of %s is invoiced already (%s)", ErrPeriodLocked, req.Period, req.Tenant, number)
	}
	day := m.Format(time.DateOnly)
	if !req.AllowUnrated {
		var unrated int64
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM usage u LEFT JOIN charges c USING (tenant_id, job_id)
			WHERE u.tenant_id = $1 AND u.created_at >= $2 AND u.created_at < $3 AND c.job_id IS NULL`,
			req.Tenant, m, m.AddDate(0, 1, 0)).Scan(&unrated); err != nil {
			return nil, err
		}
		if unrated > 0 {
			return nil, fmt.Errorf("%w: %d usage records of %s are not rated yet (is the billing service running?); wait for them, or close anyway and bill them in the next period",
				ErrUnratedUsage, unrated, req.Period)
		}
	}
	cur, others, err := currencyOf(ctx, tx, `FROM (SELECT currency FROM charges WHERE tenant_id = $1 AND period = $2::date
		UNION ALL SELECT currency FROM credits WHERE tenant_id = $1 AND period = $2::date) c`, req.Tenant, day)
	if err != nil {
		return nil, err
	}
	if others != nil {
		return nil, fmt.Errorf("%w: %s of %s has charges or credits in %v", ErrMixedCurrency, req.Period, req.Tenant, others)
	}
	if cur == "" {
		cur = "USD"
		if pb, err := EffectivePriceBook(ctx, tx, req.Tenant, "", m); err == nil {
			cur = pb.Currency
		}
	}
	inv := &Invoice{Tenant: req.Tenant, Period: req.Period, Currency: cur, IssuedAt: now, Customer: cust.Customer,
		TaxRate: cust.TaxRate, ClosedBy: req.By, Note: note, DueAt: now.AddDate(0, 0, cust.PaymentTermsDays).Format(time.DateOnly)}
	if inv.Lines, inv.Jobs, err = usageLines(ctx, tx, req.Tenant, day); err != nil {
		return nil, err
	}
	credits, err := ListCredits(ctx, tx, req.Tenant, req.Period)
	if err != nil {
		return nil, err
	}
	for _, c := range credits {
		inv.Lines = append(inv.Lines, InvoiceLine{Kind: c.Kind, Description: fmt.Sprintf("%s: %s (added by %s)", titleCase(c.Kind), c.Reason, c.CreatedBy),
			Quantity: one, UnitPrice: c.Amount, Amount: c.Amount, CreditID: c.ID})
	}
	if inv.Tags, err = tagTotals(ctx, tx, req.Tenant, day); err != nil {
		return nil, err
	}
	inv.finish()

	year := now.Year()
	var seq int
	if err := tx.QueryRow(ctx, `INSERT INTO invoice_numbers (year, last) VALUES ($1, 1)
		ON CONFLICT (year) DO UPDATE SET last = invoice_numbers.last + 1 RETURNING last`, year).Scan(&seq); err != nil {
		return nil, fmt.Errorf("number the invoice: %w", err)
	}
	inv.Number = fmt.Sprintf("INV-%d-%06d", year, seq)
	customer, _ := json.Marshal(inv.Customer)
	tags, _ := json.Marshal(inv.Tags)
	if err := tx.QueryRow(ctx, `INSERT INTO invoices (number, tenant_id, period, currency, issued_at, due_at, customer, tax_rate,
			subtotal, tax, total, amount_due, jobs, tag_summary, closed_by, note)
		VALUES ($1, $2, $3::date, $4, $5, $6::date, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) RETURNING id`,
		inv.Number, inv.Tenant, day, inv.Currency, inv.IssuedAt, inv.DueAt, customer, inv.TaxRate,
		inv.Subtotal, inv.Tax, inv.Total, inv.AmountDue, inv.Jobs, tags, inv.ClosedBy, inv.Note).Scan(&inv.ID); err != nil {
		return nil, fmt.Errorf("store the invoice: %w", err)
	}
	for _, l := range inv.Lines {
		var book *int64
		if l.PriceBookID != 0 {
			book = &l.PriceBookID
		}
		var credit *int64
		if l.CreditID != 0 {
			credit = &l.CreditID
		}
		if _, err := tx.Exec(ctx, `INSERT INTO invoice_lines (invoice_id, line_no, kind, description, model, priority, batch,
				price_book_id, dimension, jobs, quantity, unit, unit_price, amount, amount_display, credit_id)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
			inv.ID, l.No, l.Kind, l.Description, l.Model, l.Priority, l.Batch, book, l.Dimension, l.Jobs,
			l.Quantity, l.Unit, l.UnitPrice, l.Amount, l.AmountDisplay, credit); err != nil {
			return nil, fmt.Errorf("store invoice line %d: %w", l.No, err)
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE credits SET invoice_id = $1 WHERE tenant_id = $2 AND period = $3::date`, inv.ID, req.Tenant, day); err != nil {
		return nil, err
	}
	return inv, nil
}

// finish numbers inv's lines and computes its totals and display amounts.
func (inv *Invoice) finish() {
	amounts := make([]decimal.Decimal, len(inv.Lines))
	inv.Subtotal = decimal.Zero
	for i := range inv.Lines {
		inv.Lines[i].No = i + 1
		amounts[i] = inv.Lines[i].Amount
		inv.Subtotal = inv.Subtotal.Add(inv.Lines[i].Amount)
	}
	for i, d := range DisplayAmounts(amounts, inv.Currency) {
		inv.Lines[i].AmountDisplay = d
	}
	inv.Tax = inv.Subtotal.Mul(inv.TaxRate)
	inv.Total = inv.Subtotal.Add(inv.Tax)
	inv.AmountDue = RoundInvoice(inv.Total, inv.Currency)
	inv.SubtotalDisplay = RoundInvoice(inv.Subtotal, inv.Currency)
	inv.TaxDisplay = inv.AmountDue.Sub(inv.SubtotalDisplay)
}

func titleCase(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// dimensionUnits describes each usage dimension: its charge column, the
// usage quantity it prices, its unit and its price-book column.
var dimensionUnits = []struct {
	dim, cost, quantity, unit, price, label string
}{
	{DimInput, "cost_input", "sum(u.input_tokens - u.cached_input_tokens)", "tokens", "pb.p_in", "input tokens"},
	{DimCachedInput, "cost_cached_input", "sum(u.cached_input_tokens)", "tokens", "coalesce(pb.p_cached_in, pb.p_in)", "cached input tokens"},
	{DimOutput, "cost_output", "sum(u.output_tokens)", "tokens", "pb.p_out", "output tokens"},
	{DimTTFT, "cost_ttft", "sum(u.time_to_first_token_ms)", "ms", "pb.p_ttft", "time to first token"},
	{DimTool, "cost_tool", "sum(u.tool_execution_time_ms)", "ms", "pb.p_tool", "tool execution time"},
}

// usageLines gathers the usage lines of tenant's period (day is its
// first day): one per model, priority, batch or not, price book and
// dimension with a non-zero amount, in that order.
func usageLines(ctx context.Context, tx pgx.Tx, tenant, day string) ([]InvoiceLine, int64, error) {
	var sel []string
	for _, d := range dimensionUnits {
		sel = append(sel, "sum(c."+d.cost+")", d.quantity, "max("+d.price+")")
	}
	rows, err := tx.Query(ctx, `
		SELECT u.model, u.priority, u.batch_id IS NOT NULL, c.price_book_id, pb.version, coalesce(pb.tenant_id, ''), coalesce(pb.model, ''),
			c.multiplier, count(*), `+strings.Join(sel, ", ")+`
		FROM charges c JOIN usage u USING (tenant_id, job_id) JOIN price_books pb ON pb.id = c.price_book_id
		WHERE c.tenant_id = $1 AND c.period = $2::date
		GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
		ORDER BY 1, CASE u.priority WHEN 'high' THEN 0 WHEN 'normal' THEN 1 ELSE 2 END, 3, 4, 8`, tenant, day)
	if err != nil {
		return nil, 0, fmt.Errorf("gather the usage lines: %w", err)
	}
	defer rows.Close()
	var lines []InvoiceLine
	var jobs int64
	for rows.Next() {
		var model, priority, bookTenant, bookModel string
		var batch bool
		var bookID int64
		var version int
		var mult decimal.Decimal
		var n int64
		vals := make([]decimal.Decimal, 3*len(dimensionUnits))
		dest := []any{&model, &priority, &batch, &bookID, &version, &bookTenant, &bookModel, &mult, &n}
		for i := range vals {
			dest = append(dest, &vals[i])
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, 0, fmt.Errorf("gather the usage lines: %w", err)
		}
		jobs += n
		book := PriceBook{ID: bookID, Tenant: bookTenant, Model: bookModel, Version: version}
		for k, d := range dimensionUnits {
			amount, quantity, price := vals[3*k], vals[3*k+1], vals[3*k+2]
			if amount.IsZero() {
				continue
			}
			desc := fmt.Sprintf("%s, %s priority%s: %s", model, priority, map[bool]string{true: ", batch", false: ""}[batch], d.label)
			if mult.Equal(one) {
				desc += fmt.Sprintf(" (%s)", book.Name())
			} else {
				desc += fmt.Sprintf(" (× %s, %s)", mult, book.Name())
			}
			lines = append(lines, InvoiceLine{Kind: LineUsage, Description: desc, Model: model, Priority: priority, Batch: batch,
				PriceBookID: bookID, PriceBook: book.Name() + " " + book.Scope(), Dimension: d.dim, Jobs: n,
				Quantity: quantity, Unit: d.unit, UnitPrice: price.Mul(mult), Amount: amount})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("gather the usage lines: %w", err)
	}
	return lines, jobs, nil
}

// tagTotals sums tenant's charges of a period per value tag.
func tagTotals(ctx context.Context, tx pgx.Tx, tenant, day string) ([]TagTotal, error) {
	rows, err := tx.Query(ctx, `SELECT t.tag, count(*), sum(c.total)
		FROM charges c CROSS JOIN LATERAL unnest(c.tags) AS t(tag)
		WHERE c.tenant_id = $1 AND c.period = $2::date GROUP BY 1 ORDER BY 3 DESC, 1`, tenant, day)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (TagTotal, error) {
		var t TagTotal
		err := row.Scan(&t.Tag, &t.Jobs, &t.Amount)
		return t, err
	})
}

// GetInvoice reads a stored invoice by number (ErrNotFound when there is
// none).
func GetInvoice(ctx context.Context, db DB, number string) (*Invoice, error) {
	invs, err := readInvoices(ctx, db, `WHERE i.number = $1`, number)
	if err != nil {
		return nil, err
	}
	if len(invs) == 0 {
		return nil, fmt.Errorf("%w: invoice %s", ErrNotFound, number)
	}
	return invs[0], nil
}

// GetPeriodInvoice reads tenant's invoice of period (ErrNotFound while
// the period is open).
func GetPeriodInvoice(ctx context.Context, db DB, tenant, period string) (*Invoice, error) {
	m, err := ParsePeriod(period)
	if err != nil {
		return nil, err
	}
	invs, err := readInvoices(ctx, db, `WHERE i.tenant_id = $1 AND i.period = $2::date`, tenant, m.Format(time.DateOnly))
	if err != nil {
		return nil, err
	}
	if len(invs) == 0 {
		return nil, fmt.Errorf("%w: %s of %s is not invoiced", ErrNotFound, period, tenant)
	}
	return invs[0], nil
}

// ListInvoices returns the invoices of tenant (every tenant's when empty),
// without their lines, newest period first.
func ListInvoices(ctx context.Context, db DB, tenant string) ([]*Invoice, error) {
	return readInvoicesHead(ctx, db, `WHERE ($1 = '' OR i.tenant_id = $1) ORDER BY i.period DESC, i.tenant_id`, tenant)
}

const invoiceColumns = `i.id, i.number, i.tenant_id, to_char(i.period, 'YYYY-MM'), i.currency, i.issued_at, to_char(i.due_at, 'YYYY-MM-DD'),
	i.customer, i.tax_rate, i.subtotal, i.tax, i.total, i.amount_due, i.jobs, i.tag_summary, i.closed_by, i.note`

func readInvoicesHead(ctx context.Context, db DB, where string, args ...any) ([]*Invoice, error) {
	rows, err := db.Query(ctx, `SELECT `+invoiceColumns+` FROM invoices i `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("billing: read invoices: %w", err)
	}
	invs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Invoice, error) {
		inv := new(Invoice)
		var customer, tags []byte
		err := row.Scan(&inv.ID, &inv.Number, &inv.Tenant, &inv.Period, &inv.Currency, &inv.IssuedAt, &inv.DueAt, &customer,
			&inv.TaxRate, &inv.Subtotal, &inv.Tax, &inv.Total, &inv.AmountDue, &inv.Jobs, &tags, &inv.ClosedBy, &inv.Note)
		if err != nil {
			return nil, err
		}
		inv.IssuedAt = inv.IssuedAt.UTC()
		if err := json.Unmarshal(customer, &inv.Customer); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(tags, &inv.Tags); err != nil {
			return nil, err
		}
		inv.SubtotalDisplay = RoundInvoice(inv.Subtotal, inv.Currency)
		inv.TaxDisplay = inv.AmountDue.Sub(inv.SubtotalDisplay)
		return inv, nil
	})
	if err != nil {
		return nil, fmt.Errorf("billing: read invoices: %w", err)
	}
	return invs, nil
}

func readInvoices(ctx context.Context, db DB, where string, args ...any) ([]*Invoice, error) {
	invs, err := readInvoicesHead(ctx, db, where, args...)
	if err != nil {
		return nil, err
	}
	for _, inv := range invs {
		rows, err := db.Query(ctx, `
			SELECT l.line_no, l.kind, l.description, l.model, l.priority, l.batch, coalesce(l.price_book_id, 0),
				coalesce(pb.version, 0), coalesce(pb.tenant_id, ''), coalesce(pb.model, ''), l.dimension, l.jobs, l.quantity,
				l.unit, l.unit_price, l.amount, l.amount_display, coalesce(l.credit_id, 0)
			FROM invoice_lines l LEFT JOIN price_books pb ON pb.id = l.price_book_id
			WHERE l.invoice_id = $1 ORDER BY l.line_no`, inv.ID)
		if err != nil {
			return nil, fmt.Errorf("billing: read the lines of %s: %w", inv.Number, err)
		}
		inv.Lines, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (InvoiceLine, error) {
			var l InvoiceLine
			var b PriceBook
			err := row.Scan(&l.No, &l.Kind, &l.Description, &l.Model, &l.Priority, &l.Batch, &l.PriceBookID,
				&b.Version, &b.Tenant, &b.Model, &l.Dimension, &l.Jobs, &l.Quantity, &l.Unit, &l.UnitPrice, &l.Amount, &l.AmountDisplay, &l.CreditID)
			if l.PriceBookID != 0 {
				b.ID = l.PriceBookID
				l.PriceBook = b.Name() + " " + b.Scope()
			}
			return l, err
		})
		if err != nil {
			return nil, fmt.Errorf("billing: read the lines of %s: %w", inv.Number, err)
		}
	}
	return invs, nil
}
