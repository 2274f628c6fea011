package finance

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/billing/price"
	"github.com/zerolayer/zerolayer/contracts"
)

// AddCredit stores a credit or an adjustment on tenant's period c.Period
// (a month, 2006-01), which must be open: a credit lowers the invoice by
// c.Amount (given positive or negative, stored negative); an adjustment
// adds c.Amount with its sign. Reason and CreatedBy are required. The
// currency must be that of the period's charges (ErrMixedCurrency). It
// returns the stored credit; an invoiced period wraps ledger.ErrPeriodLocked.
func AddCredit(ctx context.Context, db Beginner, c Credit) (Credit, error) {
	bad := func(format string, a ...any) (Credit, error) {
		return Credit{}, fmt.Errorf("%w: %s", ErrInvalidCredit, fmt.Sprintf(format, a...))
	}
	if err := contracts.ValidateTenant(c.Tenant); err != nil {
		return bad("%v", err)
	}
	m, err := ledger.ParsePeriod(c.Period)
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
	case price.ValidateCurrency(c.Currency) != nil:
		return bad("%v", price.ValidateCurrency(c.Currency))
	case strings.TrimSpace(c.Reason) == "":
		return bad("give the reason (it is printed on the invoice)")
	case strings.TrimSpace(c.CreatedBy) == "":
		return bad("say who adds it")
	case price.CheckMinorUnits(c.Amount, c.Currency) != nil:
		return bad("%v", price.CheckMinorUnits(c.Amount, c.Currency))
	}
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if err := ledger.CheckTenant(ctx, tx, c.Tenant); err != nil {
			return err
		}
		if err := ledger.LockOpenPeriod(ctx, tx, c.Tenant, c.Period); err != nil {
			return err
		}
		// A month may bill several currencies (late usage priced before
		// a currency change); a credit goes on the document of one of
		// them.
		cur, others, err := currencyOf(ctx, tx, `FROM charges c WHERE c.tenant_id = $1 AND c.period = $2::date`, c.Tenant, m.Format(time.DateOnly))
		if err != nil {
			return err
		}
		if (cur != "" && cur != c.Currency) || (others != nil && !slices.Contains(others, c.Currency)) {
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
		p, err := ledger.ParsePeriod(period)
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
// the period's lock (ledger.LockPeriodToClose) it builds the period's documents,
// one per currency its charges and credits are in (draftDocuments: the
// usage lines, one per model, priority, batch or not, price book and
// dimension, and the credits and adjustments, each line rounded on its
// own; tax by the tenant's rule; the tenant's balance from earlier credit
// notes applied), numbers each (an invoice in the INV series, a month
// with a negative total as a credit note in the CN series; gapless per
// year), stores them and moves the balance. From then on the period is
// locked: a re-rating of it fails with ledger.ErrPeriodLocked, and usage of it
// rated later is billed in the next open period. It returns the documents,
// by currency. It returns ledger.ErrPeriodLocked for a period already invoiced,
// ledger.ErrInvalidPeriod for one not ended (without Early), ErrUnratedUsage
// (without AllowUnrated), ErrNoSupplier when the supplier's details are
// not set (SetSupplier), and ledger.ErrUnknownTenant; a refused close uses no
// number.
func CloseInvoice(ctx context.Context, db Beginner, req CloseRequest) ([]*Invoice, error) {
	if err := contracts.ValidateTenant(req.Tenant); err != nil {
		return nil, err
	}
	m, err := ledger.ParsePeriod(req.Period)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.By) == "" {
		return nil, fmt.Errorf("%w: say who closes the period", ledger.ErrInvalidPeriod)
	}
	now := req.Now
	if now.IsZero() {
		now = time.Now()
	}
	// Postgres keeps microseconds: the document written at the close and
	// the one read back later are the same to the byte.
	now = now.UTC().Truncate(time.Microsecond)
	end := m.AddDate(0, 1, 0)
	note := ""
	if now.Before(end) {
		if !req.Early {
			return nil, fmt.Errorf("%w: %s has not ended (it ends %s); close it early only for a tenant that leaves (Early)",
				ledger.ErrInvalidPeriod, req.Period, end.Format(time.RFC3339))
		}
		note = fmt.Sprintf("closed early, at %s: later usage of %s is billed in %s", now.Format(time.RFC3339), req.Period, ledger.PeriodName(end))
	}
	var invs []*Invoice
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var err error
		invs, err = closeTx(ctx, tx, req, m, now, note)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("billing: close %s of %s: %w", req.Period, req.Tenant, err)
	}
	return invs, nil
}

