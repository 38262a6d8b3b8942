"""Backends: the only modules that touch triton and torch."""
