-- Invoices an accountant signs. Each line is rounded on its own
-- (quantity × unit price, half to even at the currency's minor unit) and
-- tax is computed from the rounded taxable amount by a stated rule, per
-- invoice or per line; a month whose total is negative is a credit note,
-- numbered in a series of its own, and its amount is carried to the
-- tenant's next invoices as a balance; the supplier's details are printed
-- on every document; a month may bill more than one currency (late usage
-- priced before a currency change), one document per currency.

-- The supplier: the seller printed on every invoice and credit note. The
-- latest row applies; each document keeps a copy as it was at issue.
CREATE TABLE supplier (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name                 text NOT NULL CHECK (name <> ''),
    address              text NOT NULL CHECK (address <> ''),
    tax_id               text NOT NULL DEFAULT '',
    email                text NOT NULL DEFAULT '',
    -- How to pay: bank details, a payment link.
    payment_instructions text NOT NULL DEFAULT '',
    created_by           text NOT NULL DEFAULT '',
    created_at           timestamptz NOT NULL DEFAULT now()
);

-- How a tenant's tax is rounded: 'invoice' rounds rate × the rounded
-- subtotal once; 'line' rounds rate × each rounded line and adds them up.
ALTER TABLE tenants
    ADD COLUMN tax_rounding text NOT NULL DEFAULT 'invoice' CHECK (tax_rounding IN ('invoice', 'line'));

-- tax_rule 'legacy' marks the invoices issued before this migration,
-- whose subtotal, tax and total are the exact (unrounded) amounts and
-- whose amount_due is the total rounded once; the others store the
-- amounts as charged: subtotal the sum of the rounded lines, tax by the
-- rule, total = subtotal + tax, amount_due = total − balance_applied, and
-- charges_exact the exact sum of the lines (the ledger's charges and
-- credits).
ALTER TABLE invoices
    ADD COLUMN kind            text NOT NULL DEFAULT 'invoice' CHECK (kind IN ('invoice', 'credit_note')),
    ADD COLUMN tax_rule        text NOT NULL DEFAULT 'legacy' CHECK (tax_rule IN ('legacy', 'invoice', 'line')),
    ADD COLUMN supplier        jsonb,
    ADD COLUMN charges_exact   numeric,
    ADD COLUMN balance_applied numeric NOT NULL DEFAULT 0 CHECK (balance_applied >= 0),
    ADD COLUMN balance_carried numeric NOT NULL DEFAULT 0 CHECK (balance_carried >= 0),
    ADD COLUMN payment_terms   text NOT NULL DEFAULT '',
    DROP CONSTRAINT invoices_tenant_id_period_key,
    ADD CONSTRAINT invoices_tenant_period_currency_key UNIQUE (tenant_id, period, currency);
ALTER TABLE invoices ALTER COLUMN tax_rule DROP DEFAULT;

-- Gapless credit-note numbers, per year of issue (CN-2026-000001).
CREATE TABLE credit_note_numbers (
    year integer PRIMARY KEY,
    last integer NOT NULL
);

-- A tenant's balance per currency: a credit note adds its amount
-- (positive: owed to the tenant), an invoice that uses it subtracts what
-- it applied. The balance is the sum, never negative.
CREATE TABLE tenant_balance (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id  text NOT NULL REFERENCES tenants (id),
    currency   text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    amount     numeric NOT NULL CHECK (amount <> 0),
    invoice_id bigint NOT NULL REFERENCES invoices (id),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX tenant_balance_tenant_idx ON tenant_balance (tenant_id, currency);

-- The relation pricing needs: the uncached input tokens (input −
-- cached) are never negative. The ingester refuses such a record with
-- the code usage_invariant; this check backs it. NOT VALID: rows stored
-- before are not checked again.
ALTER TABLE usage ADD CONSTRAINT usage_cached_within_input CHECK (cached_input_tokens <= input_tokens) NOT VALID;
