package gateway

import (
	"net/http"
	"strconv"

	"github.com/zerolayer/zerolayer/contracts"
)

// setRetryAfter sets the Retry-After header (whole seconds, rounded up)
// of an answer refusing a job for a tenant limit: rate_limited,
// concurrency_limited or spend_limit_exceeded with RetryAfterMs. The
// limits are those of Config.Quota, a *quota.Checker (contracts/quota)
// following what billing publishes; a tenant over one gets 429 before
// anything is published, so nothing runs and nothing is charged.
func setRetryAfter(w http.ResponseWriter, e *contracts.Error) {
	if e == nil || e.RetryAfterMs <= 0 {
		return
	}
	switch e.Code {
	case contracts.CodeRateLimited, contracts.CodeConcurrencyLimited, contracts.CodeSpendLimitExceeded:
		w.Header().Set("Retry-After", strconv.FormatInt((e.RetryAfterMs+999)/1000, 10))
	}
}
