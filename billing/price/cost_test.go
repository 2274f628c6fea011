package price_test

import (
	"errors"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/billing/internal/billtest"
	"github.com/zerolayer/zerolayer/billing/price"
	"github.com/zerolayer/zerolayer/contracts"
)

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func TestCostByHand(t *testing.T) {
	t.Parallel()
	custom := price.Book{Currency: "EUR", PIn: dec("0.5"), POut: dec("1.25"), PTTFT: dec("0.01"), PTool: dec("0.002")}
	for _, tc := range []struct {
		name string
		u    contracts.Usage
		pb   price.Book
		want price.Breakdown
	}{
		{
			// contracts/testdata/usage.json's figures at the default prices:
			// 182 × 0.000003 = 0.000546; 47 × 0.000015 = 0.000705;
			// 31.25 × 0.0000002 = 0.00000625; 0.875 × 0.0000001 = 0.0000000875.
			name: "golden record, default book",
			u:    contracts.Usage{InputTokens: 182, OutputTokens: 47, TimeToFirstTokenMs: 31.25, ToolExecutionTimeMs: 0.875},
			pb:   price.DefaultBook(),
			want: price.Breakdown{Input: dec("0.000546"), Output: dec("0.000705"), TTFT: dec("0.00000625"), Tool: dec("0.0000000875"), Total: dec("0.0012573375")},
		},
		{
			// 1000 × 0.000003 = 0.003; 500 × 0.000015 = 0.0075;
			// 120.5 × 0.0000002 = 0.0000241; 3.2 × 0.0000001 = 0.00000032.
			name: "larger job",
			u:    contracts.Usage{InputTokens: 1000, OutputTokens: 500, TimeToFirstTokenMs: 120.5, ToolExecutionTimeMs: 3.2},
			pb:   price.DefaultBook(),
			want: price.Breakdown{Input: dec("0.003"), Output: dec("0.0075"), TTFT: dec("0.0000241"), Tool: dec("0.00000032"), Total: dec("0.01052442")},
		},
		{
			// Timings with no exact binary form stay their decimal text:
			// 0.1 × 0.0000002 = 0.00000002 and 0.3 × 0.0000001 = 0.00000003.
			name: "inexact floats",
			u:    contracts.Usage{TimeToFirstTokenMs: 0.1, ToolExecutionTimeMs: 0.3},
			pb:   price.DefaultBook(),
			want: price.Breakdown{Input: dec("0"), Output: dec("0"), TTFT: dec("0.00000002"), Tool: dec("0.00000003"), Total: dec("0.00000005")},
		},
		{
			// 3 × 0.5 = 1.5; 4 × 1.25 = 5; 2.5 × 0.01 = 0.025; 7.75 × 0.002 = 0.0155.
			name: "custom book",
			u:    contracts.Usage{InputTokens: 3, OutputTokens: 4, TimeToFirstTokenMs: 2.5, ToolExecutionTimeMs: 7.75},
			pb:   custom,
			want: price.Breakdown{Input: dec("1.5"), Output: dec("5"), TTFT: dec("0.025"), Tool: dec("0.0155"), Total: dec("6.5405")},
		},
		{
			// 600 uncached × 0.5 = 300 and 400 cached × 0.125 = 50 (the
			// book's cached-input price); 10 × 1.25 = 12.5; 2.5 × 0.01 =
			// 0.025; 7.75 × 0.002 = 0.0155; a low-priority job of a
			// batch: each × 0.8 × 0.5 = × 0.4.
			name: "cached input, priority and batch multipliers",
			u: contracts.Usage{InputTokens: 1000, CachedInputTokens: 400, OutputTokens: 10, TimeToFirstTokenMs: 2.5, ToolExecutionTimeMs: 7.75,
				Priority: contracts.PriorityLow, BatchID: "b1"},
			pb: func() price.Book {
				pb := custom
				c := dec("0.125")
				pb.PCachedIn, pb.MultLow, pb.MultBatch, pb.MultHigh = &c, dec("0.8"), dec("0.5"), dec("3")
				return pb
			}(),
			want: price.Breakdown{Input: dec("120"), CachedInput: dec("20"), Output: dec("5"), TTFT: dec("0.01"), Tool: dec("0.0062"), Total: dec("145.0162")},
		},
		{
			// The same job at normal priority, alone: the multipliers not
			// set (0) change nothing.
			name: "cached input, no multiplier",
			u:    contracts.Usage{InputTokens: 1000, CachedInputTokens: 400, OutputTokens: 10, Priority: contracts.PriorityNormal},
			pb: func() price.Book {
				pb := custom
				c := dec("0.125")
				pb.PCachedIn = &c
				return pb
			}(),
			want: price.Breakdown{Input: dec("300"), CachedInput: dec("50"), Output: dec("12.5"), TTFT: dec("0"), Tool: dec("0"), Total: dec("362.5")},
		},
		{
			// An embedding job at a book with an embedding price: its
			// 1000 input tokens × 0.02 = 20, none at p_in or p_cached_in;
			// a high-priority job of a batch, × 3 × 0.5 = × 1.5.
			name: "embedding, own price, multipliers",
			u: contracts.Usage{Kind: contracts.KindEmbedding, InputTokens: 1000, TotalMs: 12.5,
				Priority: contracts.PriorityHigh, BatchID: "b1"},
			pb: func() price.Book {
				pb := custom
				c, e := dec("0.125"), dec("0.02")
				pb.PCachedIn, pb.PEmbedIn, pb.MultHigh, pb.MultBatch = &c, &e, dec("3"), dec("0.5")
				return pb
			}(),
			want: price.Breakdown{EmbeddingInput: dec("30"), Total: dec("30")},
		},
		{
			// A book without an embedding price prices embeddings at
			// p_in, every input token (a cached count, which an
			// embedding should not have, is not discounted): 1000 × 0.5.
			name: "embedding, book without an embedding price",
			u:    contracts.Usage{Kind: contracts.KindEmbedding, InputTokens: 1000, CachedInputTokens: 100},
			pb: func() price.Book {
				pb := custom
				c := dec("0.125")
				pb.PCachedIn = &c
				return pb
			}(),
			want: price.Breakdown{EmbeddingInput: dec("500"), Total: dec("500")},
		},
		{
			// The embedding price leaves generations alone: 3 × 0.5 etc.
			// as in "custom book".
			name: "generation, book with an embedding price",
			u:    contracts.Usage{InputTokens: 3, OutputTokens: 4, TimeToFirstTokenMs: 2.5, ToolExecutionTimeMs: 7.75},
			pb: func() price.Book {
				pb := custom
				e := dec("0.02")
				pb.PEmbedIn = &e
				return pb
			}(),
			want: price.Breakdown{Input: dec("1.5"), Output: dec("5"), TTFT: dec("0.025"), Tool: dec("0.0155"), Total: dec("6.5405")},
		},
		{
			name: "nothing used",
			u:    contracts.Usage{},
			pb:   price.DefaultBook(),
			want: price.Breakdown{Input: dec("0"), Output: dec("0"), TTFT: dec("0"), Tool: dec("0"), Total: dec("0")},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := price.Cost(tc.u, tc.pb)
			if !got.Equal(tc.want) {
				t.Errorf("Cost = %+v\nwant   %+v", got, tc.want)
			}
			pb := tc.pb
			m := pb.Multiplier(tc.u.Priority, tc.u.BatchID != "")
			if !got.Equal(billtest.HandCostFull(tc.u, pb.PIn.String(), pb.CachedInputPrice().String(), pb.EmbeddingInputPrice().String(), pb.POut.String(), pb.PTTFT.String(), pb.PTool.String(), m.String())) {
				t.Errorf("Cost disagrees with handCostFull")
			}
		})
	}
}

