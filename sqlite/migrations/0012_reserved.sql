-- 0012: reserved for a migration of a branch merged beside this one (the
-- numbers must stay contiguous); it does nothing. Replace it at the merge.
SELECT 1;
