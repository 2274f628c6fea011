-- Per tenant and UTC day (of the usage's created_at) totals of the rated
-- jobs, rebuilt by the billing rollup job.

CREATE TABLE usage_daily (
    tenant_id           text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    day                 date NOT NULL,
    currency            text NOT NULL,
    jobs                bigint NOT NULL,
    input_tokens        bigint NOT NULL,
    output_tokens       bigint NOT NULL,
    cached_input_tokens bigint NOT NULL,
    cost_input          numeric NOT NULL,
    cost_output         numeric NOT NULL,
    cost_ttft           numeric NOT NULL,
    cost_tool           numeric NOT NULL,
    total               numeric NOT NULL,
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, day, currency)
);
