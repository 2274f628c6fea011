-- Tenants and versioned price books, with the default book of DESIGN.md.

CREATE TABLE tenants (
    id         text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9_-]{1,64}$'),
    name       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- A price book with tenant_id NULL is a default book, applying to every
-- tenant without one of its own; model NULL applies to every model. Versions
-- count up within one (tenant_id, model) scope; the book in force for a usage
-- record is the most specific scope's latest book whose effective_at is not
-- after the usage's created_at.
CREATE TABLE price_books (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id    text REFERENCES tenants (id) ON DELETE CASCADE,
    model        text CHECK (model <> ''),
    version      integer NOT NULL CHECK (version > 0),
    effective_at timestamptz NOT NULL,
    currency     text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    p_in         numeric NOT NULL CHECK (p_in >= 0),
    p_out        numeric NOT NULL CHECK (p_out >= 0),
    p_ttft       numeric NOT NULL CHECK (p_ttft >= 0),
    p_tool       numeric NOT NULL CHECK (p_tool >= 0),
    note         text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- One version number per scope. NULL means "default" or "any model" here, so
-- the NULLs are folded to '' (never a valid tenant or model) to compare equal.
CREATE UNIQUE INDEX price_books_scope_version_key
    ON price_books ((coalesce(tenant_id, '')), (coalesce(model, '')), version);

CREATE INDEX price_books_lookup_idx
    ON price_books (tenant_id, model, effective_at DESC);

-- DESIGN.md's default prices (USD): per input token, per output token, per
-- millisecond to first token, per millisecond of tool execution.
INSERT INTO price_books (tenant_id, model, version, effective_at, currency, p_in, p_out, p_ttft, p_tool, note)
VALUES (NULL, NULL, 1, '1970-01-01T00:00:00Z', 'USD', 0.000003, 0.000015, 0.0000002, 0.0000001, 'DESIGN.md defaults');
