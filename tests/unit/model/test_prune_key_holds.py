"""Which arguments prune= reads the key= value holds, judged over the calls a site tunes."""

from __future__ import annotations

from tunedsl.model.prune_key_holds import KeyHolds, key_text


def test_a_value_equal_to_a_key_item_on_one_call_only_is_named_when_it_moves() -> None:
    holds = KeyHolds(key_text("TILE=$TILE; blocks=cdiv(n, $TILE); key=(n, tag)"))
    assert holds.not_held({"n": 256, "limit": 64}, (256, 64)) == []  # limit == tag
    assert holds.not_held({"n": 256, "limit": 16}, (256, 64)) == ["limit"]
    assert holds.not_held({"n": 512, "limit": 8}, (512, 64)) == []  # named once


def test_the_key_text_tells_which_argument_an_item_holds() -> None:
    holds = KeyHolds("(M, N, K)")
    first = {"M": 40, "N": 40, "K": 32, "stride_am": 32, "stride_bk": 40, "stride_ak": 1}
    assert holds.not_held(first, (40, 40, 32)) == ["stride_ak", "stride_am", "stride_bk"]
    # Without names to go by (key=x.shape), an item equal on every call holds it.
    shaped = KeyHolds("x.shape")
    assert shaped.not_held({"N": 40}, (4, 40)) == []
    assert shaped.not_held({"N": 100}, (4, 100)) == []
    assert shaped.not_held({"N": 100}, (4, 50)) == ["N"]


def test_unheld_names_a_value_on_every_call_once_it_moved_between_places() -> None:
    """What ``prune_closure.check`` asks: a caller's ``N`` equal to ``tag`` on the first
    call and to ``M`` on the next is not held, named on that call and every later one."""
    holds = KeyHolds("(M, tag)")
    assert holds.unheld({"N": 100}, (4, 100)) == []
    assert holds.unheld({"N": 200}, (200, 0)) == ["N"]
    assert holds.unheld({"N": 100}, (4, 100)) == ["N"]
