"""Import a Python file as a module, as a user's ``python server.py`` or a real import would."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def import_module_file(path: Path, name: str | None = None) -> ModuleType:
    """``path`` imported under ``name`` (default: the file's stem), registered in ``sys.modules``
    so that dataclasses and pickling inside it resolve. A distinct ``name`` gives a fresh module
    object even when another test imported the same file."""
    name = name or path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
