"""Front end: DSL source text to Python AST and code objects (no torch, no triton)."""

# Bump whenever the expansion output for the same input changes (it keys the bytecode cache).
GRAMMAR_VERSION: str = "10"  # 2: make_site(scope=, ordinal=); 3: launch=; 4: key= in launch=;
# 5: a macro in an f-string is an error (it was left unexpanded); 6: a field `$` cannot read;
# 7: names read as Python reads identifiers (NFKC, combining marks); 8: space_per_call=;
# 9: verify_per_call=; 10: a bare `@autotune` is an error (it was left unexpanded)
