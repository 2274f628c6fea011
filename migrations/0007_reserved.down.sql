-- PLACEHOLDER, branch quota only: see 0007_reserved.up.sql.
SELECT 1;
