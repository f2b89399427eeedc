# Types of the compiled module loader/_native.c (see its header comment for each function).
from typing import Any, Callable, Optional, Sequence

KINDS: dict[str, int]
LIMITED_API: int
INT128: int

_Allocate = Callable[[int], Any]

def encode_rows(
    columns: Sequence[tuple[Any, ...]], n: int, tag: int, allocate: _Allocate
) -> tuple[Any, Any, int]: ...
def sort_int64_keys(
    keys: Sequence[tuple[Any, int, int]], n: int, allocate: _Allocate
) -> tuple[Any, bool]: ...
def encode_keys(
    columns: Sequence[tuple[Any, ...]], flags: bytes, n: int, allocate: _Allocate
) -> tuple[Any, Any, int]: ...
def sort_binary(column: tuple[Any, ...], n: int, allocate: _Allocate) -> tuple[Any, bool]: ...
def plain_int64s(column: tuple[Any, ...], n: int, allocate: _Allocate) -> Optional[Any]: ...
def plain_dates(column: tuple[Any, ...], n: int, allocate: _Allocate) -> Optional[Any]: ...
def plain_numerics(column: tuple[Any, ...], n: int, allocate: _Allocate) -> Optional[Any]: ...
def zulu_timestamps(
    column: tuple[Any, ...], n: int, allocate: _Allocate
) -> Optional[tuple[Any, Any]]: ...
def base64_values(
    column: tuple[Any, ...], n: int, allocate: _Allocate
) -> Optional[tuple[Any, Any]]: ...
def offset_timestamps(
    column: tuple[Any, ...], n: int, allocate: _Allocate, naive_ok: bool
) -> Optional[tuple[Any, Any]]: ...
def list_cells(
    element: tuple[Any, ...], m: int, offsets: Any, validity: Any, n: int, allocate: _Allocate
) -> tuple[Any, Any, int]: ...
def bool_values(
    column: tuple[Any, ...], n: int, allocate: _Allocate, words: bytes
) -> Optional[Any]: ...
def json_checks(column: tuple[Any, ...], n: int, allocate: _Allocate) -> Any: ...
def json_arrays(
    column: tuple[Any, ...], n: int, allocate: _Allocate
) -> Optional[tuple[Any, Any, Any, Any, int]]: ...
def pg_arrays(
    column: tuple[Any, ...], n: int, allocate: _Allocate
) -> Optional[tuple[Any, Any, Any, Any, int]]: ...
def has_either(buffer: Any, start: int, stop: int, a: int, b: int) -> bool: ...
def take_binary(
    chunks: Sequence[tuple[Any, ...]],
    indices: Any,
    m: int,
    allocate: _Allocate,
    threads: int = 1,
    min_part: int = 16384,
) -> tuple[Any, Any, int]: ...
def quote_scan(
    buffer: Any,
    quote: int,
    delim: int,
    state: int,
    span_nl: int,
    escape: int = -1,
    doubled: int = 1,
) -> tuple[int, int, int, int, int, int, int]: ...
