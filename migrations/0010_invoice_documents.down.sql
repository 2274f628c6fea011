ALTER TABLE usage DROP CONSTRAINT usage_cached_within_input;
DROP TABLE tenant_balance;
DROP TABLE credit_note_numbers;
-- Credit notes did not exist before: their credits go back to open.
UPDATE credits SET invoice_id = NULL WHERE invoice_id IN (SELECT id FROM invoices WHERE kind = 'credit_note');
DELETE FROM invoices WHERE kind = 'credit_note';
ALTER TABLE invoices DROP CONSTRAINT invoices_tenant_period_currency_key,
    ADD CONSTRAINT invoices_tenant_id_period_key UNIQUE (tenant_id, period),
    DROP COLUMN kind, DROP COLUMN tax_rule, DROP COLUMN supplier, DROP COLUMN charges_exact,
    DROP COLUMN balance_applied, DROP COLUMN balance_carried, DROP COLUMN payment_terms;
ALTER TABLE tenants DROP COLUMN tax_rounding;
DROP TABLE supplier;
