-- Job ids are unique per tenant, not globally: two tenants may each have a
-- job "BATCH1-line7". A job is now keyed by (tenant_id, job_id) in usage,
-- charges and charge_history, so that each tenant's record is stored, rated
-- and billed once under its own tenant, and no tenant can block another's
-- billing by reusing its id. Rows stored before keep their keys: job ids were
-- globally unique then, so they are unique per tenant too. The keys are
-- rebuilt under an ACCESS EXCLUSIVE lock of the three tables (the ingester
-- and the rating jobs wait, then carry on).

-- The references to usage go first: they depend on its primary key.
ALTER TABLE charges DROP CONSTRAINT charges_job_id_fkey;
ALTER TABLE charge_history DROP CONSTRAINT charge_history_job_id_fkey;

ALTER TABLE usage DROP CONSTRAINT usage_pkey, ADD PRIMARY KEY (tenant_id, job_id);

-- A charge belongs to its tenant's job; the key's prefix replaces
-- charges_tenant_idx.
ALTER TABLE charges DROP CONSTRAINT charges_pkey, ADD PRIMARY KEY (tenant_id, job_id),
    ADD FOREIGN KEY (tenant_id, job_id) REFERENCES usage (tenant_id, job_id) ON DELETE CASCADE;
DROP INDEX charges_tenant_idx;

-- charge_history gets the job's tenant, from its usage row.
ALTER TABLE charge_history ADD COLUMN tenant_id text;
UPDATE charge_history h SET tenant_id = u.tenant_id FROM usage u WHERE u.job_id = h.job_id;
ALTER TABLE charge_history ALTER COLUMN tenant_id SET NOT NULL,
    DROP CONSTRAINT charge_history_job_id_revision_key,
    ADD UNIQUE (tenant_id, job_id, revision),
    ADD FOREIGN KEY (tenant_id, job_id) REFERENCES usage (tenant_id, job_id) ON DELETE CASCADE;

-- Rating and re-rating jobs not finished yet name their job by job_id
-- alone; give them its tenant, which billing now needs to find the job.
UPDATE river_job j SET args = j.args || jsonb_build_object('tenant', u.tenant_id)
FROM usage u
WHERE j.kind IN ('zl_billing_rate', 'zl_billing_rerate') AND j.finalized_at IS NULL
    AND NOT j.args ? 'tenant' AND u.job_id = j.args->>'job_id';
