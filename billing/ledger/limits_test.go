package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/billing/internal/billtest"
	"github.com/zerolayer/zerolayer/billing/internal/ledgertest"
	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
)

func i64(v int64) *int64 { return &v }

func TestSetTenantLimits(t *testing.T) {
	t.Parallel()
	b := ledgertest.Setup(t)
	ctx := t.Context()
	spend := decimal.RequireFromString("100.50")
	l, err := ledger.SetTenantLimits(ctx, b.Pool, ledger.TenantLimits{Tenant: "acme", RequestsPerMinute: i64(60), MonthlySpend: &spend})
	if err != nil {
		t.Fatal(err)
	}
	if l.Currency != "USD" || l.UpdatedAt.IsZero() {
		t.Errorf("stored %+v", l)
	}
	got, err := ledger.GetTenantLimits(ctx, b.Pool, "acme")
	if err != nil || *got.RequestsPerMinute != 60 || got.TokensPerMinute != nil || !got.MonthlySpend.Equal(spend) {
		t.Fatalf("GetTenantLimits = %+v, %v", got, err)
	}
	// Setting again replaces every limit.
	if _, err := ledger.SetTenantLimits(ctx, b.Pool, ledger.TenantLimits{Tenant: "acme", MaxConcurrent: i64(0)}); err != nil {
		t.Fatal(err)
	}
	all, err := ledger.ListTenantLimits(ctx, b.Pool)
	if err != nil || len(all) != 1 || all[0].RequestsPerMinute != nil || *all[0].MaxConcurrent != 0 {
		t.Fatalf("ListTenantLimits = %+v, %v", all, err)
	}
	if _, err := ledger.GetTenantLimits(ctx, b.Pool, "nobody"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("no limits: %v", err)
	}
	for _, bad := range []ledger.TenantLimits{{Tenant: "a.b"}, {Tenant: "acme", RequestsPerMinute: i64(-1)}, {Tenant: "acme", Currency: "usd"}} {
		if _, err := ledger.SetTenantLimits(ctx, b.Pool, bad); !errors.Is(err, ledger.ErrInvalidLimits) {
			t.Errorf("SetTenantLimits(%+v) = %v, want ErrInvalidLimits", bad, err)
		}
	}
}

// TestLimitsPublisher: the published value carries the limits, the
// default book's prices and the month-to-date spend (charges plus unrated
// usage at the estimate, this month only); set-limits is published at
// once; a tenant whose limits are gone loses its key.
func TestLimitsPublisher(t *testing.T) {
	t.Parallel()
	b := ledgertest.Setup(t)
	ns := natstest.Run(t)
	ctx := t.Context()
	now := time.Now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	rated := billtest.Usage("rated", "acme", "m", month.Add(time.Hour), 1000, 100, 0, 0, 0.5)
	b.Store(t, rated)
	b.Store(t, billtest.Usage("lastmonth", "acme", "m", month.Add(-time.Hour), 1000, 100, 0, 0, 0.5))
	b.WaitCharged(t, 2)
	// Stored, not rated yet: estimated at p_in and p_out.
	b.StoreUnrated(t, billtest.Usage("unrated", "acme", "m", month.Add(2*time.Hour), 100, 10, 0, 0, 0.5))
	// An embedding job's input, at p_embed_in (this book has none: p_in).
	emb := billtest.Usage("unrated-emb", "acme", "m", month.Add(3*time.Hour), 1000, 0, 0, 0, 0.5)
	emb.Kind = contracts.KindEmbedding
	b.StoreUnrated(t, emb)
	spend := decimal.RequireFromString("5")
	if _, err := ledger.SetTenantLimits(ctx, b.Pool, ledger.TenantLimits{Tenant: "acme", RequestsPerMinute: i64(60), MonthlySpend: &spend}); err != nil {
		t.Fatal(err)
	}
	p, err := ledger.NewLimitsPublisher(ledger.LimitsPublisherConfig{DB: b.Pool, JetStream: ns.JS, Interval: time.Hour, Logger: billtest.DiscardLogger(),
		Streams: contracts.StreamsConfig{Storage: jetstream.MemoryStorage}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(context.Background()) })
	kv, err := ns.JS.KeyValue(ctx, contracts.TenantLimitsBucket)
	if err != nil {
		t.Fatal(err)
	}
	read := func() (contracts.TenantLimits, error) {
		e, err := kv.Get(ctx, "acme")
		if err != nil {
			return contracts.TenantLimits{}, err
		}
		return contracts.DecodeTenantLimits(e.Value())
	}
	got, err := read()
	if err != nil {
		t.Fatal(err)
	}
	want := billtest.DefaultHandCost(rated).Total.Add(decimal.RequireFromString("0.00345")) // 100 × 0.000003 + 10 × 0.000015 + 1000 × 0.000003
	if mtd := decimal.RequireFromString(got.MonthToDate); !mtd.Equal(want) {
		t.Errorf("month_to_date = %s, want %s", mtd, want)
	}
	if *got.RequestsPerMinute != 60 || *got.MonthlySpend != "5" || got.PriceIn != "0.000003" || got.PriceOut != "0.000015" || got.PriceEmbedIn != "0.000003" || got.Month != month.Format("2006-01") {
		t.Errorf("published %+v", got)
	}
	// set-limits reaches the bucket through NOTIFY, long before Interval.
	if _, err := ledger.SetTenantLimits(ctx, b.Pool, ledger.TenantLimits{Tenant: "acme", RequestsPerMinute: i64(7)}); err != nil {
		t.Fatal(err)
	}
	billtest.Eventually(t, 20*time.Second, func() (bool, string) {
		got, err := read()
		return err == nil && got.RequestsPerMinute != nil && *got.RequestsPerMinute == 7, "rpm not 7 yet"
	})
	if _, err := b.Pool.Exec(ctx, `DELETE FROM tenant_limits`); err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := read(); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("after the limits were removed: %v", err)
	}
}
