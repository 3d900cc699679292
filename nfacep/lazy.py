"""Public names of a package imported on first use (PEP 562), so that importing the package
stays cheap: the command line imports ``nfacep``, ``nfacep.boards`` and ``nfacep.sim`` for
their subcommands without loading the compiler, the toolchain flow or cocotb."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(
    package: str, where: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``: a name of ``where`` imported from
    the submodule it maps to (``{"Usage": "resources"}``), any other name as a submodule
    (``boards.resources``), each kept in the package once imported; AttributeError when
    neither exists."""

    def __getattr__(name: str) -> Any:
        if name in where:
            value = getattr(importlib.import_module(f".{where[name]}", package), name)
        else:
            try:
                value = importlib.import_module(f".{name}", package)
            except ModuleNotFoundError as err:
                if err.name != f"{package}.{name}":
                    raise
                raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *where})

    return __getattr__, __dir__
