"""Where ``tunedsl rules build`` writes: ``--out``, checked before anything is built and
before any rule file is written (a directory this user can create or write; a rule of another
GPU model there is never replaced), and whether the runtime would trust it."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tunedsl.cli.cache_select import terminal_text
from tunedsl.errors import UsageError
from tunedsl.model.rule import Rule
from tunedsl.store import paths
from tunedsl.store.rules import save_rule


def keep_other_gpus_rules(plans: Sequence[Any], out: Path) -> None:
    """Refuse, before writing any, a build that would replace a rule ``out`` holds for the
    same site and kernel measured on another GPU model (another Triton is a refresh)."""
    from tunedsl.cli.rules_measure import device_of
    from tunedsl.store.rules import held_for_another_gpu, rule_path

    for plan in plans:
        gpu = device_of(plan.first.device).get("name")
        held = held_for_another_gpu(out, plan.digest, gpu)
        if held is not None:
            raise UsageError(
                terminal_text(
                    f"--out {out}: {rule_path(out, plan.digest)} is the rule for "
                    f"{plan.first.site} measured on {held.device.get('name')}; this one is "
                    f"measured on {gpu} and would replace it. Rules for several GPU models go "
                    "one directory each on TUNEDSL_RECORDS_PATH: name another --out (or "
                    "remove that file to replace it)"
                )
            )


def out_dir(text: str) -> Path:
    """``--out``, checked before anything is built: a directory, or one this user can create."""
    if not text.strip():  # Path("") is the working directory: an unset variable, not a choice
        raise UsageError("--out is empty: name the directory the rule files go to")
    out = Path(text)
    if out.exists() and not out.is_dir():
        raise UsageError(
            f"--out {out}: is a file, not a directory: name a directory (created if missing)"
        )
    if not out.exists() and out.name.lower().endswith(".json"):  # a file's name, not a dir's
        raise UsageError(
            f"--out {out}: names a file (it ends in .json), but --out is the directory the "
            "rules go into (one <digest>.rule.json per site): name a directory, e.g. "
            f"{out.parent / 'rules'}"
        )
    above = out.absolute()
    while not above.exists() and above != above.parent:
        above = above.parent
    if not above.is_dir() or not os.access(above, os.W_OK | os.X_OK):
        what = "not a directory" if not above.is_dir() else "not writable by you"
        raise UsageError(
            f"--out {out}: cannot create it or write in it ({above} is {what}): name a "
            "directory you can write"
        )
    redirected = paths.redirected_destination(out)
    if redirected is not None:
        raise UsageError(
            f"--out {out}: another user could redirect the rule files written there "
            f"({redirected}): name a directory of your own"
        )
    return out


def untrusted(root: Path) -> str | None:
    """Why the runtime would not read rules in the directory ``root`` (store/rules.py), or None."""
    try:
        os.close(paths.open_private_dir(root.absolute(), root_may_own=True))
    except paths.UntrustedDir as why:
        return str(why)
    except OSError as err:
        return f"it cannot be opened ({err.strerror or err})"
    return None


def write_rule(rule: Rule, out: Path) -> Path:
    """``save_rule``, or a ``UsageError`` where another user could now redirect ``out`` (a
    directory they made there while the build measured)."""
    try:
        return save_rule(rule, out)
    except paths.UntrustedDir as err:
        raise UsageError(
            f"--out {out}: another user could redirect the rule files written there ({err}): "
            "no rule file was written there; name a directory of your own"
        ) from None
