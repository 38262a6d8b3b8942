"""``tunedsl.torch_op`` with arguments of the wrong kind: a UsageError naming the operator,
the argument and the fix, raised where the decorator is used, never PyTorch's bare
``'int' object is not iterable`` or its schema parser's ``expected eof``. Real PyTorch."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from tunedsl import torch_op  # noqa: E402
from tunedsl.errors import UsageError  # noqa: E402

_ids = itertools.count()


def writes(x: torch.Tensor) -> None:
    pass


def unannotated(x):  # type: ignore[no-untyped-def]
    pass


CASES: dict[str, tuple[Callable[[str], Any], list[str]]] = {
    "mutates_args an int": (
        lambda n: torch_op(n, mutates_args=5)(writes),  # type: ignore[arg-type]
        ["mutates_args=5", "list of names", "'unknown'"],
    ),
    "device_types an int": (
        lambda n: torch_op(n, device_types=3)(writes),  # type: ignore[arg-type]
        ["device_types=3", "list of names"],
    ),
    "fake not callable": (
        lambda n: torch_op(n, fake=3)(writes),  # type: ignore[arg-type]
        ["fake=3 is not callable", "torch.empty_like"],
    ),
    "decorating a non-function": (
        lambda n: torch_op(n)(5),  # type: ignore[arg-type]
        ["decorates a function, not 5"],
    ),
    "unknown device": (
        lambda n: torch_op(n, device_types="gpu!")(writes),
        ["on writes: PyTorch refused it", "gpu!"],
    ),
    "a parameter without annotation": (
        lambda n: torch_op(n)(unannotated),
        ["on unannotated: PyTorch refused it", "must have a type annotation"],
    ),
    "returning None and writing nothing": (  # torch.compile would drop it: a wrong result
        lambda n: torch_op(n)(writes),
        ["writes returns None", "mutates_args=", "'unknown'"],
    ),
    "mutating a parameter it lacks": (
        lambda n: torch_op(n, mutates_args=("y",))(writes),
        ["on writes: PyTorch refused it", "mutates_args"],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_wrong_arguments_are_usage_errors_naming_the_operator(case: str) -> None:
    make, says = CASES[case]
    name = f"tunedsl_badargs::op{next(_ids)}"
    with pytest.raises(UsageError) as caught:
        make(name)
    message = str(caught.value)
    assert message.startswith(f"torch_op({name!r})"), message
    for words in says:
        assert words in message, message


@pytest.mark.parametrize("name", ["ns::a b", "n-s::op", "ns::op;x", "::op"])
def test_an_operator_name_that_is_not_two_identifiers_says_so(name: str) -> None:
    with pytest.raises(UsageError, match="both Python identifiers"):
        torch_op(name)


def test_an_operator_returning_none_that_names_what_it_writes_is_accepted() -> None:
    for mutates in (["x"], "unknown"):
        op = torch_op(f"tunedsl_badargs::op{next(_ids)}", mutates_args=mutates)(writes)
        op(torch.zeros(3))
