package worker

import (
	"time"

	"github.com/zerolayer/zerolayer/contracts"
)

// Quota checks a tenant's limits before a job runs: a *quota.Checker
// (package contracts/quota) does. Admit returns nil and counts the job, or
// a *contracts.Error (rate_limited, concurrency_limited,
// spend_limit_exceeded); Release ends the job's time in flight.
//
// The worker checks every job it pulls, so a tenant publishing straight
// to NATS is held to the same limits as one behind the gateway. It passes
// the time JetStream stored the job as the submit time (a backlog is
// judged by when it was submitted, not by how fast it drains) and
// estimates the prompt tokens from the request's bytes (it has not
// tokenized it yet).
type Quota interface {
	Admit(tenant, jobID string, at time.Time, promptTokens, maxTokens int) error
	Release(tenant, jobID string)
}

// admitQuota checks job against Config.Quota; a refusal is the job's
// terminal error (error event, failed result, DLQ record, Term; no usage,
// so no charge).
func (w *Worker) admitQuota(job *Job) *contracts.Error {
	if w.cfg.Quota == nil {
		return nil
	}
	if err := w.cfg.Quota.Admit(job.Tenant, job.ID, job.EnqueuedAt, job.Request.EstimatedPromptTokens(), job.Request.MaxTokens); err != nil {
		return contracts.ErrorFrom(err)
	}
	return nil
}

// releaseQuota ends job's time in flight.
func (w *Worker) releaseQuota(job *Job) {
	if w.cfg.Quota != nil {
		w.cfg.Quota.Release(job.Tenant, job.ID)
	}
}
