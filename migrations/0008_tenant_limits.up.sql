-- Per-tenant admission limits, enforced by the gateway and the workers
-- (contracts/quota) from the values billing publishes in the ZL_LIMITS
-- bucket. NULL is no limit; 0 admits nothing (a suspended tenant).

CREATE TABLE tenant_limits (
    tenant_id           text PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    -- Jobs admitted in any 60 seconds.
    requests_per_minute bigint CHECK (requests_per_minute >= 0),
    -- Tokens (prompt + max_tokens) admitted in any 60 seconds.
    tokens_per_minute   bigint CHECK (tokens_per_minute >= 0),
    -- Jobs in flight at one admitter.
    max_concurrent      bigint CHECK (max_concurrent >= 0),
    -- Month-to-date charges plus the estimate of jobs in flight, per UTC
    -- calendar month, in currency.
    monthly_spend       numeric CHECK (monthly_spend >= 0),
    currency            text NOT NULL DEFAULT 'USD' CHECK (currency ~ '^[A-Z]{3}$'),
    updated_at          timestamptz NOT NULL DEFAULT now()
);

-- The month-to-date spend sums usage by tenant and created_at
-- (usage_tenant_created_idx) joined to charges on job_id.
