"""An ordinary module: never expanded, loaded by Python's own pyc path."""

VALUE = 42
