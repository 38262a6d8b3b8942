"""Front end: DSL source text to Python AST and code objects (no torch, no triton)."""
