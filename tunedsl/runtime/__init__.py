"""Run-time of autotune sites: spaces, configurations, keys, the site hot path, hints."""