func closeTx(ctx context.Context, tx pgx.Tx, req CloseRequest, m, now time.Time, note string) ([]*Invoice, error) {
	if err := ledger.CheckTenant(ctx, tx, req.Tenant); err != nil {
		return nil, err
	}
	supplier, err := GetSupplier(ctx, tx)
	if err != nil {
		return nil, err
	}
	// The tenant's row first (two closes of one tenant queue here, and
	// so do their balances; FOR NO KEY UPDATE, so that the charges and
	// credits a rating or a credit inserts meanwhile, whose foreign key
	// takes a KEY SHARE lock of the row, do not wait for this close while
	// it waits for their period lock: a deadlock), then the period,
	// exclusively: ratings, re-ratings and credits of it hold the shared
	// side while they write.
	if _, err := tx.Exec(ctx, `SELECT 1 FROM tenants WHERE id = $1 FOR NO KEY UPDATE`, req.Tenant); err != nil {
		return nil, err
	}
	if number, err := ledger.LockPeriodToClose(ctx, tx, req.Tenant, m); err != nil {
		return nil, err
	} else if number != "" {
		return nil, fmt.Errorf("%w: %s of %s is invoiced already (%s)", ledger.ErrPeriodLocked, req.Period, req.Tenant, number)
	}
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
	invs, err := draftDocuments(ctx, tx, req.Tenant, m, now, supplier)
	if err != nil {
		return nil, err
	}
	day := m.Format(time.DateOnly)
	for _, inv := range invs {
		inv.ClosedBy, inv.Note = req.By, note
		if err := storeDocument(ctx, tx, inv, day); err != nil {
			return nil, err
		}
	}
	return invs, nil
}

