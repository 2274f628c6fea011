-- Back to jobs keyed by job_id alone. This fails (and, being one
-- transaction, changes nothing) when two tenants have a job of the same id:
-- usage's primary key on job_id cannot be rebuilt then. Delete or rename one
-- of each pair first. Rating jobs keep the tenant in their args; the
-- previous code ignores it.

ALTER TABLE charges DROP CONSTRAINT charges_tenant_id_job_id_fkey;
ALTER TABLE charge_history DROP CONSTRAINT charge_history_tenant_id_job_id_fkey;

ALTER TABLE usage DROP CONSTRAINT usage_pkey, ADD PRIMARY KEY (job_id);

ALTER TABLE charges DROP CONSTRAINT charges_pkey, ADD PRIMARY KEY (job_id),
    ADD FOREIGN KEY (job_id) REFERENCES usage (job_id) ON DELETE CASCADE;
CREATE INDEX charges_tenant_idx ON charges (tenant_id);

ALTER TABLE charge_history DROP CONSTRAINT charge_history_tenant_id_job_id_revision_key,
    ADD UNIQUE (job_id, revision),
    ADD FOREIGN KEY (job_id) REFERENCES usage (job_id) ON DELETE CASCADE;
ALTER TABLE charge_history DROP COLUMN tenant_id;
