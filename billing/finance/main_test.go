package finance

import (
	"testing"

	"github.com/shopspring/decimal"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }
