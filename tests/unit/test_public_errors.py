"""Every exception and warning class users catch or filter is reachable from the package
root (``tunedsl.UsageError``), listed in ``__all__``, and still lazy: reaching one imports
neither torch nor triton."""

from __future__ import annotations

import inspect
import subprocess
import sys

import tunedsl
from tunedsl import errors


def public_error_classes() -> dict[str, type[BaseException] | type[Warning]]:
    return {
        name: cls
        for name, cls in vars(errors).items()
        if inspect.isclass(cls)
        and issubclass(cls, BaseException)
        and cls.__module__ == errors.__name__
        and not name.startswith("_")
    }


def test_every_public_error_class_is_exported_from_the_package_root() -> None:
    classes = public_error_classes()
    assert {"TunedslError", "UsageError", "TuningError", "CacheWarning"} <= set(classes)
    for name, cls in classes.items():
        assert name in tunedsl.__all__, name
        assert getattr(tunedsl, name) is cls, name
        assert name in dir(tunedsl), name


def test_the_untested_triton_warning_is_one_class_wherever_it_is_named() -> None:
    from tunedsl.backends import compat

    assert compat.UntestedTritonWarning is tunedsl.UntestedTritonWarning


def test_catching_a_usage_error_from_the_root_imports_neither_torch_nor_triton() -> None:
    code = (
        "import sys, tunedsl\n"
        "from tunedsl import *\n"
        "try:\n"
        "    tunedsl.Space(tile=[]).dims\n"
        "except tunedsl.UsageError as err:\n"
        "    print('caught', type(err).__name__)\n"
        "print(sorted(m for m in ('torch', 'triton') if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["caught UsageError", "[]"]


def test_a_lambda_dynamo_rebuilt_is_named_by_its_place_not_the_expansions_nesting() -> None:
    """Dynamo rebuilds a traced lambda with its qualified name as ``__name__``: a message
    then named `prune=gate.<locals>.<lambda>.<locals>.<lambda>`, the expansion's nesting."""
    import os

    from tunedsl.errors import callable_name

    prune = lambda configs, args: configs  # noqa: E731 (a lambda is what is named)
    prune.__name__ = "gate.<locals>.<lambda>.<locals>.<lambda>"  # as Dynamo rebuilds it
    line = prune.__code__.co_firstlineno
    assert callable_name(prune) == f"<lambda at {os.path.basename(__file__)}:{line}>"
