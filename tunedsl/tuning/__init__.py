"""Tuning: benchmarking, search strategy, the parallel compile pool and the compile lock."""
