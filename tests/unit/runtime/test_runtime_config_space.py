"""Config and Space: pure Python, no torch or triton."""

from __future__ import annotations

import json
import pickle

import pytest

from tunedsl.errors import TunedslSyntaxError, UsageError
from tunedsl.model.config import Config
from tunedsl.model.space import Space, check_placeholders, expand_space


def test_config_reads_fields_and_is_frozen() -> None:
    cfg = Config(tile=256, num_warps=4)
    assert cfg.tile == 256 and cfg["num_warps"] == 4
    with pytest.raises(AttributeError, match="frozen"):
        cfg.tile = 3  # type: ignore[misc]


def test_config_unknown_field_names_the_fields() -> None:
    cfg = Config(tile=256, num_warps=4)
    with pytest.raises(AttributeError) as info:
        _ = cfg.tiel
    assert "'tiel'" in str(info.value) and "tile, num_warps" in str(info.value)


def test_config_unknown_field_suggests_the_close_one() -> None:
    # A misspelling (in a Space constraint=), or triton.autotune's upper-case `meta["TILE"]`
    # for a field `tile`, is named with the field meant.
    cfg = Config(tile=256, num_warps=4)
    with pytest.raises(AttributeError, match=r"has no field 'tiel'; did you mean 'tile'\?"):
        _ = cfg.tiel
    with pytest.raises(KeyError, match=r"has no field 'TILE'; did you mean 'tile'\?"):
        _ = cfg["TILE"]
    with pytest.raises(AttributeError) as info:
        _ = cfg.zzz
    assert "did you mean" not in str(info.value)


def test_config_equality_ignores_order_but_not_type() -> None:
    assert Config(a=1, b=2) == Config(b=2, a=1)
    assert hash(Config(a=1, b=2)) == hash(Config(b=2, a=1))
    assert Config(a=1) != Config(a=True)
    assert Config(a=1) != Config(a=1.0)
    assert len({Config(a=1), Config(a=1), Config(a=2)}) == 2


def test_config_reads_as_a_mapping_of_its_fields() -> None:
    # Helion's Config is a Mapping: dict(cfg) read two-letter names as key/value pairs
    # ({'B': 'N'}) and {**cfg} raised, as Config had no keys().
    cfg = Config(BM=64, BN=32)
    assert dict(cfg) == {"BM": 64, "BN": 32} == {**cfg}
    assert (lambda **kw: kw)(**cfg) == {"BM": 64, "BN": 32}
    assert cfg.keys() == ["BM", "BN"] and cfg.values() == [64, 32]


def test_config_round_trips_through_json_and_pickle() -> None:
    cfg = Config(tile=256, name="x", ratio=0.5, flag=True, nothing=None)
    assert Config.from_json(json.loads(json.dumps(cfg.to_json()))) == cfg
    assert pickle.loads(pickle.dumps(cfg)) == cfg
    assert cfg.dumps() == Config(**dict(reversed(cfg.items()))).dumps()


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"tile": [1, 2]}, "JSON scalars"),
        ({"tile": object()}, "JSON scalars"),
        ({"_x": 1}, "identifier"),
        ({"items": 1}, "reserved"),
        ({"t": float("nan")}, "NaN"),
    ],
)
def test_config_rejects_bad_fields(fields: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        Config(fields)


def test_dict_space_is_a_product_last_axis_fastest() -> None:
    configs = expand_space({"tile": [64, 128], "num_warps": [2, 4]})
    assert configs == (
        Config(tile=64, num_warps=2),
        Config(tile=64, num_warps=4),
        Config(tile=128, num_warps=2),
        Config(tile=128, num_warps=4),
    )


def test_list_space_is_a_fixed_list_without_duplicates() -> None:
    configs = expand_space([{"tile": 64}, {"tile": 128, "num_warps": 8}, {"tile": 64}])
    assert configs == (Config(tile=64), Config(tile=128, num_warps=8))


def test_space_constraint_filters_the_product() -> None:
    space = Space(
        tile=[64, 128, 256], num_warps=[2, 8], constraint=lambda c: c.tile // c.num_warps >= 32
    )
    assert Config(tile=64, num_warps=8) not in space.configs()
    assert Config(tile=256, num_warps=8) in space.configs()
    assert len(space.configs()) == 4


def test_scalar_axis_is_one_value() -> None:
    assert expand_space({"tile": 64, "num_stages": [2, 3]}) == (
        Config(tile=64, num_stages=2),
        Config(tile=64, num_stages=3),
    )


@pytest.mark.parametrize(
    "space, message",
    [
        ({}, "empty"),
        ([], "empty"),
        ({"tile": []}, "axis 'tile' is empty"),
        ({"tile": [object()]}, "JSON scalars"),
        ([1, 2], r"space\[0\]"),
        ("tile", "must be a dict"),
        (Space(tile=[1, 2], constraint=lambda c: False), "removed all 2"),
    ],
)
def test_bad_spaces_raise_usage_errors(space: object, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        expand_space(space)


def test_unknown_placeholder_points_at_the_name(tmp_path) -> None:
    script = tmp_path / "k.py"
    script.write_text("x = 1\n    autotune(space=s, blocks=cdiv(n, $tiel), k(a))\n")
    configs = expand_space({"tile": [64]})
    with pytest.raises(TunedslSyntaxError) as info:
        check_placeholders([("tile", 2, 10), ("tiel", 2, 37)], configs, str(script))
    err = info.value
    assert (err.filename, err.lineno, err.col) == (str(script), 2, 37)
    assert "did you mean `$tile`?" in str(err)
    assert "$tiel" in err.render() and "^" in err.render()


def test_unknown_placeholder_of_a_computed_space_has_the_compile_time_message(tmp_path) -> None:
    # The first call checks a computed space: it said "`$Bn` is not a field of the space" and
    # listed the fields, where the same launch with a literal space said "did you mean `$BN`?".
    from tunedsl.frontend.compile import compile_source

    line = "    return autotune(space=SP, blocks=cdiv(n, $BM), k(a, BM=$BM, BN=$Bn))\n"
    text = "from tunedsl import autotune, cdiv\n\n\ndef f(a, n):\n"
    with pytest.raises(TunedslSyntaxError) as compiled:
        compile_source(text + line.replace("SP", "dict(BM=[16, 32], BN=[16])"), "k.py")
    script = tmp_path / "k.py"
    script.write_text(text + line)
    col = line.index("$Bn")
    with pytest.raises(TunedslSyntaxError) as runtime:
        check_placeholders(
            [("BM", 5, line.index("$BM")), ("Bn", 5, col)],
            expand_space({"BM": [16, 32], "BN": [16]}),
            str(script),
        )
    assert compiled.value.msg_only == "`$Bn` is not a field of `space=`"
    assert compiled.value.hint == "did you mean `$BN`?"
    assert runtime.value.msg_only == compiled.value.msg_only
    assert runtime.value.hint == compiled.value.hint
    assert (runtime.value.lineno, runtime.value.col) == (5, col)


def test_known_placeholders_pass() -> None:
    check_placeholders([("tile", 1, 0)], expand_space({"tile": [1]}), "<x>")
