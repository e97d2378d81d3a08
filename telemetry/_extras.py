"""Optional parts: import a module an extra provides, or say which extra to install and how.

The package is installed from a checkout or a git URL (it is not on PyPI), so the advice is the
one command that works for every extra; it is written here once.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["INSTALL_EXTRA", "require"]

INSTALL_EXTRA = "pip install -e '/path/to/outcome-telemetry[{extra}]'"
"""How to add an extra to an install from a checkout (``pip install 'git+URL#egg=...[extra]'`` from a git URL)."""


def require(module: str, *, extra: str, needed_for: str, error: type[Exception] = ImportError,
            name: str | None = None) -> ModuleType:
    """``module`` imported, or ``error`` saying that ``needed_for`` needs it and how to install ``extra``.

    The message is one line and names what is missing as ``name`` (by default the module's top
    package, e.g. ``duckdb``) and the extra in brackets, e.g. ``[forensics]``.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing = name or module.split(".")[0]
        raise error(f"{needed_for} needs {missing}; install it with: "
                    f"{INSTALL_EXTRA.format(extra=extra)}") from exc
