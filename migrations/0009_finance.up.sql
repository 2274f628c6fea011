-- What a finance team needs to close a month: price books with an end,
-- a cached-input price and multipliers per priority and for batch jobs;
-- charges that carry the cached-input dimension, their multiplier and the
-- billing period (month) they are invoiced in; customer and tax details
-- per tenant; credits and adjustments; invoices, numbered without gaps,
-- with their lines (an invoiced period is locked: no re-rating, and late
-- usage goes to the next open period); and the operator's resource rates,
-- the cost side of the cross-subsidy view.

-- A book's end: from effective_to on, its scope has no price of its own
-- (a less specific scope's book applies, or none). p_cached_in is the
-- price of one cached input token; NULL (every book stored before) means
-- p_in. The multipliers scale every dimension of a job's cost: by its
-- priority, and for a job of a batch (metadata batch_id).
ALTER TABLE price_books
    ADD COLUMN effective_to timestamptz,
    ADD COLUMN p_cached_in  numeric CHECK (p_cached_in >= 0),
    ADD COLUMN mult_high    numeric NOT NULL DEFAULT 1 CHECK (mult_high > 0),
    ADD COLUMN mult_normal  numeric NOT NULL DEFAULT 1 CHECK (mult_normal > 0),
    ADD COLUMN mult_low     numeric NOT NULL DEFAULT 1 CHECK (mult_low > 0),
    ADD COLUMN mult_batch   numeric NOT NULL DEFAULT 1 CHECK (mult_batch > 0),
    ADD CONSTRAINT price_books_end_after_start CHECK (effective_to IS NULL OR effective_to > effective_at);

-- cost_input is now the uncached input tokens' cost, cost_cached_input the
-- cached ones' (charges made before priced every input token at p_in in
-- cost_input, and keep it). period is the first day of the UTC month the
-- charge is invoiced in: its usage's month, or, for usage rated after that
-- month was invoiced, the next open month (note says so).
ALTER TABLE charges
    ADD COLUMN cost_cached_input numeric NOT NULL DEFAULT 0,
    ADD COLUMN multiplier        numeric NOT NULL DEFAULT 1,
    ADD COLUMN period            date,
    ADD COLUMN note              text NOT NULL DEFAULT '';
UPDATE charges c SET period = date_trunc('month', u.created_at AT TIME ZONE 'UTC')::date
    FROM usage u WHERE u.tenant_id = c.tenant_id AND u.job_id = c.job_id;
ALTER TABLE charges
    ALTER COLUMN period SET NOT NULL,
    DROP CONSTRAINT charges_check,
    ADD CONSTRAINT charges_total_check CHECK (total = cost_input + cost_cached_input + cost_output + cost_ttft + cost_tool),
    ADD CONSTRAINT charges_period_check CHECK (extract(day FROM period) = 1);
CREATE INDEX charges_tenant_period_idx ON charges (tenant_id, period);

ALTER TABLE charge_history
    ADD COLUMN cost_cached_input numeric NOT NULL DEFAULT 0,
    ADD COLUMN multiplier        numeric NOT NULL DEFAULT 1,
    ADD COLUMN period            date,
    ADD COLUMN note              text NOT NULL DEFAULT '',
    -- Who asked for the re-rating that replaced the charge, and why.
    ADD COLUMN replaced_by       text NOT NULL DEFAULT '';
UPDATE charge_history h SET period = date_trunc('month', u.created_at AT TIME ZONE 'UTC')::date
    FROM usage u WHERE u.tenant_id = h.tenant_id AND u.job_id = h.job_id;

ALTER TABLE usage_daily ADD COLUMN cost_cached_input numeric NOT NULL DEFAULT 0;
ALTER TABLE usage_batches ADD COLUMN cost_cached_input numeric NOT NULL DEFAULT 0;

-- Customer details printed on invoices, and the tax rate applied to them
-- (0.2 is 20 %).
ALTER TABLE tenants
    ADD COLUMN billing_name       text NOT NULL DEFAULT '',
    ADD COLUMN billing_address    text NOT NULL DEFAULT '',
    ADD COLUMN billing_email      text NOT NULL DEFAULT '',
    ADD COLUMN tax_id             text NOT NULL DEFAULT '',
    ADD COLUMN tax_rate           numeric NOT NULL DEFAULT 0 CHECK (tax_rate >= 0 AND tax_rate < 1),
    ADD COLUMN payment_terms_days integer NOT NULL DEFAULT 30 CHECK (payment_terms_days BETWEEN 0 AND 365);

