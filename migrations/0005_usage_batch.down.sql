DROP INDEX usage_tenant_batch_idx;
ALTER TABLE usage DROP COLUMN custom_id, DROP COLUMN batch_id;