// storeDocument numbers inv in its series, stores it with its lines,
// marks its credits as invoiced and moves the tenant's balance.
func storeDocument(ctx context.Context, tx pgx.Tx, inv *Invoice, day string) error {
	year := inv.IssuedAt.Year()
	series, prefix := "invoice_numbers", "INV"
	if inv.Kind == KindCreditNote {
		series, prefix = "credit_note_numbers", "CN"
	}
	var seq int
	if err := tx.QueryRow(ctx, `INSERT INTO `+series+` (year, last) VALUES ($1, 1)
		ON CONFLICT (year) DO UPDATE SET last = `+series+`.last + 1 RETURNING last`, year).Scan(&seq); err != nil {
		return fmt.Errorf("number the %s: %w", inv.Kind, err)
	}
	inv.Number = fmt.Sprintf("%s-%d-%06d", prefix, year, seq)
	customer, _ := json.Marshal(inv.Customer)
	supplier, _ := json.Marshal(inv.Supplier)
	tags, _ := json.Marshal(inv.Tags)
	if err := tx.QueryRow(ctx, `INSERT INTO invoices (number, tenant_id, period, currency, issued_at, due_at, customer, tax_rate,
			subtotal, tax, total, amount_due, jobs, tag_summary, closed_by, note,
			kind, tax_rule, supplier, charges_exact, balance_applied, balance_carried, payment_terms)
		VALUES ($1, $2, $3::date, $4, $5, $6::date, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23) RETURNING id`,
		inv.Number, inv.Tenant, day, inv.Currency, inv.IssuedAt, inv.DueAt, customer, inv.TaxRate,
		inv.SubtotalDisplay, inv.TaxDisplay, inv.TotalDisplay, inv.AmountDue, inv.Jobs, tags, inv.ClosedBy, inv.Note,
		inv.Kind, inv.TaxRule, supplier, inv.Subtotal, inv.BalanceApplied, inv.BalanceCarried, inv.PaymentTerms).Scan(&inv.ID); err != nil {
		return fmt.Errorf("store the %s: %w", inv.Kind, err)
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
			return fmt.Errorf("store line %d of %s: %w", l.No, inv.Number, err)
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE credits SET invoice_id = $1 WHERE tenant_id = $2 AND period = $3::date AND currency = $4`,
		inv.ID, inv.Tenant, day, inv.Currency); err != nil {
		return err
	}
	move := inv.BalanceCarried.Sub(inv.BalanceApplied)
	if !move.IsZero() {
		if _, err := tx.Exec(ctx, `INSERT INTO tenant_balance (tenant_id, currency, amount, invoice_id) VALUES ($1, $2, $3, $4)`,
			inv.Tenant, inv.Currency, move, inv.ID); err != nil {
			return fmt.Errorf("move the balance of %s: %w", inv.Tenant, err)
		}
	}
	return nil
}

// TenantBalance returns what tenant's credit notes left to deduct from
// its next invoices in currency: zero or more.
func TenantBalance(ctx context.Context, db DB, tenant, currency string) (decimal.Decimal, error) {
	var b decimal.Decimal
	if err := db.QueryRow(ctx, `SELECT coalesce(sum(amount), 0) FROM tenant_balance WHERE tenant_id = $1 AND currency = $2`,
		tenant, currency).Scan(&b); err != nil {
		return b, fmt.Errorf("billing: read the balance of %s: %w", tenant, err)
	}
	return b, nil
}

// draftDocuments builds, without storing anything, the documents that
// closing tenant's month m at now would issue: one per currency of the
// month's charges and credits (the currency of the tenant's book in force
// when there are none), by currency, each with its lines, tax and the
// balance it would take. They have no number yet. supplier is printed on
// them.
func draftDocuments(ctx context.Context, db DB, tenant string, m, now time.Time, supplier Supplier) ([]*Invoice, error) {
	cust, err := GetTenantBilling(ctx, db, tenant)
	if err != nil {
		return nil, err
	}
	day := m.Format(time.DateOnly)
	rows, err := db.Query(ctx, `SELECT currency FROM charges WHERE tenant_id = $1 AND period = $2::date
		UNION SELECT currency FROM credits WHERE tenant_id = $1 AND period = $2::date ORDER BY 1`, tenant, day)
	if err != nil {
		return nil, err
	}
	currencies, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	if len(currencies) == 0 {
		cur := "USD"
		if pb, err := ledger.EffectivePriceBook(ctx, db, tenant, "", m); err == nil {
			cur = pb.Currency
		}
		currencies = []string{cur}
	}
	credits, err := ListCredits(ctx, db, tenant, ledger.PeriodName(m))
	if err != nil {
		return nil, err
	}
	var invs []*Invoice
	for _, cur := range currencies {
		inv := &Invoice{Kind: KindInvoice, Tenant: tenant, Period: ledger.PeriodName(m), Currency: cur, IssuedAt: now,
			Supplier: supplier, Customer: cust.Customer, TaxRate: cust.TaxRate, TaxRule: cust.TaxRounding,
			DueAt: now.AddDate(0, 0, cust.PaymentTermsDays).Format(time.DateOnly)}
		if inv.Lines, inv.Jobs, err = usageLines(ctx, db, tenant, m, cur); err != nil {
			return nil, err
		}
		for _, c := range credits {
			if c.Currency != cur {
				continue
			}
			inv.Lines = append(inv.Lines, InvoiceLine{Kind: c.Kind, Description: titleCase(c.Kind) + ": " + c.Reason,
				Quantity: one, UnitPrice: c.Amount, Amount: c.Amount, CreditID: c.ID, AddedBy: c.CreatedBy})
		}
		if inv.Tags, err = tagTotals(ctx, db, tenant, day, cur); err != nil {
			return nil, err
		}
		balance, err := TenantBalance(ctx, db, tenant, cur)
		if err != nil {
			return nil, err
		}
		inv.finish(balance)
		inv.PaymentTerms = paymentTerms(inv, cust.PaymentTermsDays)
		if inv.BalanceApplied.IsPositive() {
			from, err := balanceSources(ctx, db, tenant, cur, inv.BalanceApplied)
			if err != nil {
				return nil, err
			}
			inv.PaymentTerms += " The credit balance applied comes from " + strings.Join(from, ", ") + "."
		}
		invs = append(invs, inv)
	}
	return invs, nil
}

// balanceSources names the credit notes that an amount taken from
// tenant's balance in currency comes from: the balance is used oldest
// credit note first.
func balanceSources(ctx context.Context, db DB, tenant, currency string, amount decimal.Decimal) ([]string, error) {
	rows, err := db.Query(ctx, `SELECT i.number, b.amount FROM tenant_balance b JOIN invoices i ON i.id = b.invoice_id
		WHERE b.tenant_id = $1 AND b.currency = $2 ORDER BY b.id`, tenant, currency)
	if err != nil {
		return nil, err
	}
	type entry struct {
		number string
		left   decimal.Decimal
	}
	var credits []entry
	used := decimal.Zero
	var number string
	var a decimal.Decimal
	if _, err := pgx.ForEachRow(rows, []any{&number, &a}, func() error {
		if a.IsPositive() {
			credits = append(credits, entry{number, a})
		} else {
			used = used.Sub(a)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	var out []string
	for _, c := range credits {
		take := decimal.Min(c.left, used)
		used, c.left = used.Sub(take), c.left.Sub(take)
		if c.left.IsPositive() && amount.IsPositive() {
			out = append(out, c.number)
			amount = amount.Sub(decimal.Min(c.left, amount))
		}
	}
	return out, nil
}

// paymentTerms is the sentence a document prints about paying.
func paymentTerms(inv *Invoice, days int) string {
	switch {
	case inv.Kind == KindCreditNote:
		return fmt.Sprintf("Nothing to pay: %s %s is credited to your account and deducted from your next invoices in %s.",
			inv.fixed(inv.BalanceCarried), inv.Currency, inv.Currency)
	case inv.AmountDue.IsZero() && inv.BalanceApplied.IsPositive():
		return "Nothing to pay: your credit balance from earlier credit notes covers this invoice."
	case inv.AmountDue.IsZero():
		return "Nothing to pay."
	case days == 0:
		return fmt.Sprintf("Payment due on receipt (%s).", inv.DueAt)
	}
	return fmt.Sprintf("Payment due within %d days of the issue date, by %s.", days, inv.DueAt)
}

// finish numbers inv's lines and computes its amounts by its tax rule
// (see Invoice), with balance the tenant's balance from earlier credit
// notes in inv's currency: a document whose total is negative is a credit
// note carrying that amount to the balance; an invoice takes what it can
// from the balance.
func (inv *Invoice) finish(balance decimal.Decimal) {
	cur := inv.Currency
	if inv.TaxRule == "" {
		inv.TaxRule = TaxPerInvoice
	}
	inv.Subtotal, inv.SubtotalDisplay = decimal.Zero, decimal.Zero
	lineTax := decimal.Zero
	for i := range inv.Lines {
		l := &inv.Lines[i]
		l.No = i + 1
		l.AmountDisplay = price.RoundInvoice(l.Amount, cur)
		inv.Subtotal = inv.Subtotal.Add(l.Amount)
		inv.SubtotalDisplay = inv.SubtotalDisplay.Add(l.AmountDisplay)
		lineTax = lineTax.Add(price.RoundInvoice(l.AmountDisplay.Mul(inv.TaxRate), cur))
	}
	inv.Tax = inv.Subtotal.Mul(inv.TaxRate)
	inv.Total = inv.Subtotal.Add(inv.Tax)
	if inv.TaxRule == TaxPerLine {
		inv.TaxDisplay = lineTax
	} else {
		inv.TaxDisplay = price.RoundInvoice(inv.SubtotalDisplay.Mul(inv.TaxRate), cur)
	}
	inv.TotalDisplay = inv.SubtotalDisplay.Add(inv.TaxDisplay)
	inv.BalanceApplied, inv.BalanceCarried = decimal.Zero, decimal.Zero
	if inv.TotalDisplay.IsNegative() {
		inv.Kind = KindCreditNote
		inv.BalanceCarried = inv.TotalDisplay.Neg()
		inv.AmountDue = decimal.Zero
		return
	}
	inv.Kind = KindInvoice
	if balance.IsPositive() {
		inv.BalanceApplied = decimal.Min(balance, inv.TotalDisplay)
	}
	inv.AmountDue = inv.TotalDisplay.Sub(inv.BalanceApplied)
}

// TaxRuleText states how inv's tax was computed, as printed on it.
func (inv *Invoice) TaxRuleText() string {
	unit := decimal.New(1, -price.MinorUnits(inv.Currency)).StringFixed(price.MinorUnits(inv.Currency)) + " " + inv.Currency
	switch inv.TaxRule {
	case TaxPerLine:
		return fmt.Sprintf("Tax is %s of each line's amount, rounded half to even to %s per line, and added up.", inv.taxPercent(), unit)
	case TaxPerInvoice:
		return fmt.Sprintf("Tax is %s of the subtotal, rounded half to even to %s once per document.", inv.taxPercent(), unit)
	}
	return ""
}

func titleCase(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// dimensionUnits describes each usage dimension: its charge column, the
// usage quantity it prices, its unit and its price-book column. An
// embedding job's input tokens are priced on the embedding line only, so
// the two input lines count the generations' (a charge rated before
// embeddings had a price of their own would break quantity × price =
// amount; re-rate it).
var dimensionUnits = []struct {
	dim, cost, quantity, unit, price, label string
}{
	{DimInput, "cost_input", "coalesce(sum(u.input_tokens - u.cached_input_tokens) FILTER (WHERE u.kind <> 'embedding'), 0)", "tokens",
		"pb.p_in", "input tokens"},
	{DimCachedInput, "cost_cached_input", "coalesce(sum(u.cached_input_tokens) FILTER (WHERE u.kind <> 'embedding'), 0)", "tokens",
		"coalesce(pb.p_cached_in, pb.p_in)", "cached input tokens"},
	{DimEmbeddingInput, "cost_embedding_input", "coalesce(sum(u.input_tokens) FILTER (WHERE u.kind = 'embedding'), 0)", "tokens",
		"coalesce(pb.p_embed_in, pb.p_in)", "embedding input tokens"},
	{DimOutput, "cost_output", "sum(u.output_tokens)", "tokens", "pb.p_out", "output tokens"},
	{DimTTFT, "cost_ttft", "sum(u.time_to_first_token_ms)", "ms", "pb.p_ttft", "time to first token"},
	{DimTool, "cost_tool", "sum(u.tool_execution_time_ms)", "ms", "pb.p_tool", "tool execution time"},
}

// usageLines gathers the usage lines of tenant's month m in currency: one
// per model, priority, batch or not, price book and dimension with a
// non-zero amount, in that order. A line's description is for the
// customer: the model, priority, batch and dimension, and, where the
// month has several prices for one of those (a price change), the day its
// price applies from; the book's name is internal (price.Book).
func usageLines(ctx context.Context, db DB, tenant string, m time.Time, currency string) ([]InvoiceLine, int64, error) {
	var sel []string
	for _, d := range dimensionUnits {
		sel = append(sel, "sum(c."+d.cost+")", d.quantity, "max("+d.price+")")
	}
	rows, err := db.Query(ctx, `
		SELECT u.model, u.priority, u.batch_id IS NOT NULL, c.price_book_id, pb.version, coalesce(pb.tenant_id, ''), coalesce(pb.model, ''),
			pb.effective_at, c.multiplier, count(*), `+strings.Join(sel, ", ")+`
		FROM charges c JOIN usage u USING (tenant_id, job_id) JOIN price_books pb ON pb.id = c.price_book_id
		WHERE c.tenant_id = $1 AND c.period = $2::date AND c.currency = $3
		GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9
		ORDER BY 1, CASE u.priority WHEN 'high' THEN 0 WHEN 'normal' THEN 1 ELSE 2 END, 3, 8, 4, 9`, tenant, m.Format(time.DateOnly), currency)
	if err != nil {
		return nil, 0, fmt.Errorf("gather the usage lines: %w", err)
	}
	defer rows.Close()
	var lines []InvoiceLine
	var from []time.Time // when each line's price applies from
	var jobs int64
	for rows.Next() {
		var model, priority, bookTenant, bookModel string
		var batch bool
		var bookID int64
		var version int
		var effective time.Time
		var mult decimal.Decimal
		var n int64
		vals := make([]decimal.Decimal, 3*len(dimensionUnits))
		dest := []any{&model, &priority, &batch, &bookID, &version, &bookTenant, &bookModel, &effective, &mult, &n}
		for i := range vals {
			dest = append(dest, &vals[i])
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, 0, fmt.Errorf("gather the usage lines: %w", err)
		}
		jobs += n
		book := price.Book{ID: bookID, Tenant: bookTenant, Model: bookModel, Version: version}
		for k, d := range dimensionUnits {
			amount, quantity, price := vals[3*k], vals[3*k+1], vals[3*k+2]
			if amount.IsZero() {
				continue
			}
			desc := fmt.Sprintf("%s, %s priority%s: %s", model, priority, map[bool]string{true: ", batch", false: ""}[batch], d.label)
			lines = append(lines, InvoiceLine{Kind: LineUsage, Description: desc, Model: model, Priority: priority, Batch: batch,
				PriceBookID: bookID, PriceBook: book.Name() + " " + book.Scope(), Dimension: d.dim, Jobs: n,
				Quantity: quantity, Unit: d.unit, UnitPrice: price.Mul(mult), Amount: amount})
			from = append(from, effective)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("gather the usage lines: %w", err)
	}
	// Lines that read the same are told apart by their prices' start.
	same := map[string]int{}
	for _, l := range lines {
		same[l.Description]++
	}
	for i := range lines {
		if same[lines[i].Description] > 1 {
			lines[i].Description += ", prices from " + from[i].UTC().Format(time.DateOnly)
		}
	}
	return lines, jobs, nil
}

// tagTotals sums tenant's charges of a period in currency per value tag.
func tagTotals(ctx context.Context, db DB, tenant, day, currency string) ([]TagTotal, error) {
	rows, err := db.Query(ctx, `SELECT t.tag, count(*), sum(c.total)
		FROM charges c CROSS JOIN LATERAL unnest(c.tags) AS t(tag)
		WHERE c.tenant_id = $1 AND c.period = $2::date AND c.currency = $3 GROUP BY 1 ORDER BY 3 DESC, 1`, tenant, day, currency)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (TagTotal, error) {
		var t TagTotal
		err := row.Scan(&t.Tag, &t.Jobs, &t.Amount)
		return t, err
	})
}

// GetInvoice reads a stored invoice by number (ledger.ErrNotFound when there is
// none).
func GetInvoice(ctx context.Context, db DB, number string) (*Invoice, error) {
	invs, err := readInvoices(ctx, db, `WHERE i.number = $1`, number)
	if err != nil {
		return nil, err
	}
	if len(invs) == 0 {
		return nil, fmt.Errorf("%w: invoice %s", ledger.ErrNotFound, number)
	}
	return invs[0], nil
}

// GetPeriodInvoice reads tenant's document of period (ledger.ErrNotFound while
// the period is open). A month billed in several currencies has one
// document per currency: currency names which ("" is allowed only when
// there is one; ErrMixedCurrency otherwise, naming them).
func GetPeriodInvoice(ctx context.Context, db DB, tenant, period, currency string) (*Invoice, error) {
	invs, err := ListPeriodInvoices(ctx, db, tenant, period)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, inv := range invs {
		if currency == "" && len(invs) == 1 || inv.Currency == currency {
			return GetInvoice(ctx, db, inv.Number)
		}
		names = append(names, inv.Number+" in "+inv.Currency)
	}
	if len(invs) == 0 || currency != "" {
		return nil, fmt.Errorf("%w: %s of %s is not invoiced%s", ledger.ErrNotFound, period, tenant, map[bool]string{true: " in " + currency}[currency != ""])
	}
	return nil, fmt.Errorf("%w: %s of %s is billed in several currencies (%s); name one", ErrMixedCurrency, period, tenant, strings.Join(names, ", "))
}

// ListPeriodInvoices returns tenant's documents of period, without their
// lines, by currency; none while the period is open.
func ListPeriodInvoices(ctx context.Context, db DB, tenant, period string) ([]*Invoice, error) {
	m, err := ledger.ParsePeriod(period)
	if err != nil {
		return nil, err
	}
	return readInvoicesHead(ctx, db, `WHERE i.tenant_id = $1 AND i.period = $2::date ORDER BY i.currency`, tenant, m.Format(time.DateOnly))
}

// ListInvoices returns the documents of tenant (every tenant's when
// empty), invoices and credit notes, without their lines, newest period
// first.
func ListInvoices(ctx context.Context, db DB, tenant string) ([]*Invoice, error) {
	return readInvoicesHead(ctx, db, `WHERE ($1 = '' OR i.tenant_id = $1) ORDER BY i.period DESC, i.tenant_id, i.currency`, tenant)
}

const invoiceColumns = `i.id, i.number, i.tenant_id, to_char(i.period, 'YYYY-MM'), i.currency, i.issued_at, to_char(i.due_at, 'YYYY-MM-DD'),
	i.customer, i.tax_rate, i.subtotal, i.tax, i.total, i.amount_due, i.jobs, i.tag_summary, i.closed_by, i.note,
	i.kind, i.tax_rule, i.supplier, i.charges_exact, i.balance_applied, i.balance_carried, i.payment_terms`

func readInvoicesHead(ctx context.Context, db DB, where string, args ...any) ([]*Invoice, error) {
	rows, err := db.Query(ctx, `SELECT `+invoiceColumns+` FROM invoices i `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("billing: read invoices: %w", err)
	}
	invs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Invoice, error) {
		inv := new(Invoice)
		var customer, tags, supplier []byte
		var subtotal, tax, total decimal.Decimal
		var chargesExact decimal.NullDecimal
		err := row.Scan(&inv.ID, &inv.Number, &inv.Tenant, &inv.Period, &inv.Currency, &inv.IssuedAt, &inv.DueAt, &customer,
			&inv.TaxRate, &subtotal, &tax, &total, &inv.AmountDue, &inv.Jobs, &tags, &inv.ClosedBy, &inv.Note,
			&inv.Kind, &inv.TaxRule, &supplier, &chargesExact, &inv.BalanceApplied, &inv.BalanceCarried, &inv.PaymentTerms)
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
		if supplier != nil {
			if err := json.Unmarshal(supplier, &inv.Supplier); err != nil {
				return nil, err
			}
		}
		if inv.TaxRule == taxLegacy {
			// Issued before the tax rules: the stored amounts are exact,
			// and the amount due is the total rounded once.
			inv.Subtotal, inv.Tax, inv.Total = subtotal, tax, total
			inv.SubtotalDisplay = price.RoundInvoice(inv.Subtotal, inv.Currency)
			inv.TaxDisplay = inv.AmountDue.Sub(inv.SubtotalDisplay)
			inv.TotalDisplay = inv.AmountDue
			return inv, nil
		}
		inv.SubtotalDisplay, inv.TaxDisplay, inv.TotalDisplay = subtotal, tax, total
		inv.Subtotal = chargesExact.Decimal
		inv.Tax = inv.Subtotal.Mul(inv.TaxRate)
		inv.Total = inv.Subtotal.Add(inv.Tax)
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
				l.unit, l.unit_price, l.amount, l.amount_display, coalesce(l.credit_id, 0), coalesce(cr.created_by, '')
			FROM invoice_lines l LEFT JOIN price_books pb ON pb.id = l.price_book_id LEFT JOIN credits cr ON cr.id = l.credit_id
			WHERE l.invoice_id = $1 ORDER BY l.line_no`, inv.ID)
		if err != nil {
			return nil, fmt.Errorf("billing: read the lines of %s: %w", inv.Number, err)
		}
		inv.Lines, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (InvoiceLine, error) {
			var l InvoiceLine
			var b price.Book
			err := row.Scan(&l.No, &l.Kind, &l.Description, &l.Model, &l.Priority, &l.Batch, &l.PriceBookID,
				&b.Version, &b.Tenant, &b.Model, &l.Dimension, &l.Jobs, &l.Quantity, &l.Unit, &l.UnitPrice, &l.Amount, &l.AmountDisplay, &l.CreditID, &l.AddedBy)
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
