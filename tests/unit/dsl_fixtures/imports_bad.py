"""A plain script that imports a DSL module with a DSL error in it."""

print("before the import")
import bad_placeholder  # noqa: E402, F401
