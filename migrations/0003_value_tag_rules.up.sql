-- Value-tag rules. A tag applies to a job when every rule row of that tag
-- holds (metric op threshold). Rows with tenant_id NULL are the defaults; a
-- tenant's rows for a tag replace the default rows for that tag.

CREATE TABLE value_tag_rules (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id  text REFERENCES tenants (id) ON DELETE CASCADE,
    tag        text NOT NULL CHECK (tag ~ '^[a-z][a-z0-9_]{0,62}$'),
    metric     text NOT NULL CHECK (metric IN (
        'input_tokens', 'output_tokens', 'cached_input_tokens',
        'queue_ms', 'time_to_first_token_ms', 'time_per_token_ms',
        'inter_token_ms_p50', 'inter_token_ms_p99', 'total_ms',
        'tool_execution_time_ms', 'memory_allocated_mb',
        'preemptions', 'recomputed_tokens', 'confidence')),
    op         text NOT NULL CHECK (op IN ('>', '>=', '<', '<=', '=')),
    threshold  numeric NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX value_tag_rules_tenant_idx ON value_tag_rules (tenant_id);

-- DESIGN.md's default tags.
INSERT INTO value_tag_rules (tenant_id, tag, metric, op, threshold) VALUES
    (NULL, 'high_latency_risk',        'time_to_first_token_ms', '>', 50),
    (NULL, 'tool_optimization_needed', 'tool_execution_time_ms', '>', 1.0),
    (NULL, 'effective_service',        'output_tokens',          '>', 200),
    (NULL, 'effective_service',        'confidence',             '>', 0.95);
