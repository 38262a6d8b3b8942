"""The user's tuning hooks (backends layer): what ``pre_hook``/``post_hook`` receive, and
how ``pre_hook`` is called (docs/runtime.md, "The hook rule").

The in-process measurer (``inprocess.py``), the isolated worker and the verify-only path of
the tuner share these, so a hook sees the same arguments wherever it runs.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping
from typing import Any

from tunedsl.errors import UsageError
from tunedsl.model.variant import Variant


def call_pre_hook(hook: Callable[..., Any], args: Mapping[str, Any]) -> None:
    """Run the user's ``pre_hook``. Its error is the caller's, not the configuration's: it
    stops the tuning (as in ``triton.autotune``) instead of dropping the configuration."""
    try:
        hook(dict(args))
    except UsageError:
        raise
    except Exception as err:
        frame = traceback.extract_tb(err.__traceback__)[-1]
        first = next((line for line in str(err).splitlines() if line.strip()), "")
        raise UsageError(
            f"pre_hook= raised {type(err).__name__}: {first[:300]} (at {frame.filename}:"
            f"{frame.lineno}); a hook's error stops the tuning, it does not drop the "
            "configuration: fix the hook"
        ) from err


def hook_args(info: Any, v: Variant, hints: Mapping[str, Any]) -> dict[str, Any]:
    """What ``pre_hook``/``post_hook`` receive for ``v``: its arguments by parameter name
    and its launch options (``num_warps``, ...), as Triton's hooks see them. ``hints`` are
    the site's static hints."""
    from tunedsl.backends import triton as bt
    from tunedsl.model.hints import hint_fields

    bound = bt.bind_arguments(info, v.args, v.kwargs)
    # The interpreter launches without options; its hooks see the hints all the same, so a
    # hook reading args["num_warps"] runs on the CPU as on a GPU.
    options = v.options or hint_fields(v.config, hints)
    return {**{k: x for k, x in options.items() if k not in bound}, **bound}
