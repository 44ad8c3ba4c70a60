"""CRC-32C (Castagnoli), the checksum of record batches v2, from the crc32c package's C extension.

The package's `__init__` imports importlib.metadata to set `__version__` (and its command-line
module), which is about 60 ms of a broker's 0.4 s start on this machine; the checksum itself is
one C function. So the extension module is loaded from the installed package's directory without
running the package `__init__`; if the package's layout is not the expected one, the package is
imported the ordinary way. Either way the function is the library's own.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["crc32c"]


def _extension() -> Any:
    spec = importlib.util.find_spec("crc32c")  # locates the package without importing it
    if spec is not None and spec.submodule_search_locations:
        for path in Path(next(iter(spec.submodule_search_locations))).glob("_crc32c.*.so"):
            loader = importlib.machinery.ExtensionFileLoader("crc32c._crc32c", str(path))
            module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))  # type: ignore[arg-type]
            loader.exec_module(module)
            return module
    import crc32c as package

    return package


crc32c: Callable[[Any], int] = _extension().crc32c
"""crc32c(data) -> int: the CRC-32C of a bytes-like object (hardware-accelerated where available)."""
