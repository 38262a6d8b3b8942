"""The tuning engine: search strategies, the measurement loop and choosing (pure Python)."""
