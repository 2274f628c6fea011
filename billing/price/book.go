package price

import (
	"cmp"
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/contracts"
)

// Book is one version of a price list. A book applies to one tenant
// or, with Tenant empty, to every tenant without a book of its own (a
// default book); to one model or, with Model empty, to every model. Within
// one (Tenant, Model) scope versions count up from 1, and each takes effect
// at EffectiveAt: usage created from then on is priced by it, until a later
// version takes over.
type Book struct {
	// ID is the book's row id; 0 for a book that is not stored.
	ID int64 `json:"id"`
	// Tenant is the tenant the book is for; empty for a default book.
	Tenant string `json:"tenant,omitempty"`
	// Model is the model the book is for; empty for any model.
	Model string `json:"model,omitempty"`
	// Version is the book's version within its scope, from 1.
	Version int `json:"version"`
	// EffectiveAt is when the book starts to apply, compared with the
	// usage record's CreatedAt (submission time).
	EffectiveAt time.Time `json:"effective_at"`
	// Currency is the ISO 4217 code of the prices (e.g. "USD").
	Currency string `json:"currency"`
	// PIn is the price of one input token.
	PIn decimal.Decimal `json:"p_in"`
	// POut is the price of one output token.
	POut decimal.Decimal `json:"p_out"`
	// PTTFT is the price of one millisecond of time to first token.
	PTTFT decimal.Decimal `json:"p_ttft"`
	// PTool is the price of one millisecond of inline tool execution.
	PTool decimal.Decimal `json:"p_tool"`
	// PCachedIn is the price of one cached input token (served from the
	// prefix cache); nil means PIn (books stored before it existed).
	PCachedIn *decimal.Decimal `json:"p_cached_in,omitempty"`
	// PEmbedIn is the price of one input token of an embedding job
	// (contracts.KindEmbedding); nil means PIn (books stored before it
	// existed, which priced embeddings as input tokens).
	PEmbedIn *decimal.Decimal `json:"p_embed_in,omitempty"`
	// MultHigh, MultNormal and MultLow scale every dimension of the cost
	// of a job of that priority, and MultBatch that of a job of a batch
	// (metadata batch_id; it stacks with the priority's). Zero means 1:
	// no change.
	MultHigh   decimal.Decimal `json:"mult_high"`
	MultNormal decimal.Decimal `json:"mult_normal"`
	MultLow    decimal.Decimal `json:"mult_low"`
	MultBatch  decimal.Decimal `json:"mult_batch"`
	// EffectiveTo, when set, ends the book: from then on its scope has no
	// price of its own, and a less specific scope's book applies (see
	// ledger.EffectivePriceBook).
	EffectiveTo *time.Time `json:"effective_to,omitempty"`
	// Note is free text for people (why the version exists).
	Note string `json:"note,omitempty"`
}

// Name names the book uniquely in reports and on invoices: "pb7" is the
// book of id 7, whatever its scope and version.
func (pb Book) Name() string { return fmt.Sprintf("pb%d", pb.ID) }

// Scope describes the book's scope and version, as "acme/tiny v2" or
// "default/any model v1".
func (pb Book) Scope() string {
	t, m := cmp.Or(pb.Tenant, "default"), cmp.Or(pb.Model, "any model")
	return fmt.Sprintf("%s/%s v%d", t, m, pb.Version)
}

// CachedInputPrice is the price of one cached input token: PCachedIn, or
// PIn when the book has none.
func (pb Book) CachedInputPrice() decimal.Decimal {
	if pb.PCachedIn != nil {
		return *pb.PCachedIn
	}
	return pb.PIn
}

// EmbeddingInputPrice is the price of one input token of an embedding
// job: PEmbedIn, or PIn when the book has none.
func (pb Book) EmbeddingInputPrice() decimal.Decimal {
	if pb.PEmbedIn != nil {
		return *pb.PEmbedIn
	}
	return pb.PIn
}

// one is the multiplier that changes nothing.
var one = decimal.NewFromInt(1)

