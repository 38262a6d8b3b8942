"""``tunedsl env``: everything a bug report needs, in one paste.

Versions (tunedsl, Python, the platform, and the installed torch, triton and numpy read from
their package metadata, without importing them), the device (a GPU driver or not, and what
torch sees, asked in a subprocess so this command stays torch-free and cannot hang on a
broken driver for longer than its timeout), the cache directories, and every setting in
force: each ``TUNEDSL_*`` variable with its validated value (or the error a bad value gives)
and the Triton variables tunedsl honours.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from importlib import metadata
from typing import Any

from tunedsl.backends.python_child import python_argv

_DEVICE_PROBE = """
import json, torch
out = {"cuda_available": torch.cuda.is_available(), "torch_cuda": torch.version.cuda,
       "hip": torch.version.hip}
if out["cuda_available"]:
    out["devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    out["capability"] = list(torch.cuda.get_device_capability(0))
print(json.dumps(out))
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "env",
        help="print versions, device, cache directories and settings (for bug reports)",
        description=(
            "Print the versions of tunedsl, Python, torch, triton and numpy, the device, the "
            "cache directories and every setting in force; paste it into a bug report."
        ),
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    parser.add_argument(
        "--no-device-probe",
        action="store_true",
        help="do not start a subprocess that imports torch to describe the device",
    )
    return parser


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _device(probe: bool) -> dict[str, Any]:
    from tunedsl.autointerp import gpu_driver_present

    out: dict[str, Any] = {"gpu_driver": gpu_driver_present()}
    if not probe or _version("torch") == "not installed":
        return out
    try:
        proc = subprocess.run(
            python_argv(_DEVICE_PROBE),  # no import from the working directory
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=120,
            text=True,
        )
        out.update(json.loads(proc.stdout.strip().splitlines()[-1]))
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        out["torch_probe"] = "failed"
    return out


def _settings() -> dict[str, str]:
    from tunedsl import knobs
    from tunedsl.environ import unknown_settings
    from tunedsl.errors import UsageError

    out: dict[str, str] = {}
    for name, read in knobs.SETTINGS.items():
        raw = os.environ.get(name)
        if raw is not None and name == "TUNEDSL_REDIS_URL":
            raw = knobs.redact_url(raw)  # as set, less its password
        try:
            value: object = read()
        except UsageError as err:
            out[name] = f"{raw!r}: INVALID: {err}"
            continue
        out[name] = f"{value!r}" + ("" if raw is None else f"  (set: {raw!r})")
    for name, meant in unknown_settings(knobs.SETTINGS):
        near = f": did you mean {meant}?" if meant else ""
        out[name] = f"{os.environ[name]!r}: not a tunedsl setting, changes nothing{near}"
    for name in knobs.TRITON_SETTINGS:
        out[name] = repr(os.environ.get(name)) if name in os.environ else "unset"
    return out


def collect(probe: bool = True) -> dict[str, Any]:
    from tunedsl import __version__
    from tunedsl.runtime import native
    from tunedsl.store import paths

    return {
        "versions": {
            "tunedsl": __version__,
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "torch": _version("torch"),
            "triton": _version("triton"),
            "numpy": _version("numpy"),
        },
        "device": _device(probe),
        "cache": {
            "root": str(paths.cache_root()),
            "records": str(paths.records_dir()),
            "bytecode": str(paths.bytecode_dir()),
            "triton": os.environ.get("TRITON_CACHE_DIR")
            or os.path.join(os.path.expanduser("~"), ".triton", "cache"),
        },
        "settings": _settings(),
        "hot path": {"fused launch": native.status()},
    }


def main(args: argparse.Namespace) -> int:
    info = collect(probe=not args.no_device_probe)
    if args.json:
        print(json.dumps(info, indent=2, sort_keys=False))
        return 0
    for section, values in info.items():
        print(f"{section}:")
        width = max(len(k) for k in values)
        for key, value in values.items():
            print(f"  {key:<{width}}  {value}")
    return 0