-- Invoices: one per tenant and month, which it locks. amount_due is total
-- rounded half to even at the currency's minor unit; the other amounts
-- are exact.
CREATE TABLE invoices (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    number      text NOT NULL UNIQUE,
    tenant_id   text NOT NULL REFERENCES tenants (id),
    period      date NOT NULL CHECK (extract(day FROM period) = 1),
    currency    text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    issued_at   timestamptz NOT NULL DEFAULT now(),
    due_at      date NOT NULL,
    -- The tenant's billing details when the invoice was issued.
    customer    jsonb NOT NULL,
    tax_rate    numeric NOT NULL,
    subtotal    numeric NOT NULL,
    tax         numeric NOT NULL,
    total       numeric NOT NULL CHECK (total = subtotal + tax),
    amount_due  numeric NOT NULL,
    jobs        bigint NOT NULL,
    -- Informational: per value tag, the jobs and charges that carry it
    -- (a job with several tags counts in each).
    tag_summary jsonb NOT NULL DEFAULT '[]',
    closed_by   text NOT NULL CHECK (closed_by <> ''),
    note        text NOT NULL DEFAULT '',
    UNIQUE (tenant_id, period)
);

-- An invoice's lines. A usage line is one dimension of the charges of one
-- model, priority, batch or not, and price book: quantity × unit_price =
-- amount. Credit and adjustment lines come from the credits table.
-- amount is exact; amount_display is rounded at the minor unit so that the
-- displayed lines add up to the displayed subtotal (largest remainder).
CREATE TABLE invoice_lines (
    invoice_id     bigint NOT NULL REFERENCES invoices (id) ON DELETE CASCADE,
    line_no        integer NOT NULL,
    kind           text NOT NULL CHECK (kind IN ('usage', 'credit', 'adjustment')),
    description    text NOT NULL,
    model          text NOT NULL DEFAULT '',
    priority       text NOT NULL DEFAULT '',
    batch          boolean NOT NULL DEFAULT false,
    price_book_id  bigint REFERENCES price_books (id),
    dimension      text NOT NULL DEFAULT '',
    jobs           bigint NOT NULL DEFAULT 0,
    quantity       numeric NOT NULL DEFAULT 0,
    unit           text NOT NULL DEFAULT '',
    unit_price     numeric NOT NULL DEFAULT 0,
    amount         numeric NOT NULL,
    amount_display numeric NOT NULL,
    credit_id      bigint,
    PRIMARY KEY (invoice_id, line_no)
);

-- Gapless invoice numbers, per year of issue.
CREATE TABLE invoice_numbers (
    year integer PRIMARY KEY,
    last integer NOT NULL
);

-- Credits (negative amount) and adjustments (either sign), each for one
-- tenant's open month, who added it and why. invoice_id is set when the
-- month is invoiced.
CREATE TABLE credits (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id  text NOT NULL REFERENCES tenants (id),
    period     date NOT NULL CHECK (extract(day FROM period) = 1),
    kind       text NOT NULL CHECK (kind IN ('credit', 'adjustment')),
    amount     numeric NOT NULL CHECK (amount <> 0 AND (kind <> 'credit' OR amount < 0)),
    currency   text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    reason     text NOT NULL CHECK (reason <> ''),
    created_by text NOT NULL CHECK (created_by <> ''),
    created_at timestamptz NOT NULL DEFAULT now(),
    invoice_id bigint REFERENCES invoices (id)
);
CREATE INDEX credits_tenant_period_idx ON credits (tenant_id, period);

-- The operator's cost of the resources a job holds, for the cross-subsidy
-- view: per millisecond of engine time (admission to end), per MiB of KV
-- memory held for a millisecond, per millisecond of tool execution. The
-- latest row effective at a job's created_at applies.
CREATE TABLE resource_rates (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    effective_at timestamptz NOT NULL,
    currency     text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    engine_ms    numeric NOT NULL CHECK (engine_ms >= 0),
    kv_mib_ms    numeric NOT NULL CHECK (kv_mib_ms >= 0),
    tool_ms      numeric NOT NULL CHECK (tool_ms >= 0),
    note         text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- An H200 at 3.50 USD an hour is 0.00000097 a millisecond; its 141 GB of
-- memory make 0.0000000000069 per MiB-millisecond; a CPU core for tools at
-- 0.04 USD an hour is 0.000000011 a millisecond.
INSERT INTO resource_rates (effective_at, currency, engine_ms, kv_mib_ms, tool_ms, note)
VALUES ('1970-01-01T00:00:00Z', 'USD', 0.00000097, 0.0000000000069, 0.000000011,
    'H200 at 3.50 USD/h, its memory pro rata, a CPU core at 0.04 USD/h');
