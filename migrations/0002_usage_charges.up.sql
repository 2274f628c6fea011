-- Usage records as received from ZL_USAGE, and the charges rated from them.

CREATE TABLE usage (
    job_id                 text PRIMARY KEY,
    tenant_id              text NOT NULL REFERENCES tenants (id),
    model                  text NOT NULL,
    priority               text NOT NULL CHECK (priority IN ('high', 'normal', 'low')),
    bucket                 text NOT NULL CHECK (bucket IN ('short', 'medium', 'long')),
    status                 text NOT NULL CHECK (status IN ('completed', 'failed', 'canceled')),
    input_tokens           bigint NOT NULL CHECK (input_tokens >= 0),
    output_tokens          bigint NOT NULL CHECK (output_tokens >= 0),
    cached_input_tokens    bigint NOT NULL CHECK (cached_input_tokens >= 0),
    queue_ms               numeric NOT NULL CHECK (queue_ms >= 0),
    time_to_first_token_ms numeric NOT NULL CHECK (time_to_first_token_ms >= 0),
    time_per_token_ms      numeric NOT NULL CHECK (time_per_token_ms >= 0),
    inter_token_ms_p50     numeric NOT NULL CHECK (inter_token_ms_p50 >= 0),
    inter_token_ms_p99     numeric NOT NULL CHECK (inter_token_ms_p99 >= 0),
    total_ms               numeric NOT NULL CHECK (total_ms >= 0),
    tool_execution_time_ms numeric NOT NULL CHECK (tool_execution_time_ms >= 0),
    memory_allocated_mb    numeric NOT NULL CHECK (memory_allocated_mb >= 0),
    preemptions            integer NOT NULL CHECK (preemptions >= 0),
    recomputed_tokens      bigint NOT NULL CHECK (recomputed_tokens >= 0),
    attempt                integer NOT NULL CHECK (attempt >= 1),
    trace_id               text NOT NULL,
    worker_id              text NOT NULL,
    device                 text NOT NULL,
    confidence             numeric NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    created_at             timestamptz NOT NULL,
    finished_at            timestamptz NOT NULL,
    -- The message body exactly as received, for audit and re-rating.
    raw                    jsonb NOT NULL,
    -- The ZL_USAGE stream sequence of the first delivery that was stored.
    stream_seq             bigint,
    ingested_at            timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX usage_tenant_created_idx ON usage (tenant_id, created_at);

CREATE TABLE charges (
    job_id             text PRIMARY KEY REFERENCES usage (job_id) ON DELETE CASCADE,
    tenant_id          text NOT NULL REFERENCES tenants (id),
    model              text NOT NULL,
    price_book_id      bigint NOT NULL REFERENCES price_books (id),
    price_book_version integer NOT NULL,
    currency           text NOT NULL,
    cost_input         numeric NOT NULL,
    cost_output        numeric NOT NULL,
    cost_ttft          numeric NOT NULL,
    cost_tool          numeric NOT NULL,
    total              numeric NOT NULL,
    tags               text[] NOT NULL DEFAULT '{}',
    -- revision counts ratings: 1 for the first, one more per re-rating.
    revision           integer NOT NULL DEFAULT 1,
    rated_at           timestamptz NOT NULL DEFAULT now(),
    CHECK (total = cost_input + cost_output + cost_ttft + cost_tool)
);

CREATE INDEX charges_tenant_idx ON charges (tenant_id);

-- Every charge a re-rating replaced, as it was.
CREATE TABLE charge_history (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id             text NOT NULL REFERENCES usage (job_id) ON DELETE CASCADE,
    revision           integer NOT NULL,
    price_book_id      bigint NOT NULL REFERENCES price_books (id),
    price_book_version integer NOT NULL,
    currency           text NOT NULL,
    cost_input         numeric NOT NULL,
    cost_output        numeric NOT NULL,
    cost_ttft          numeric NOT NULL,
    cost_tool          numeric NOT NULL,
    total              numeric NOT NULL,
    tags               text[] NOT NULL,
    rated_at           timestamptz NOT NULL,
    replaced_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (job_id, revision)
);
