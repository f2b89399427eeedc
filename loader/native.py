"""The optional compiled parts of the hot path (loader/_native.c), and the switch for them.

``pip install`` builds ``loader._native`` when a C compiler is there (setup.py); without one,
every caller uses its numpy / pyarrow path, which gives the same result (the tests hold the two
equal). ``SPANNER_LOADER_NATIVE=0`` turns the compiled parts off where they are built, e.g. to
compare the two (benchmarks/micro.py).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Optional

import pyarrow as pa
import pyarrow.compute as pc

_module: Any
try:
    from . import _native as _module
except ImportError:  # pragma: no cover - built on every machine the tests run on
    _module = None
if sys.byteorder != "little":  # pragma: no cover - _native.c does not build there either
    _module = None

#: Set to ``0`` to use the numpy / pyarrow paths even where the extension is built.
NATIVE_ENV = "SPANNER_LOADER_NATIVE"


def built() -> bool:
    """Whether the extension was built and imports."""
    return _module is not None


def available() -> bool:
    """Whether the compiled parts are built and not switched off (``NATIVE_ENV=0``)."""
    return _module is not None and os.environ.get(NATIVE_ENV, "1") != "0"


def module() -> Any:
    """The extension module; RuntimeError when it is not built."""
    if _module is None:
        raise RuntimeError("the compiled encoder (loader._native) is not built")
    return _module


def use(flag: Optional[bool]) -> bool:
    """A caller's choice: True / False as given (True needs the extension), None: available()."""
    if flag is None:
        return available()
    if flag:
        module()
    return flag


def status() -> str:
    """The compiled parts in a few words, for ``--version`` and the load report."""
    if _module is None:
        return "not built (the numpy paths run, at about half the speed; README, Dependencies)"
    if not available():
        return f"built, switched off by {NATIVE_ENV}=0"
    abi = "abi3" if _module.LIMITED_API else "full C API"
    return f"in use ({os.path.basename(str(_module.__file__))}, {abi})"


_SPREAD: ContextVar[bool] = ContextVar("spread", default=False)


def threads() -> int:
    """How many threads a compiled kernel may split one call over: 1, but within
    :func:`spread` the size of Arrow's CPU pool (``pyarrow.cpu_count()``, which follows the
    process's CPU affinity, so a load under ``taskset -c 0`` gets 1, and
    ``pyarrow.set_cpu_count``)."""
    return max(1, pa.cpu_count()) if _SPREAD.get() else 1


@contextmanager
def spread() -> Iterator[None]:
    """Let the compiled kernels this thread calls in the block split their work over
    :func:`threads`: for work the rest of the load waits on (a table's flush: its last, once
    the reading is done, and each one before it, which the stage threads, each a block ahead,
    soon wait for)."""
    token = _SPREAD.set(True)
    try:
        yield
    finally:
        _SPREAD.reset(token)


def kind(name: str) -> int:
    """loader/_native.c's column kind called ``name`` (its KINDS table: CELLS, STRING, INT64,
    FLOAT64, FLOAT32, BOOL, NUMERIC, DATE, BYTES)."""
    return int(module().KINDS[name])


def string_descriptor(arr: pa.Array) -> tuple[Any, ...]:
    """The descriptor loader/_native.c reads a string (int32 offsets) column from."""
    buffers = arr.buffers()
    validity = buffers[0] if arr.null_count else None
    return (kind("STRING"), validity, buffers[2], buffers[1], arr.offset, 4)


def same_validity(arr: pa.Array) -> Optional[pa.Buffer]:
    """A validity bitmap at offset 0 for a result with ``arr``'s NULLs (None: no NULLs)."""
    return pc.is_valid(arr).buffers()[1] if arr.null_count else None
