package producer

import (
	"time"

	"github.com/zerolayer/zerolayer/contracts"
)

// Admitter checks a tenant's limits before a job is published: a
// *quota.Checker (package contracts/quota) does. Admit returns nil and
// counts the job, or a *contracts.Error (rate_limited,
// concurrency_limited, spend_limit_exceeded) with RetryAfterMs; Forget
// takes back a job whose publish failed.
type Admitter interface {
	Admit(tenant, jobID string, at time.Time, promptTokens, maxTokens int) error
	Forget(tenant, jobID string)
}

// admit asks the configured Admitter whether req (n prompt tokens) may be
// published now.
func (c *Client) admit(req *contracts.JobRequest, n int) error {
	if c.cfg.Admitter == nil {
		return nil
	}
	return c.cfg.Admitter.Admit(c.cfg.Tenant, req.ID, time.Now(), n, req.MaxTokens)
}

// forget takes back the admission of a job that was not published.
func (c *Client) forget(req *contracts.JobRequest) {
	if c.cfg.Admitter != nil {
		c.cfg.Admitter.Forget(c.cfg.Tenant, req.ID)
	}
}

// limitRetry returns how long to wait before submitting again after e, a
// refusal for a rate or concurrency limit (ok), or false for any other
// error.
func limitRetry(e *contracts.Error) (time.Duration, bool) {
	if e == nil || e.Code != contracts.CodeRateLimited && e.Code != contracts.CodeConcurrencyLimited || e.RetryAfterMs <= 0 {
		return 0, false
	}
	return e.RetryAfter(), true
}
