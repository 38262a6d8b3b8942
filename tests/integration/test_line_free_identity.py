"""A compiled kernel's identity (the ``source_hash`` of its records) leaves out the lines its
functions start on, while the code Triton compiles still follows Triton's own hash: lines
added above a kernel, or above a Triton function it calls, keep its records; an edit of
either, or of a ``tl.constexpr`` global one reads, is another kernel. Each hash is worked out
in a real process of its own, with Triton's compiler (not its interpreter), from real files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

HELPERS = """\
import triton
import triton.language as tl


@triton.jit
def twice(x):
    return x * 2
"""

KERNEL = """\
# ABOVE
import triton
import triton.language as tl

from lf_helpers import twice

LIMIT = tl.constexpr(64)


@triton.jit
def local(x):
    return x + 1


@triton.jit
def scale(dst, src, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK <= LIMIT)
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + i, local(twice(tl.load(src + i, mask=i < n))), mask=i < n)
# BELOW


if __name__ == "__main__":
    import json

    from tunedsl.backends import kernel_source
    from tunedsl.backends import triton as bt

    info = bt.kernel_info(scale)
    bound = getattr(kernel_source, "line_bound_source_hash", None)  # (absent before)
    line_bound = bound and bound(scale, info.constexpr_names, info.defaults)
    print(json.dumps([info.source_hash, line_bound, scale.cache_key]))
