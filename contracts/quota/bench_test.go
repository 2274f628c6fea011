package quota_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/contracts/quota"
)

// BenchmarkAdmit is the cost of one admission (Admit + Release) for a
// tenant without limits (a map look-up) and with every limit set (rate
// windows, jobs in flight, spend estimate in decimal), on the real clock.
// Settle is a millisecond: at the 30-second default, the hundreds of
// thousands of jobs a second this loop admits would keep millions of
// settling entries, which real intake rates never do.
func BenchmarkAdmit(b *testing.B) {
	for _, tc := range []struct {
		name    string
		limited bool
	}{{"unlimited", false}, {"all-limits", true}} {
		b.Run(tc.name, func(b *testing.B) {
			q, err := quota.New(nil, quota.Config{Settle: time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			if tc.limited {
				l := limits("acme")
				l.RequestsPerMinute, l.TokensPerMinute, l.MaxConcurrent = i64(1<<40), i64(1<<50), i64(1<<40)
				l.MonthlySpend, l.PriceIn, l.PriceOut = str("1000000"), "0.000003", "0.000015"
				q.Set(l)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					id := strconv.Itoa(i) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
					if err := q.Admit("acme", id, time.Time{}, 40, 16); err != nil {
						b.Fatal(err)
					}
					q.Release("acme", id)
					i++
				}
			})
		})
	}
}
