-- Embedding jobs (usage kind 'embedding'): their input tokens are priced
-- per token at a price-book line of their own, in a cost dimension of
-- their own, and tagged.

-- p_embed_in is the price of one input token of an embedding job; NULL
-- (every book stored before) means p_in, which priced them before.
ALTER TABLE price_books ADD COLUMN p_embed_in numeric CHECK (p_embed_in >= 0);

-- What the job did: 'generation' (every record without a kind) or
-- 'embedding'. Records stored before get it from their raw body.
ALTER TABLE usage ADD COLUMN kind text NOT NULL DEFAULT 'generation' CHECK (kind IN ('generation', 'embedding'));
UPDATE usage SET kind = 'embedding' WHERE raw->>'kind' = 'embedding';

-- cost_embedding_input is an embedding job's input tokens × p_embed_in
-- (cost_input and cost_cached_input are then 0); 0 for a generation. An
-- embedding record rated before this migration keeps its input in
-- cost_input until it is re-rated.
ALTER TABLE charges ADD COLUMN cost_embedding_input numeric NOT NULL DEFAULT 0,
    DROP CONSTRAINT charges_total_check,
    ADD CONSTRAINT charges_total_check
        CHECK (total = cost_input + cost_cached_input + cost_embedding_input + cost_output + cost_ttft + cost_tool);
ALTER TABLE charge_history ADD COLUMN cost_embedding_input numeric NOT NULL DEFAULT 0;

-- The rollups carry the dimension, and the embedding jobs' input tokens
-- (a part of input_tokens).
ALTER TABLE usage_daily
    ADD COLUMN embedding_input_tokens bigint NOT NULL DEFAULT 0,
    ADD COLUMN cost_embedding_input   numeric NOT NULL DEFAULT 0;
ALTER TABLE usage_batches
    ADD COLUMN embedding_input_tokens bigint NOT NULL DEFAULT 0,
    ADD COLUMN cost_embedding_input   numeric NOT NULL DEFAULT 0;
UPDATE usage_daily d SET embedding_input_tokens = e.tokens
FROM (SELECT u.tenant_id, (u.created_at AT TIME ZONE 'UTC')::date AS day, c.currency, sum(u.input_tokens) AS tokens
      FROM usage u JOIN charges c USING (tenant_id, job_id)
      WHERE u.kind = 'embedding' GROUP BY 1, 2, 3) e
WHERE d.tenant_id = e.tenant_id AND d.day = e.day AND d.currency = e.currency;
UPDATE usage_batches b SET embedding_input_tokens = e.tokens
FROM (SELECT u.tenant_id, u.batch_id, c.currency, sum(u.input_tokens) AS tokens
      FROM usage u JOIN charges c USING (tenant_id, job_id)
      WHERE u.kind = 'embedding' AND u.batch_id IS NOT NULL GROUP BY 1, 2, 3) e
WHERE b.tenant_id = e.tenant_id AND b.batch_id = e.batch_id AND b.currency = e.currency;

-- Value tags may test embedding_input_tokens: an embedding job's input
-- tokens, 0 for a generation. The default tag 'embedding' marks the
-- embedding jobs.
ALTER TABLE value_tag_rules DROP CONSTRAINT value_tag_rules_metric_check,
    ADD CONSTRAINT value_tag_rules_metric_check CHECK (metric IN (
        'input_tokens', 'output_tokens', 'cached_input_tokens',
        'queue_ms', 'time_to_first_token_ms', 'time_per_token_ms',
        'inter_token_ms_p50', 'inter_token_ms_p99', 'total_ms',
        'tool_execution_time_ms', 'memory_allocated_mb',
        'preemptions', 'recomputed_tokens', 'confidence',
        'embedding_input_tokens'));
INSERT INTO value_tag_rules (tenant_id, tag, metric, op, threshold) VALUES
    (NULL, 'embedding', 'embedding_input_tokens', '>', 0);
