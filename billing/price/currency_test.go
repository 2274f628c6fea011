package price_test

import (
	"testing"

	"github.com/zerolayer/zerolayer/billing/price"

	"github.com/shopspring/decimal"
)

func TestValidateCurrency(t *testing.T) {
	for _, c := range []struct {
		code  string
		ok    bool
		minor int32
	}{
		{"USD", true, 2}, {"EUR", true, 2}, {"JPY", true, 0}, {"KWD", true, 3}, {"CLF", true, 4}, {"CHF", true, 2},
		{"XYZ", false, 2}, {"usd", false, 2}, {"US", false, 2}, {"XAU", false, 2}, {"XXX", false, 2}, {"", false, 2},
	} {
		if err := price.ValidateCurrency(c.code); (err == nil) != c.ok {
			t.Errorf("ValidateCurrency(%q) = %v, want ok %v", c.code, err, c.ok)
		}
		if got := price.MinorUnits(c.code); got != c.minor {
			t.Errorf("MinorUnits(%q) = %d, want %d", c.code, got, c.minor)
		}
	}
}

func TestCheckMinorUnits(t *testing.T) {
	for _, c := range []struct {
		amount, currency string
		ok               bool
	}{
		{"-0.005", "USD", false}, {"0.01", "USD", true}, {"25", "USD", true}, {"25.10", "USD", true},
		{"1", "JPY", true}, {"0.5", "JPY", false}, {"0.125", "KWD", true}, {"0.1255", "KWD", false},
	} {
		if err := price.CheckMinorUnits(decimal.RequireFromString(c.amount), c.currency); (err == nil) != c.ok {
			t.Errorf("CheckMinorUnits(%s %s) = %v, want ok %v", c.amount, c.currency, err, c.ok)
		}
	}
}
