DROP TABLE resource_rates;
DROP TABLE credits;
DROP TABLE invoice_numbers;
DROP TABLE invoice_lines;
DROP TABLE invoices;
ALTER TABLE tenants DROP COLUMN billing_name, DROP COLUMN billing_address, DROP COLUMN billing_email,
    DROP COLUMN tax_id, DROP COLUMN tax_rate, DROP COLUMN payment_terms_days;
-- The cached input cost goes back into cost_input, which priced every
-- input token before.
UPDATE usage_batches SET cost_input = cost_input + cost_cached_input;
ALTER TABLE usage_batches DROP COLUMN cost_cached_input;
UPDATE usage_daily SET cost_input = cost_input + cost_cached_input;
ALTER TABLE usage_daily DROP COLUMN cost_cached_input;
UPDATE charge_history SET cost_input = cost_input + cost_cached_input;
ALTER TABLE charge_history DROP COLUMN cost_cached_input, DROP COLUMN multiplier, DROP COLUMN period,
    DROP COLUMN note, DROP COLUMN replaced_by;
DROP INDEX charges_tenant_period_idx;
ALTER TABLE charges DROP CONSTRAINT charges_total_check, DROP CONSTRAINT charges_period_check;
UPDATE charges SET cost_input = cost_input + cost_cached_input;
ALTER TABLE charges DROP COLUMN cost_cached_input, DROP COLUMN multiplier, DROP COLUMN period, DROP COLUMN note,
    ADD CONSTRAINT charges_check CHECK (total = cost_input + cost_output + cost_ttft + cost_tool);
ALTER TABLE price_books DROP CONSTRAINT price_books_end_after_start, DROP COLUMN effective_to, DROP COLUMN p_cached_in,
    DROP COLUMN mult_high, DROP COLUMN mult_normal, DROP COLUMN mult_low, DROP COLUMN mult_batch;
