"""Local inputs: regular files, pipes (a FIFO, ``/dev/stdin``, ``<(...)``) and standard input,
and the messages for what can go wrong with them (missing, a directory, unreadable, changed).
"""

from __future__ import annotations

import os
import stat
from typing import Any, BinaryIO, Optional

from ..errors import SourceError
from .identity import SourceInfo
from .raw import _RawSource


def _local_error(exc: OSError, path: str, action: str) -> SourceError:
    if isinstance(exc, FileNotFoundError):
        relative = not os.path.isabs(path)  # (a manifest's are made absolute, from its folder)
        return SourceError(
            f"no such file: {path}",
            hint="check the path" + (" (relative paths start at the cwd)" if relative else ""),
        )
    if isinstance(exc, IsADirectoryError):
        return _is_dir_error(path)
    if isinstance(exc, PermissionError):
        return SourceError(
            f"permission denied {action} {path}",
            hint="make the file readable by this user (e.g. `chmod a+r`)",
        )
    return SourceError(f"cannot {action.split()[0]} {path}: {exc.strerror or exc}")


def _is_dir_error(path: str) -> SourceError:
    return SourceError(
        f"{path} is a directory",
        hint=f"add a trailing slash to load every file under it ({path.rstrip('/')}/), "
        f"or use a glob such as {path.rstrip('/')}/*.csv",
    )


class _FileReader(_RawSource):
    """A local file read up to its listed size (or bytes ``[start, stop)`` of it); growth or
    rewriting is reported, not absorbed."""

    def __init__(
        self, path: str, info: SourceInfo, start: int = 0, stop: Optional[int] = None
    ) -> None:
        super().__init__()
        self._path = path
        self._info = info
        self._start = start
        self._stop = info.size if stop is None else stop
        try:
            self._file = open(path, "rb", buffering=0)  # noqa: SIM115 - closed by close()
        except OSError as exc:
            raise _local_error(exc, path, "opening") from exc
        try:
            self._check("changed since it was listed")
            if start:
                self._file.seek(start)
        except BaseException:
            self._file.close()
            raise

    def _check(self, what: str) -> None:
        try:
            st = os.fstat(self._file.fileno())
        except OSError as exc:
            raise _local_error(exc, self._path, "reading") from exc
        if stat.S_ISDIR(st.st_mode):
            raise _is_dir_error(self._path)
        info = self._info
        if (info.size is not None and st.st_size != info.size) or (
            info.mtime_ns is not None and st.st_mtime_ns != info.mtime_ns
        ):
            raise SourceError(
                f"{self._path} {what} (was {info.size} bytes, mtime_ns {info.mtime_ns}; "
                f"now {st.st_size} bytes, mtime_ns {st.st_mtime_ns})",
                hint="re-run the load once the file is no longer being written",
            )

    def readinto(self, b: Any) -> int:
        limit = len(b)
        if self._stop is not None:
            limit = min(limit, self._stop - self._start - self.bytes_read)
            if limit <= 0:
                self._check("changed while it was being read")
                return 0
        try:
            n = self._file.readinto(memoryview(b)[:limit]) or 0
        except OSError as exc:
            raise _local_error(exc, self._path, "reading") from exc
        if n == 0 and self._info.size is not None:
            raise SourceError(
                f"{self._path} changed while it was being read: it ended at byte "
                f"{self._start + self.bytes_read} of {self._info.size}",
                hint="re-run the load once the file is no longer being written",
            )
        self.bytes_read += n
        return n

    def close(self) -> None:
        if not self.closed:
            self._file.close()
        super().close()


class _PipeReader(_RawSource):
    """A named pipe or another file that is not a regular one (a device, /dev/stdin, the
    /dev/fd/N of a shell's process substitution): read to its end, no size to check."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self._path = path
        try:
            self._file = open(path, "rb", buffering=0)  # noqa: SIM115 - closed by close()
        except OSError as exc:
            raise _local_error(exc, path, "opening") from exc

    def readinto(self, b: Any) -> int:
        try:
            n = self._file.readinto(b) or 0
        except OSError as exc:
            raise _local_error(exc, self._path, "reading") from exc
        self.bytes_read += n
        return n

    def close(self) -> None:
        if not self.closed:
            self._file.close()
        super().close()


class _StdinReader(_RawSource):
    """Standard input, binary, untranslated; closing us leaves the process's stdin open."""

    def __init__(self, stream: BinaryIO) -> None:
        super().__init__()
        self._stream = stream

    def readinto(self, b: Any) -> int:
        try:
            data = self._stream.read(len(b))
        except OSError as exc:
            raise SourceError(f"cannot read standard input: {exc.strerror or exc}") from exc
        n = len(data)
        b[:n] = data
        self.bytes_read += n
        return n
