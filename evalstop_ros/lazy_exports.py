"""A package's public names loaded on first use (PEP 562): importing one submodule loads only that one."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``, whose name ``n`` is defined in its submodule
    ``exports[n]``; the submodule is imported when the name is first read, and the value kept in the package.

    >>> getattr_, dir_ = lazy_exports("json", {"JSONDecodeError": "decoder"})
    >>> getattr_("JSONDecodeError").__module__, "JSONDecodeError" in dir_()
    ('json.decoder', True)
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), name)
        setattr(sys.modules[package], name, value)  # the next read finds it without coming here
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__
