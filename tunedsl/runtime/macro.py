"""``tunedsl.autotune`` as a Python object: a macro, so calling it at run time is a mistake."""

from __future__ import annotations

from typing import Any, NoReturn

from tunedsl.errors import TunedslError


def autotune(*args: Any, **kwargs: Any) -> NoReturn:
    """Macro: ``autotune(space=..., blocks=..., kernel(args...))``.

    The tunedsl front end rewrites this call before the code runs. Reaching this function
    means the module was imported by plain Python instead of through tunedsl.
    """
    raise TunedslError(
        "autotune(...) is a tunedsl macro and this module was not expanded: run the script "
        "with `tunedsl run SCRIPT`, `import tunedsl.activate` before importing it, or call "
        "tunedsl.autotune_launch(...) for the plain-Python API"
    )