func TestBookValidateEmbeddingPrice(t *testing.T) {
	t.Parallel()
	pb := price.DefaultBook()
	if !pb.EmbeddingInputPrice().Equal(pb.PIn) {
		t.Errorf("a book without p_embed_in prices embeddings at %s, want p_in %s", pb.EmbeddingInputPrice(), pb.PIn)
	}
	neg, zero := dec("-0.000001"), dec("0")
	pb.PEmbedIn = &neg
	if err := pb.Validate(); !errors.Is(err, price.ErrInvalidBook) {
		t.Errorf("negative p_embed_in: %v, want ErrInvalidBook", err)
	}
	pb.PEmbedIn = &zero
	if err := pb.Validate(); err != nil || !pb.EmbeddingInputPrice().IsZero() {
		t.Errorf("free embeddings: %v, price %s", err, pb.EmbeddingInputPrice())
	}
}

func TestCostDoesNotLoseSmallAmounts(t *testing.T) {
	t.Parallel()
	// A million tiny charges add up exactly; in float64 they would drift.
	one := price.Cost(contracts.Usage{ToolExecutionTimeMs: 0.1}, price.DefaultBook()).Total
	sum := decimal.Zero
	for range 1_000_000 {
		sum = sum.Add(one)
	}
	if !sum.Equal(dec("0.01")) {
		t.Errorf("sum = %s, want 0.01", sum)
	}
}

func TestBreakdownAdd(t *testing.T) {
	t.Parallel()
	a := price.Cost(contracts.Usage{InputTokens: 1, OutputTokens: 2, TimeToFirstTokenMs: 3, ToolExecutionTimeMs: 4}, price.DefaultBook())
	s := a.Add(a)
	if !s.Total.Equal(a.Total.Mul(dec("2"))) || !s.Tool.Equal(dec("0.0000008")) {
		t.Errorf("a+a = %+v", s)
	}
	e := price.Cost(contracts.Usage{Kind: contracts.KindEmbedding, InputTokens: 5}, price.DefaultBook())
	if s := a.Add(e); !s.EmbeddingInput.Equal(dec("0.000015")) || !s.Total.Equal(a.Total.Add(dec("0.000015"))) || s.Equal(a) {
		t.Errorf("a+embedding = %+v", s)
	}
}

func TestRoundInvoice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		amount, currency, want string
	}{
		{"0.125", "USD", "0.12"}, // half to even: down to 2
		{"0.135", "USD", "0.14"}, // half to even: up to 4
		{"0.1251", "USD", "0.13"},
		{"1.005", "EUR", "1"},
		{"0.0012573375", "USD", "0"},
		{"-0.125", "USD", "-0.12"},
		{"2.5", "JPY", "2"},
		{"3.5", "JPY", "4"},
		{"0.0125", "KWD", "0.012"},
		{"0.0135", "KWD", "0.014"},
		{"0.125", "XYZ", "0.12"}, // unknown: hundredths
	} {
		if got := price.RoundInvoice(dec(tc.amount), tc.currency); !got.Equal(dec(tc.want)) {
			t.Errorf("RoundInvoice(%s, %s) = %s, want %s", tc.amount, tc.currency, got, tc.want)
		}
	}
	if price.MinorUnits("JPY") != 0 || price.MinorUnits("USD") != 2 || price.MinorUnits("BHD") != 3 {
		t.Error("MinorUnits")
	}
}
