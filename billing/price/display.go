package price

import (
	"slices"

	"github.com/shopspring/decimal"
)

// DisplayAmounts rounds exact amounts for display at currency's minor unit
// so that the rounded amounts add up to the rounded sum
// (RoundInvoice(sum)): each is rounded down, then the minor units still
// missing go to the amounts with the largest remainders (ties to the
// earlier one). A printed column then adds up to its printed total, which
// rounding each amount on its own does not ensure. Exact amounts stay in
// the JSON and CSV columns named *_exact.
func DisplayAmounts(amounts []decimal.Decimal, currency string) []decimal.Decimal {
	places := MinorUnits(currency)
	unit := decimal.New(1, -places)
	out := make([]decimal.Decimal, len(amounts))
	sum, floors := decimal.Zero, decimal.Zero
	rems := make([]decimal.Decimal, len(amounts))
	for i, a := range amounts {
		sum = sum.Add(a)
		out[i] = a.RoundFloor(places)
		floors = floors.Add(out[i])
		rems[i] = a.Sub(out[i])
	}
	missing := RoundInvoice(sum, currency).Sub(floors).Div(unit).IntPart()
	order := make([]int, len(amounts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return rems[b].Cmp(rems[a]) })
	for k := 0; k < int(missing) && k < len(order); k++ {
		out[order[k]] = out[order[k]].Add(unit)
	}
	return out
}

// DisplayAmount rounds one amount for display (RoundInvoice), fixed to
// the currency's minor unit: "0.10", "12", "1.000".
func DisplayAmount(d decimal.Decimal, currency string) string {
	return RoundInvoice(d, currency).StringFixedBank(MinorUnits(currency))
}
