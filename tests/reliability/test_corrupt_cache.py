"""Corrupt cache entries: each is a miss with exactly one CacheWarning, then rebuilt.

Bytecode entries and tuning records are damaged in every way a disk, a crash or another
tunedsl can damage them: empty, truncated, random bytes, valid JSON of the wrong shape,
a future format/schema version, another Python's bytecode magic, a flipped payload byte.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest
from rel_helpers import cache_warnings, only_cache_warnings

from tunedsl import bytecode
from tunedsl.model.config import Config
from tunedsl.store import paths, records

DSL_MODULE = """\
from tunedsl import autotune, cdiv

def launch(k, x, n):
    return autotune(space=dict(tile=[16, 32]), blocks=cdiv(n, $tile), k(x, n, T=$tile))
"""

RNG_SEED = 1234


def _bytecode_corruptions() -> dict[str, Callable[[bytes], bytes]]:
    rng = random.Random(RNG_SEED)
    header = bytecode.HEADER_SIZE

    def flip_payload(data: bytes) -> bytes:
        i = header + (len(data) - header) // 2
        return data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1 :]

    def future_format(data: bytes) -> bytes:
        tag = bytecode.FORMAT_TAG
        return tag[:-1] + bytes([tag[-1] + 1]) + data[len(tag) :]

    def other_python(data: bytes) -> bytes:
        tag = len(bytecode.FORMAT_TAG)
        magic = importlib.util.MAGIC_NUMBER
        other = (int.from_bytes(magic[:2], "little") - 50).to_bytes(2, "little") + magic[2:]
        return data[:tag] + other + data[tag + len(magic) :]

    return {
        "empty": lambda data: b"",
        "truncated_header": lambda data: data[: header // 2],
        "truncated_payload": lambda data: data[: header + (len(data) - header) // 2],
        "random_bytes": lambda data: rng.randbytes(len(data)),
        "json_wrong_shape": lambda data: json.dumps({"code": "print(1)"}).encode(),
        "future_format": future_format,
        "other_python_magic": other_python,
        "flipped_payload_byte": flip_payload,
    }


BYTECODE_CORRUPTIONS = _bytecode_corruptions()


@pytest.mark.parametrize("kind", sorted(BYTECODE_CORRUPTIONS))
def test_corrupt_bytecode_entry_is_one_warning_then_rebuilt(kind: str, tmp_path: Path) -> None:
    script = tmp_path / "kernels_dsl.py"
    script.write_text(DSL_MODULE)
    source = script.read_bytes()
    bytecode.load_or_compile(source, str(script))
    entries = list(bytecode.iter_entries())
    assert len(entries) == 1
    entry = entries[0]
    entry.write_bytes(BYTECODE_CORRUPTIONS[kind](entry.read_bytes()))

    with cache_warnings() as caught:
        code = bytecode.load_or_compile(source, str(script))
    messages = only_cache_warnings(caught)
    assert len(messages) == 1, messages
    assert str(entry) in messages[0]
    assert bytecode.stats.rejected == 1
    namespace: dict[str, object] = {}
    exec(code, namespace)  # the rebuilt code is the module's: it defines launch()
    assert callable(namespace["launch"])

    # Rebuilt: the next load is a silent hit from a valid entry.
    with cache_warnings() as caught:
        hits = bytecode.stats.hits
        bytecode.load_or_compile(source, str(script))
    assert only_cache_warnings(caught) == []
    assert bytecode.stats.hits == hits + 1


def _valid_record(digest: str) -> records.Record:
    chosen = Config(TILE=32)
    return records.Record(
        site="site.py:3:4",
        digest=digest,
        key={"n": "i"},
        chosen=chosen,
        results=(
            records.ConfigResult(chosen, "ok", 1.0, 0.05, 10, 0.9, constexprs={"TILE": 32}),
            records.ConfigResult(Config(TILE=64), "failed", reason="run: boom"),
        ),
        kernel={"module": "m", "qualname": "k", "file": "m.py", "source_hash": "0" * 8},
        signature={"n": "i32"},
        device={"type": "cpu"},
        versions={"tunedsl": "0.1.0"},
        context={},
        tuning_s=0.5,
        timestamp=1.0,
    )


def _record_corruptions() -> dict[str, Callable[[bytes], bytes]]:
    rng = random.Random(RNG_SEED)

    def reshape(change: Callable[[dict], object]) -> Callable[[bytes], bytes]:
        def apply(data: bytes) -> bytes:
            return json.dumps(change(json.loads(data))).encode()

        return apply

    def set_field(name: str, value: object) -> Callable[[dict], object]:
        def change(record: dict) -> dict:
            record[name] = value
            return record

        return change

    def set_chosen_result(name: str, value: object) -> Callable[[dict], object]:
        def change(record: dict) -> dict:
            (chosen,) = [r for r in record["results"] if r["config"] == record["chosen"]]
            chosen[name] = value
            return record

        return change

    return {
        # Values of the right type and no sense: such a record decided without a word.
        "negative_median_ms": reshape(set_chosen_result("median_ms", -1.0)),
        "nan_median_ms": reshape(set_chosen_result("median_ms", float("nan"))),
        "negative_reps": reshape(set_chosen_result("reps", -1)),
        "negative_spread": reshape(set_chosen_result("spread", -0.5)),
        "negative_min_ms": reshape(set_chosen_result("min_ms", -2.0)),
        "negative_tuning_s": reshape(set_field("tuning_s", -3.0)),
        "constexpr_of_an_object": reshape(set_chosen_result("constexprs", {"TILE": {"a": 1}})),
        "empty": lambda data: b"",
        "truncated": lambda data: data[: len(data) // 2],
        "random_bytes": lambda data: rng.randbytes(len(data)),
        "not_utf8": lambda data: b"\xff\xfe" + data,
        "json_list": lambda data: b"[1, 2, 3]",
        "json_wrong_shape": reshape(lambda r: {"chosen": r["chosen"]}),
        "results_not_a_list": reshape(set_field("results", {"a": 1})),
        "future_schema": reshape(set_field("schema", records.SCHEMA_VERSION + 1)),
        "chosen_not_a_result": reshape(set_field("chosen", {"TILE": 4096})),
        "chosen_wrong_type": reshape(set_field("chosen", {"TILE": [32]})),
        "nan_timing": lambda data: data.replace(b'"tuning_s": 0.5', b'"tuning_s": NaN'),
        # Past Python's 4300-digit limit on int(str): json.loads raises a plain ValueError.
        "int_of_5000_digits": lambda data: b'{"extra": 1' + b"0" * 5000 + b", " + data[1:],
        # Under the digit limit, but past any float: math.isfinite raised OverflowError.
        "int_past_any_float": reshape(set_field("tuning_s", 10**400)),
        # Finite, but no clock reaches it: printing its date raised OverflowError.
        "timestamp_past_year_9999": reshape(set_field("timestamp", 1e20)),
        "timestamp_before_1970": reshape(set_field("timestamp", -1e20)),
        "saved_under_another_digest": reshape(set_field("digest", "b" * 64)),
    }


RECORD_CORRUPTIONS = _record_corruptions()
#: The field the warning names, for the corruptions of a value without sense.
NAMED_FIELD = {
    "negative_median_ms": "record.results[0].median_ms",
    "nan_median_ms": "record.results[0].median_ms",
    "negative_reps": "record.results[0].reps",
    "negative_spread": "record.results[0].spread",
    "negative_min_ms": "record.results[0].min_ms",
    "negative_tuning_s": "record.tuning_s",
    "constexpr_of_an_object": "record.results[0].constexprs['TILE']",
}


@pytest.mark.parametrize("kind", sorted(RECORD_CORRUPTIONS))
def test_corrupt_record_is_a_miss_with_one_warning(kind: str) -> None:
    digest = "a" * 64
    assert records.save_record(_valid_record(digest))
    path = records.record_path(digest)
    assert records.load_record(digest) is not None
    path.write_bytes(RECORD_CORRUPTIONS[kind](path.read_bytes()))

    with cache_warnings() as caught:
        assert records.load_record(digest) is None
        assert records.load_record(digest) is None  # asked again: still one warning
    messages = only_cache_warnings(caught)
    assert len(messages) == 1, messages
    assert str(path) in messages[0]
    assert NAMED_FIELD.get(kind, "") in messages[0], messages[0]

    # Rebuilt: writing the record again (what tuning does after the miss) gives a valid one.
    assert records.save_record(_valid_record(digest))
    assert records.load_record(digest) == _valid_record(digest)


def test_missing_cache_directory_is_a_silent_miss() -> None:
    assert not paths.records_dir().exists()
    with cache_warnings() as caught:
        assert records.load_record("c" * 64) is None
        assert bytecode.lookup(b"x = 1\n", os.path.abspath("x.py")) is None
    assert only_cache_warnings(caught) == []


@pytest.mark.parametrize("kind", ["timestamp_past_year_9999", "timestamp_before_1970"])
def test_cache_ls_lists_a_record_of_an_impossible_date_as_invalid(kind: str) -> None:
    import subprocess
    import sys

    digest = "d" * 64
    assert records.save_record(_valid_record(digest))
    path = records.record_path(digest)
    path.write_bytes(RECORD_CORRUPTIONS[kind](path.read_bytes()))
    shown = {}
    for argv in (["ls"], ["gc", "--dry-run"]):
        done = subprocess.run(
            [sys.executable, "-m", "tunedsl", "cache", *argv],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert "Traceback" not in done.stderr, done.stderr
        assert done.returncode == 0, done.stderr
        shown[argv[0]] = done.stdout + done.stderr
    assert f"invalid: {path}: record.timestamp" in shown["ls"], shown["ls"]
