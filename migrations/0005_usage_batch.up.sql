-- The batch a job belonged to (its request's metadata batch_id and
-- custom_id), so that a batch is billed and reported as one. Records stored
-- before this migration get them from their raw body.

ALTER TABLE usage ADD COLUMN batch_id text, ADD COLUMN custom_id text;

UPDATE usage SET batch_id = NULLIF(raw->>'batch_id', ''), custom_id = NULLIF(raw->>'custom_id', '')
    WHERE raw ? 'batch_id' OR raw ? 'custom_id';

CREATE INDEX usage_tenant_batch_idx ON usage (tenant_id, batch_id) WHERE batch_id IS NOT NULL;