"""


def _hashes(where: Path, kernel: str = KERNEL, helpers: str = HELPERS) -> list[str]:
    """(source hash, the line-bound source hash, Triton's hash) of ``scale`` as written."""
    where.mkdir()
    (where / "lf_helpers.py").write_text(helpers, encoding="utf-8")
    (where / "lf_kernel.py").write_text(kernel, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # Triton's own hash
    done = subprocess.run(
        [sys.executable, "lf_kernel.py"], env=env, cwd=where, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    hashes: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return hashes


def test_lines_added_above_a_compiled_kernel_keep_its_records_identity(tmp_path: Path) -> None:
    """On a GPU a kernel's records were keyed by Triton's hash, which covers the line each
    function starts on: an import added above the kernel (or above a helper it calls, in
    another file) gave every key a new digest and tuned it again, for the same code."""
    first, first_lines, first_triton = _hashes(tmp_path / "first")
    above = KERNEL.replace("# ABOVE", "# ABOVE\nimport os\nimport sys\n\n")
    helper_moved = "# a comment\n\n\n" + HELPERS
    moved = _hashes(tmp_path / "moved", above, helper_moved)
    assert moved[0] == first  # the records' identity holds
    assert moved[2] != first_triton  # the compiled code still follows Triton's hash
    # The records stored before the lines were left out held the line-bound form, found
    # again where the kernel is where it was.
    assert first_lines == first_triton and moved[1] == moved[2]
    below = _hashes(tmp_path / "below", KERNEL.replace("# BELOW", "# BELOW\n# more\n\n"))
    assert below[0] == first and below[2] == first_triton


@pytest.mark.parametrize(
    "edit",
    [
        ("kernel", "i = tl.program_id(0) * BLOCK", "i = (tl.program_id(0) + 0) * BLOCK"),
        ("local helper", "return x + 1", "return x + 2"),
        ("constexpr global", "LIMIT = tl.constexpr(64)", "LIMIT = tl.constexpr(32)"),
        ("helper in another file", "return x * 2", "return x * 3"),
    ],
    ids=lambda e: e[0],
)
def test_an_edited_compiled_kernel_is_another_kernel_without_lines_too(
    tmp_path: Path, edit: tuple[str, str, str]
) -> None:
    """Leaving the lines out leaves everything else of Triton's hash in: the kernel's text,
    each Triton function it calls (in its file or another), the constexpr globals read."""
    _, old, new = edit
    first = _hashes(tmp_path / "first")[0]
    kernel, helpers = KERNEL.replace(old, new), HELPERS.replace(old, new)
    assert (kernel, helpers) != (KERNEL, HELPERS)
    assert _hashes(tmp_path / "edited", kernel, helpers)[0] != first


MIGRATE = """\
import json
import time

from lf_kernel import scale
from tunedsl.backends import kernel_source
from tunedsl.backends import triton as bt
from tunedsl.model.config import Config
from tunedsl.model.key_digest import KeyDigest
from tunedsl.model.record import ConfigResult, Record
from tunedsl.model.settings import Settings
from tunedsl.precompile import replay
from tunedsl.runtime import decide, legacy_records
from tunedsl.runtime.subject import Subject
from tunedsl.store import records as store

info = bt.kernel_info(scale)
site, readable = "lf_kernel.py:<module>:scale", {"args": {"n": "i"}}
context = decide.context(info, Settings())
subject = Subject(site, scale, info, Settings(), readable, context, KeyDigest(site, context)(readable))
# The record as tunedsl stored it before: under Triton's own hash, lines included.
old_hash = kernel_source.line_bound_source_hash(scale, info.constexpr_names, info.defaults)
old_context = {**context, "kernel": {**context["kernel"], "source_hash": old_hash}}
old_digest = KeyDigest(site, old_context)(readable)
chosen = Config(BLOCK=64)
ok = ConfigResult(chosen, "ok", median_ms=1.0, spread=0.0, reps=3, min_ms=1.0)
old = Record(
    site=site, digest=old_digest, key=readable, chosen=chosen, results=(ok,),
    kernel={**old_context["kernel"], "module": "lf_kernel"}, signature={},
    device=dict(context["device"]), versions=dict(bt.toolchain()),
    context={"hints": context["hints"], "env": context["env"]}, tuning_s=1.0,
    timestamp=time.time(),
)
store.save_record(old)
replayable = replay._stale_reason(scale, old) is None  # precompile --replay compiles it
found = legacy_records.migrate(subject, decide.record_stores())
now = store.load_record(subject.digest)
print(json.dumps({
    "replayable": replayable,
    "found": found is not None and found.chosen == chosen,
    "moved": now is not None and now.kernel["source_hash"] == info.source_hash,
    "old_gone": store.load_record(old_digest) is None,
    "differs": old_digest != subject.digest,
}))
"""


def test_a_record_stored_under_the_line_bound_hash_is_found_and_moved(tmp_path: Path) -> None:
    """Every record tunedsl tuned on a GPU before was keyed by Triton's hash, lines
    included: for the kernel where it was tuned (the same lines) it is the same kernel's, so
    it decides the key and is stored again under the line-free digest, the old file gone;
    ``precompile --replay`` takes it for the kernel as it is (not "its source changed")."""
    where = tmp_path / "project"
    where.mkdir()
    (where / "lf_helpers.py").write_text(HELPERS, encoding="utf-8")
    (where / "lf_kernel.py").write_text(KERNEL, encoding="utf-8")
    (where / "lf_migrate.py").write_text(MIGRATE, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TUNEDSL_CACHE_DIR"] = str(tmp_path / "cache")
    done = subprocess.run(
        [sys.executable, "lf_migrate.py"], env=env, cwd=where, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "replayable": True, "found": True, "moved": True, "old_gone": True, "differs": True
    }  # fmt: skip


RULE = """\
import json
import os
import warnings
from pathlib import Path

from lf_kernel import scale
from tunedsl.backends import kernel_source
from tunedsl.backends import triton as bt
from tunedsl.model.config import Config
from tunedsl.model.key_digest import KeyDigest
from tunedsl.model.rule import Family, Rule
from tunedsl.model.rule_features import key_features, ranged
from tunedsl.model.settings import Settings
from tunedsl.runtime import decide, ruled
from tunedsl.runtime.subject import Subject
from tunedsl.store import rules

info = bt.kernel_info(scale)
tensor = {"dtype": "float32", "shape": [4096], "stride": "1"}
site, readable = "lf_kernel.py:<module>:scale", {"args": {"dst": tensor, "src": tensor, "n": "i16"}}
context = decide.context(info, Settings())
subject = Subject(site, scale, info, Settings(), readable, context, KeyDigest(site, context)(readable))
# A rule built (as `tunedsl rules build` did) from records keyed by Triton's own hash.
old_hash = kernel_source.line_bound_source_hash(scale, info.constexpr_names, info.defaults)
family, x = key_features(readable)
picks = (Config(BLOCK=128), Config(BLOCK=64))
rules.save_rule(Rule(
    site=site, kernel={**context["kernel"], "source_hash": old_hash}, hints=context["hints"],
    env=context["env"], device=dict(context["device"]), toolchain=dict(context["toolchain"]),
    configs=picks, families=(Family(family, {f: (v, v) for f, v in x.items() if ranged(f)},
    None, ((x, 0),)),), validation={},
), Path(os.environ["TUNEDSL_RECORDS_PATH"]))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    pick = ruled.rule_pick(subject, picks, None, tuning_allowed=False)
print(json.dumps({"pick": str(pick), "warnings": [str(w.message) for w in caught]}))
"""


def test_a_rule_built_from_line_bound_records_still_decides_its_kernel(tmp_path: Path) -> None:
    """A rule built from records keyed by Triton's own hash (every rule built on a GPU
    before) names the kernel where it started on the same lines: it still decides the
    site's keys, where it was refused as "built for another version of its kernel" (and
    `rules build` from the same records built it so again)."""
    where = tmp_path / "project"
    where.mkdir()
    (where / "lf_helpers.py").write_text(HELPERS, encoding="utf-8")
    (where / "lf_kernel.py").write_text(KERNEL, encoding="utf-8")
    (where / "lf_rule.py").write_text(RULE, encoding="utf-8")
    shipped = tmp_path / "shipped"
    shipped.mkdir(mode=0o755)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TUNEDSL_CACHE_DIR"] = str(tmp_path / "cache")
    env["TUNEDSL_RECORDS_PATH"] = str(shipped)
    done = subprocess.run(
        [sys.executable, "lf_rule.py"], env=env, cwd=where, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "pick": "Config(BLOCK=128)", "warnings": []
    }  # fmt: skip


REDEFINED = """\
import json

import lf_kernel
import triton
from tunedsl.backends import triton as bt

first = bt.kernel_info(lf_kernel.scale).source_hash
launched = lf_kernel.scale.cache_key
with open("lf_cell.py", "w") as fh:
    fh.write("import triton\\n\\n\\n@triton.jit\\ndef local(x):\\n    return x + 5\\n")
import lf_cell

lf_kernel.local = lf_cell.local  # a notebook cell redefining the helper
print(json.dumps({
    "changed": bt.kernel_info_changed(lf_kernel.scale),
    "triton_changed": lf_kernel.scale.cache_key != launched,
}))
"""


def test_a_helper_redefined_in_the_process_changes_the_identity_as_it_does_tritons(
    tmp_path: Path,
) -> None:
    """Triton works a kernel's hash out once and compiles, and launches, under it: a helper
    redefined later in the process (a notebook cell) leaves the kernel's code as Triton
    compiles it. The records' identity follows the same moment, never naming code that is
    not what is launched."""
    where = tmp_path / "project"
    where.mkdir()
    (where / "lf_helpers.py").write_text(HELPERS, encoding="utf-8")
    (where / "lf_kernel.py").write_text(KERNEL, encoding="utf-8")
    (where / "lf_redefined.py").write_text(REDEFINED, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run(
        [sys.executable, "lf_redefined.py"], env=env, cwd=where, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["changed"] == seen["triton_changed"]