// orOne is m, or 1 when m is zero (a multiplier not set).
func orOne(m decimal.Decimal) decimal.Decimal {
	if m.IsZero() {
		return one
	}
	return m
}

// WithDefaults returns pb with each multiplier not set (zero) set to 1,
// as a book is stored.
func (pb Book) WithDefaults() Book {
	pb.MultHigh, pb.MultNormal, pb.MultLow, pb.MultBatch = orOne(pb.MultHigh), orOne(pb.MultNormal), orOne(pb.MultLow), orOne(pb.MultBatch)
	return pb
}

// Multiplier is the factor the book applies to every dimension of the
// cost of a job of priority p, of a batch or not.
func (pb Book) Multiplier(p contracts.Priority, batch bool) decimal.Decimal {
	m := orOne(pb.MultNormal)
	switch p {
	case contracts.PriorityHigh:
		m = orOne(pb.MultHigh)
	case contracts.PriorityLow:
		m = orOne(pb.MultLow)
	}
	if batch {
		m = m.Mul(orOne(pb.MultBatch))
	}
	return m
}

// DefaultBook returns DESIGN.md's default prices, in USD: 0.000003
// per input token, 0.000015 per output token, 0.0000002 per millisecond to
// first token and 0.0000001 per millisecond of tool execution. It is
// version 1 of the default book the migrations seed, effective since the
// Unix epoch; its ID is 0 because it is not read from the database.
func DefaultBook() Book {
	return Book{
		Version:     1,
		EffectiveAt: time.Unix(0, 0).UTC(),
		Currency:    "USD",
		PIn:         decimal.RequireFromString("0.000003"),
		POut:        decimal.RequireFromString("0.000015"),
		PTTFT:       decimal.RequireFromString("0.0000002"),
		PTool:       decimal.RequireFromString("0.0000001"),
		MultHigh:    one,
		MultNormal:  one,
		MultLow:     one,
		MultBatch:   one,
		Note:        "DESIGN.md defaults",
	}
}

// Validate reports a price book that cannot be stored, wrapping
// ErrInvalidBook. ID and Version are not checked: storing the book
// (finance.CreatePriceBook) assigns them.
func (pb Book) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidBook, fmt.Sprintf(format, a...))
	}
	if pb.Tenant != "" {
		if err := contracts.ValidateTenant(pb.Tenant); err != nil {
			return bad("%v", err)
		}
	}
	switch {
	case pb.EffectiveAt.IsZero():
		return bad("EffectiveAt is not set; give the time the prices start to apply")
	case ValidateCurrency(pb.Currency) != nil:
		return bad("%v", ValidateCurrency(pb.Currency))
	case pb.PIn.IsNegative() || pb.POut.IsNegative() || pb.PTTFT.IsNegative() || pb.PTool.IsNegative():
		return bad("prices must not be negative (p_in %s, p_out %s, p_ttft %s, p_tool %s)", pb.PIn, pb.POut, pb.PTTFT, pb.PTool)
	case pb.PCachedIn != nil && pb.PCachedIn.IsNegative():
		return bad("the cached input price %s is negative", pb.PCachedIn)
	case pb.PEmbedIn != nil && pb.PEmbedIn.IsNegative():
		return bad("the embedding input price %s is negative", pb.PEmbedIn)
	case pb.MultHigh.IsNegative() || pb.MultNormal.IsNegative() || pb.MultLow.IsNegative() || pb.MultBatch.IsNegative():
		return bad("multipliers must be positive (high %s, normal %s, low %s, batch %s; 0 means 1)", pb.MultHigh, pb.MultNormal, pb.MultLow, pb.MultBatch)
	case pb.EffectiveTo != nil && !pb.EffectiveTo.After(pb.EffectiveAt):
		return bad("the book ends (%s) before it starts (%s)", pb.EffectiveTo.UTC().Format(time.RFC3339), pb.EffectiveAt.UTC().Format(time.RFC3339))
	}
	return nil
}
