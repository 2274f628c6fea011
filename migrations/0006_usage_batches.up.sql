-- Per tenant and batch totals of the rated jobs (the usage records whose
-- request carried metadata batch_id), kept current by the billing batch
-- rollup job as the batch's jobs are rated.

CREATE TABLE usage_batches (
    tenant_id           text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    batch_id            text NOT NULL,
    currency            text NOT NULL,
    jobs                bigint NOT NULL,
    completed           bigint NOT NULL,
    failed              bigint NOT NULL,
    canceled            bigint NOT NULL,
    input_tokens        bigint NOT NULL,
    output_tokens       bigint NOT NULL,
    cached_input_tokens bigint NOT NULL,
    cost_input          numeric NOT NULL,
    cost_output         numeric NOT NULL,
    cost_ttft           numeric NOT NULL,
    cost_tool           numeric NOT NULL,
    total               numeric NOT NULL,
    first_created_at    timestamptz NOT NULL,
    last_finished_at    timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, batch_id, currency)
);

-- Batches rated before this migration.
INSERT INTO usage_batches (tenant_id, batch_id, currency, jobs, completed, failed, canceled,
    input_tokens, output_tokens, cached_input_tokens, cost_input, cost_output, cost_ttft, cost_tool, total,
    first_created_at, last_finished_at)
SELECT u.tenant_id, u.batch_id, c.currency, count(*),
    count(*) FILTER (WHERE u.status = 'completed'), count(*) FILTER (WHERE u.status = 'failed'),
    count(*) FILTER (WHERE u.status = 'canceled'),
    sum(u.input_tokens), sum(u.output_tokens), sum(u.cached_input_tokens),
    sum(c.cost_input), sum(c.cost_output), sum(c.cost_ttft), sum(c.cost_tool), sum(c.total),
    min(u.created_at), max(u.finished_at)
FROM charges c JOIN usage u USING (job_id)
WHERE u.batch_id IS NOT NULL
GROUP BY u.tenant_id, u.batch_id, c.currency;
