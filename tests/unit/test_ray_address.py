"""An odd ``--ray`` address (a host name no resolver takes, a port of digits Python's
``int`` refuses) is a usage error naming the address and what is wrong, never another
exception out of the sweep command (``precompile/ray_peer.py``). No Ray cluster is needed:
each is refused before anything is connected to."""

from __future__ import annotations

import pytest

from tunedsl.errors import UsageError
from tunedsl.precompile.ray_peer import checked_address


@pytest.mark.parametrize(
    ("address", "said"),
    [
        ("exa..mple.com:6379", "exa..mple.com"),  # an empty DNS label
        ("a" * 64 + ".com:6379", "a" * 64),  # a label over 63 characters
        ("ray://exa..mple.com:10001", "exa..mple.com"),
        ("localhost:²", "localhost:²"),  # str.isdigit takes a superscript, int() does not
        ("localhost:６３７９", "localhost:６３７９"),  # fullwidth digits: int() takes them
        # Bytes the command line could not decode: Ray's own check raised UnicodeEncodeError.
        (b"\xff:6379".decode("utf-8", "surrogateescape"), "is not HOST:PORT"),
    ],
)
def test_an_odd_ray_address_is_a_usage_error_naming_it(address: str, said: str) -> None:
    with pytest.raises(UsageError) as caught:
        checked_address(address, "--ray")
    message = str(caught.value)
    assert said in message, message
    assert message.startswith("sweep --ray: cannot join a Ray cluster"), message
