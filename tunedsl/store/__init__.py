"""On-disk state: where the per-user caches live, and the tuning records in them."""
