-- The embedding tag's rules (a tenant's too) go with their metric.
DELETE FROM value_tag_rules WHERE metric = 'embedding_input_tokens';
ALTER TABLE value_tag_rules DROP CONSTRAINT value_tag_rules_metric_check,
    ADD CONSTRAINT value_tag_rules_metric_check CHECK (metric IN (
        'input_tokens', 'output_tokens', 'cached_input_tokens',
        'queue_ms', 'time_to_first_token_ms', 'time_per_token_ms',
        'inter_token_ms_p50', 'inter_token_ms_p99', 'total_ms',
        'tool_execution_time_ms', 'memory_allocated_mb',
        'preemptions', 'recomputed_tokens', 'confidence'));
-- The embedding input cost goes back into cost_input, which priced every
-- input token before.
UPDATE usage_batches SET cost_input = cost_input + cost_embedding_input;
ALTER TABLE usage_batches DROP COLUMN cost_embedding_input, DROP COLUMN embedding_input_tokens;
UPDATE usage_daily SET cost_input = cost_input + cost_embedding_input;
ALTER TABLE usage_daily DROP COLUMN cost_embedding_input, DROP COLUMN embedding_input_tokens;
UPDATE charge_history SET cost_input = cost_input + cost_embedding_input;
ALTER TABLE charge_history DROP COLUMN cost_embedding_input;
ALTER TABLE charges DROP CONSTRAINT charges_total_check;
UPDATE charges SET cost_input = cost_input + cost_embedding_input;
ALTER TABLE charges DROP COLUMN cost_embedding_input,
    ADD CONSTRAINT charges_total_check CHECK (total = cost_input + cost_cached_input + cost_output + cost_ttft + cost_tool);
ALTER TABLE usage DROP COLUMN kind;
ALTER TABLE price_books DROP COLUMN p_embed_in;
