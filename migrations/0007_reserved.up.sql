-- PLACEHOLDER, branch quota only: version 0007 belongs to another branch
-- (billing-ids). Versions must run without gaps, so this no-op holds the
-- number until that branch is merged; delete both 0007_reserved files then.
SELECT 1;
