"""Prints how it was run, as JSON: argv, __name__, sys.path[0], __file__; exits with argv[1]."""

import json
import sys

import dsl_helper

from tunedsl import autotune, cdiv  # a DSL script: imports the macro

print(
    json.dumps(
        {
            "argv": sys.argv,
            "name": __name__,
            "path0": sys.path[0],
            "file": __file__,
            "helper": dsl_helper.describe(),
            "macro_is_tunedsl": autotune.__module__,
            "blocks": cdiv(1000, 256),
        }
    )
)
if len(sys.argv) > 1 and sys.argv[1].lstrip("-").isdigit():
    sys.exit(int(sys.argv[1]))
