"""Rule files: ``<digest>.rule.json`` beside records, in ``TUNEDSL_RECORDS_PATH`` directories.

A rule (``model/rule.py``) is named by what it decides for: the site, the kernel's source
and the site's static hints and Triton environment, so a rule never decides for an edited
kernel. The GPU model and toolchain it was measured on are inside the file: a rule from
another GPU model or Triton version is *stale* (the runtime says what it does with one).

Rule files get the records' trust rules: the directory is private to the user or owned by
root and closed to writes by others; the file is a regular file (no symbolic link), owned by
the user or root, not writable by group or others, at most 4 MiB. Anything else, and any
file that does not validate, is a miss with one warning. Each process reads a rule file
once, and again only when its stat signature changes (``find_rules``).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from tunedsl import knobs
from tunedsl.model.keys import canonical_json
from tunedsl.model.rule import InvalidRule, Rule
from tunedsl.store import atomic, paths
from tunedsl.store import records as rec
from tunedsl.warn import warn_once

SUFFIX = rec.RULE_SUFFIX
MAX_RULE_BYTES = 4 * 1024 * 1024

_lock = threading.Lock()
# digest -> (the rule directories, the stat signature their rules were read under, the paths
# it is of, the rules found, in path order)
_loaded: dict[str, tuple[tuple[str, ...], tuple[Any, ...], tuple[str, ...], tuple[Rule, ...]]] = {}


def rule_digest(site: str, kernel: Mapping[str, Any], hints: Any, env: Any) -> str:
    """What a rule decides for: the site, the kernel's qualname and source hash (and the
    site's per-configuration launch text, where it has one), the static hints and the Triton
    environment (the record digest's context less device and toolchain)."""
    launched = {"qualname": kernel.get("qualname"), "source_hash": kernel.get("source_hash")}
    if kernel.get("launch") is not None:  # a rule of a site without one keeps its name
        launched["launch"] = kernel["launch"]
    named = {
        "site": site,
        "kernel": launched,
        "hints": hints,
        "env": env,
    }
    return hashlib.sha256(canonical_json(named).encode("utf-8")).hexdigest()


def digest_of(rule: Rule) -> str:
    return rule_digest(rule.site, rule.kernel, rule.hints, rule.env)


def rule_path(root: Path, digest: str) -> Path:
    return root / f"{digest}{SUFFIX}"


def save_rule(rule: Rule, root: Path) -> Path:
    """Write ``rule`` into ``root`` (created private), whole or not at all. ``root`` is
    judged again as it is now: a directory another user made or linked there since the
    command checked it (a build measures for minutes) raises ``UntrustedDir``, naming it."""
    paths.make_dirs(root)
    why = paths.redirected_destination(root)
    if why is not None:
        raise paths.UntrustedDir(why)
    path = rule_path(root, digest_of(rule))
    atomic.write_json(path, rule.to_json())
    return path


def held_for_another_gpu(root: Path, digest: str, gpu: Any) -> Rule | None:
    """The valid rule ``root`` holds under ``digest`` when it was measured on another GPU
    model than ``gpu`` (a rule built here would replace it: rules for several GPU models go
    one directory each), else None (none there, a damaged one, or one of this GPU model)."""
    try:
        rule = read_rule_file(rule_path(root, digest))
    except (OSError, InvalidRule, rec.InvalidRecord):
        return None
    return rule if rule.device.get("name") != gpu else None


def read_rule_file(path: Path) -> Rule:
    """One rule file; raise InvalidRule (bad content) or OSError (unreadable, a link, not a
    regular file, too large, writable by others, another owner)."""
    data = rec.parse_json(atomic.read_regular_file(path, MAX_RULE_BYTES, private=True))
    try:
        return Rule.from_json(data)
    except InvalidRule:
        raise
    except Exception as err:  # a file may hold anything: whatever its check missed is damage
        raise InvalidRule(f"damaged rule ({type(err).__name__}: {err})") from None


def rule_dirs() -> list[Path]:
    """Where rules are found: the ``TUNEDSL_RECORDS_PATH`` directories, in order, the
    cache's own records directory included where the path names it (records leave it out,
    as they read it first already: rules have no other place to be read from)."""
    return [Path(p).expanduser() for p in knobs.records_path()]


def find_rules(digest: str) -> tuple[Rule, ...]:
    """The rules named ``digest``, one a directory that has a trusted, valid one, in path
    order (the caller takes the first measured here: directories of rules for several GPU
    models may share a path). A process parses and checks each rule file once: later misses
    compare the file's stat signature (one ``lstat`` a directory) and read it again only
    when it changed (a rule rebuilt, replaced, removed, or its mode or owner changed). A
    directory found untrusted is watched too, so that fixing it is seen; a trusted one is
    not: what was read from it stays what its owner wrote until the file itself changes, and
    any change to the file (a new file in its place included) reads it again, under the
    directory's check."""
    roots, wheres = _rule_roots()
    cached = _loaded.get(digest)  # one dict read: atomic, no lock needed
    if cached is not None and cached[0] == wheres and cached[1] == tuple(map(_stat, cached[2])):
        return cached[3]
    name = os.sep + digest + SUFFIX
    signature = [(_stat(where), _stat(where + name)) for where in wheres]
    found: list[Rule] = []
    # What later misses compare (taken before the files are read: a change meanwhile reads
    # them again): each file, and each directory found untrusted.
    watched: dict[str, _Stat] = {}
    for root, where, (dir_sig, file_sig) in zip(roots, wheres, signature, strict=True):
        watched[where + name] = file_sig
        if file_sig is None or dir_sig is None:
            continue
        if not rec.trusted_dir(root):
            watched[where] = dir_sig
            continue
        path = rule_path(root, digest)
        try:
            rule = read_rule_file(path)
        except (OSError, InvalidRule, rec.InvalidRecord) as err:
            # Once per problem, not per file: a file fixed, then damaged anew, says so again.
            # At the user's site (its line, not tunedsl's): their warning filters apply.
            warn_once(f"bad-rule:{path}:{err}", f"ignoring rule {path}: {err}", stacklevel="user")
            continue
        if digest_of(rule) != digest:
            warn_once(
                f"bad-rule:{path}",
                f"ignoring rule {path}: it names another site",
                stacklevel="user",
            )
            continue
        found.append(rule)
    rules = tuple(found)
    with _lock:
        _loaded[digest] = (wheres, tuple(watched.values()), tuple(watched), rules)
    return rules


def unchanged_check(digest: str, rules: tuple[Rule, ...]) -> Callable[[], bool]:
    """A function that says whether ``find_rules(digest)`` still answers ``rules``, for a
    caller that knows the environment (which names the rule directories) unchanged since
    that answer: it is the one kept, and what it watches (each file, each directory found
    untrusted) has the stat signature it had (the same ``lstat``s as ``find_rules``).
    False: ask ``find_rules``. Made once for many misses: each asks one dict read and the
    ``lstat``s."""
    kept = _loaded.get(digest)  # one dict read: atomic, no lock needed
    if kept is None or kept[3] is not rules:
        return _never
    # A file read again is a new entry (and ``forget_loaded`` drops it): the entry's own
    # identity says that ``rules`` is still the answer.
    loaded, signature, watched, lstat = _loaded, kept[1], kept[2], os.lstat
    if len(watched) == 1:  # one rule directory: its file
        (path,), (was,) = watched, signature

        def unchanged() -> bool:  # (_stat, without its call)
            if loaded.get(digest) is not kept:
                return False
            try:
                st = lstat(path)
            except OSError:
                return was is None
            return was == (st.st_dev, st.st_ino, st.st_mode, st.st_uid, st.st_size,  # _stat's
                           st.st_mtime_ns, st.st_ctime_ns)  # fmt: skip

        return unchanged

    def all_unchanged() -> bool:
        return loaded.get(digest) is kept and tuple(map(_stat, watched)) == signature

    return all_unchanged


def _never() -> bool:
    return False


# The rule directories' signature, and the rule files in them by site (one scan of the
# path for every site: asked on a miss that no rule decides, for each site once).
_by_site: tuple[tuple[Any, ...], dict[str, list[tuple[Path, Rule]]]] | None = None


def rules_of_other_kernels(site: str, digest: str) -> list[tuple[Path, Rule]]:
    """The trusted, valid rule files on the path for ``site`` under another name than
    ``digest``, with their rules: built for the site's kernel before its source, launch text,
    static hints or Triton environment changed, so never used for it now."""
    return [(p, r) for p, r in _site_index().get(site, ()) if p.name != digest + SUFFIX]


def rules_of_renamed_sites(site: str, kernel: Mapping[str, Any]) -> list[tuple[Path, Rule]]:
    """The trusted, valid rule files on the path for a site in a file of another name whose
    function, kernel (its source) and launch are ``site``'s: its file renamed since the
    sweep. A site's identity holds its file's name, so they decide nothing for it."""

    def made_by(item: tuple[Path, Rule]) -> tuple[Any, Any]:
        return item[1].kernel.get("source_hash"), item[1].kernel.get("launch")

    return [item for _, item in rec.renamed_sites(site, kernel, _site_index(), made_by)]


def _site_index() -> dict[str, list[tuple[Path, Rule]]]:
    """Every trusted, valid rule file on the path by its site, read again when a directory
    of the path changes."""
    global _by_site
    roots, wheres = _rule_roots()
    signature = tuple(map(_stat, wheres))  # a directory's mtime moves when a file comes or goes
    index = _by_site
    if index is None or index[0] != signature:
        found: dict[str, list[tuple[Path, Rule]]] = {}
        for root in roots:
            if not root.is_dir() or not rec.trusted_dir(root):
                continue
            for path in iter_rule_files([root]):
                try:
                    rule = read_rule_file(path)
                    found.setdefault(rule.site, []).append((path, rule))
                except (OSError, InvalidRule, rec.InvalidRecord):
                    continue  # find_rules warns about a damaged rule it is asked for
        index = _by_site = (signature, found)
    return index[1]


def what_changed(rule: Rule, kernel: Mapping[str, Any], hints: Any, env: Any) -> str:
    """What of ``kernel``, ``hints`` and ``env`` (a site's now) differs from what ``rule`` was
    built for, for a message: each part named, the launch's items (``key=t``, ``blocks=...``)
    that differ shown then and now, control characters escaped (the file's text)."""
    parts = []
    if rule.kernel.get("qualname") != kernel.get("qualname"):
        parts.append("the kernel's name")
    parts += kernel_changes(rule.kernel, kernel, "the rule was built")
    if rule.hints != hints:
        parts.append("the static hints")
    if rule.env != env:
        old_env = rule.env if isinstance(rule.env, dict) else {}
        new_env = env if isinstance(env, dict) else {}
        names = sorted(k for k in {*old_env, *new_env} if old_env.get(k) != new_env.get(k))
        parts.append(f"Triton's environment ({', '.join(map(str, names))})")
    return ", ".join(parts).translate(_CONTROL)


def kernel_changes(then: Mapping[str, Any], now: Mapping[str, Any], when: str) -> list[str]:
    """What of a kernel's source hash and launch text differs between ``then`` (when
    ``when``: "the rule was built") and ``now``, each part named for a message."""
    parts = []
    if then.get("source_hash") != now.get("source_hash"):
        parts.append("the kernel's source or a function or value it reads")
    was_text, now_text = then.get("launch"), now.get("launch")
    if was_text != now_text:
        was, is_ = str(was_text or "").split("; "), str(now_text or "").split("; ")
        gone = "; ".join(p for p in was if p not in is_) or "nothing"
        came = "; ".join(p for p in is_ if p not in was) or "nothing"
        parts.append(f"the launch (`{gone}` when {when}, `{came}` now)")
    return parts


def measured_text(device: Any, toolchain: Any) -> str:
    """Where a rule was measured (or this process runs), for a message: ``NVIDIA H200 with
    triton 3.9.0, backend ...``, control characters escaped (the file's text)."""
    return f"{str(device).translate(_CONTROL)} with {toolchain_text(toolchain)}"


def toolchain_text(toolchain: Any) -> str:
    """A keyed toolchain (a rule's, or this process's) for a message: ``triton 3.9.0,
    interpreter`` (or ``backend`` and the start of its hash on a GPU), control characters
    escaped (the file's text)."""
    if not isinstance(toolchain, Mapping):
        return str(toolchain).translate(_CONTROL)
    parts = [f"triton {toolchain['triton']}"] if toolchain.get("triton") is not None else []
    backend = toolchain.get("triton_backend")
    if backend is not None:
        parts.append("interpreter" if backend == "interpreter" else f"backend {str(backend)[:12]}")
    skip = ("triton", "triton_backend", "record_schema")
    parts += [f"{k} {v}" for k, v in sorted(toolchain.items()) if k not in skip and v is not None]
    return ", ".join(map(str, parts)).translate(_CONTROL) or "no toolchain"


_CONTROL = {i: f"\\x{i:02x}" for i in (*range(32), *range(127, 160))}


_Stat = tuple[int, ...] | None


def _stat(path: str) -> _Stat:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    # ctime moves on every write, chmod and chown: a file made writable by others is seen.
    return (st.st_dev, st.st_ino, st.st_mode, st.st_uid, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@knobs.per_environ  # asked on every miss a rule may decide
def _rule_roots() -> tuple[list[Path], tuple[str, ...]]:
    """The rule directories, and their paths as text (for the signature's ``lstat``s): what
    a rule's trust and content depend on in each is its directory and its file."""
    roots = rule_dirs()
    return roots, tuple(os.fspath(root) for root in roots)


# Sweeps measure on purpose (a sweep's task, `precompile --tune`): within, a miss is tuned
# and no rule decides it (a rule answering for the shapes a sweep is there to measure would
# leave the sweep, and the rule built again from it, without them). The context's (thread's)
# that measures only: the process's other threads keep their rules.
_measuring: ContextVar[bool] = ContextVar("tunedsl_measuring", default=False)


@contextmanager
def measuring() -> Iterator[None]:
    """Within (this context, its thread, only), rules decide nothing: every miss is tuned."""
    token = _measuring.set(True)
    try:
        yield
    finally:
        _measuring.reset(token)


def rules_decide() -> bool:
    """Whether a rule may decide a miss now (outside :func:`measuring`, in this context)."""
    return not _measuring.get()


def forget_loaded() -> None:
    """Read rule files again on the next miss (tests, and `tunedsl rules` commands)."""
    global _by_site
    with _lock:
        _loaded.clear()
        _by_site = None


def iter_rule_files(roots: list[Path]) -> list[Path]:
    out: list[Path] = []
    for root in roots:
        if root.is_file() and root.name.endswith(SUFFIX):
            out.append(root)
        elif root.is_dir():
            out += sorted(p for p in root.iterdir() if p.name.endswith(SUFFIX))
    return out
