"""The readahead gate between Arrow's CSV reader thread and the consumer of its batches, and
the readers' teardown (:func:`release_readers`, run at exit and by the CLI before it leaves)."""

from __future__ import annotations

import atexit
import gc
import threading
import time
import weakref
from typing import Any, Optional

from .stream import Readable, _ReadOnlyStream

READAHEAD_BLOCKS = 2
"""Blocks Arrow's CSV reader may read ahead of the batch being processed (see _ReadaheadGate)."""

_LIVE_GATES: weakref.WeakSet[_ReadaheadGate] = weakref.WeakSet()

_LENT: dict[int, weakref.ref[Any]] = {}
"""Python objects handed to Arrow that Arrow has not freed yet (see :func:`lend`)."""

_EXIT_PATIENCE = 10.0
"""Most seconds :func:`release_readers` waits for Arrow's threads to free what they were lent."""


def _returned(ref: weakref.ref[Any]) -> None:
    _LENT.pop(id(ref), None)


def lend(obj: Any) -> Any:
    """``obj``, recorded as held by Arrow until it is freed: the stream, each chunk read and the
    invalid-row handler (pass Arrow only objects nothing else keeps).

    Arrow frees such objects on whichever of its threads drops them last, taking the GIL to do
    so, possibly after the consumer has seen the end of the input; a thread taking the GIL
    once the interpreter is finalising aborts the process ("terminate called without an active
    exception"). :func:`release_readers` waits until every lent object is freed."""
    ref = weakref.ref(obj, _returned)
    _LENT[id(ref)] = ref
    return obj


class _ReadaheadGate(_ReadOnlyStream):
    """Caps how far Arrow's CSV reader reads ahead of the batches taken from it.

    ``open_csv`` reads the stream on a background thread into a queue of up to 32 blocks
    (not configurable), so with 16 MiB blocks a fast source could sit 512 MiB ahead of a busy
    consumer. Here a read waits while ``window`` reads are not yet matched by a taken batch.
    Arrow needs block k+1 to finish the last row of block k, so a window of 2 never starves
    it; blocks that yield no batch (skipped rows) could, so a read blocked for ``patience``
    seconds while the consumer waits for the next batch goes ahead anyway.
    """

    def __init__(self, raw: Readable, window: int, patience: float = 0.5) -> None:
        self._raw = raw
        self._window = window
        self._patience = patience
        self._cond = threading.Condition()
        self._reads = 0
        self._taken = 0
        self._consumer_waiting = 0
        self.reader: Any = None
        self.arrow_side: Optional[weakref.ref[_ArrowSide]] = None
        self.closed = False
        self.tail: list[bytes] = []
        """The last two chunks Arrow read: the end of the input, for
        :func:`_open_quote_at_end`."""
        self.tail_is_all = True
        """Whether :attr:`tail` holds every byte Arrow read (no chunk dropped from it yet)."""
        self.ended_line = False
        """The input's last line had no line end: Arrow was given one after it."""
        self._next: Optional[bytes] = None
        _LIVE_GATES.add(self)

    def read(self, n: int = -1) -> bytes:
        with self._cond:
            while not (self.closed or self._reads - self._taken < self._window):
                if not self._cond.wait(self._patience) and self._consumer_waiting:
                    break  # the consumer may be waiting for this very read
            self._reads += 1
            if self.closed:
                return lend(memoryview(b""))
        if self._next is not None:
            chunk, self._next = self._next, None
        else:
            chunk = self._raw.read(n)
        if chunk and (n < 0 or len(chunk) < n) and chunk[-1:] not in (b"\n", b"\r"):
            # A short read not ending a line may be the input's last: if it is, end its last
            # line. Arrow reads such a line the same way, except a lone header line, which it
            # takes for an empty file.
            after = self._raw.read(n) if n >= 0 else b""
            if after:
                self._next = bytes(after)
            else:
                chunk = bytes(chunk) + b"\n"
                self.ended_line = True
        if chunk:
            if len(self.tail) > 1:
                self.tail_is_all = False
            self.tail = [*self.tail[-1:], bytes(chunk)]
        # Arrow wraps what it is given in a buffer whose release takes the GIL: a view only
        # Arrow holds tells when it has let go of the chunk (see lend)
        return lend(memoryview(chunk))  # type: ignore[no-any-return]

    def for_arrow(self) -> _ArrowSide:
        """The stream to hand to Arrow's reader (only Arrow may keep a reference to it)."""
        side = _ArrowSide(self)
        self.arrow_side = weakref.ref(side)
        return lend(side)  # type: ignore[no-any-return]

    def next_batch(self) -> Any:
        """The reader's next batch (StopIteration at the end, or once released).

        The gate holds the only reference to the reader, so that :meth:`release` destroys it
        while Arrow is still alive, whoever still holds the block iterator (Arrow aborts the
        process when a reader is destroyed during interpreter teardown)."""
        if self.reader is None:
            raise StopIteration
        return self.call(self.reader.read_next_batch)

    def release(self) -> None:
        """Close, then run the reader to its end and drop it: reads now return EOF at once, so
        this parses at most the blocks already read, and afterwards Arrow's thread has left
        Python for good (one left inside a read while the interpreter shuts down aborts the
        process)."""
        self.close()
        reader, self.reader = self.reader, None
        if reader is not None:
            try:
                while True:
                    reader.read_next_batch()
            except StopIteration:
                pass
            except Exception:  # noqa: BLE001 - the reader's own error was reported already
                pass

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn`` (the consumer's wait for the reader) with reads ungated."""
        with self._cond:
            self._consumer_waiting += 1
            self._cond.notify_all()
        try:
            return fn(*args, **kwargs)
        finally:
            with self._cond:
                self._consumer_waiting -= 1

    def took_batch(self) -> None:
        with self._cond:
            self._taken = max(self._taken + 1, self._reads - self._window + 1)
            self._cond.notify_all()

    def tell(self) -> int:
        return int(self._raw.tell()) if hasattr(self._raw, "tell") else 0

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()


class _ArrowSide(_ReadOnlyStream):
    """What Arrow's reader is given to read from: the gate, behind an object only Arrow holds,
    so that a weak reference to it tells when Arrow (possibly on one of its own threads) has
    let go of the stream (see release_readers)."""

    def __init__(self, gate: _ReadaheadGate) -> None:
        self._gate = gate

    def read(self, n: int = -1) -> bytes:
        return self._gate.read(n)

    def tell(self) -> int:
        return self._gate.tell()

    @property
    def closed(self) -> bool:
        return self._gate.closed

    def close(self) -> None:
        self._gate.close()


@atexit.register
def release_readers() -> None:
    """Release every reader still open, then wait until Arrow's threads have freed every
    Python object they were lent; run at exit, and by the CLI before it leaves."""
    # Arrow's reader thread must not be left waiting in Python code while the interpreter
    # shuts down (a reader abandoned without being closed would abort the process there).
    for gate in list(_LIVE_GATES):
        gate.release()
    # Then wait (briefly) until Arrow has freed each stream, chunk and handler: its last
    # reference can go on one of Arrow's threads after the reader has ended, which must not
    # take the GIL once the interpreter is finalising (the process would abort with "terminate
    # called without an active exception").
    wait_for_arrow(_EXIT_PATIENCE)


def wait_for_arrow(patience: float) -> bool:
    """Wait up to ``patience`` seconds until Arrow holds none of the objects it was lent;
    whether it holds none."""
    deadline = time.monotonic() + patience
    collected = False
    while _LENT:
        if time.monotonic() > deadline:
            return False
        if not collected:  # a cycle (an error's traceback) may hold a reader's last reference
            gc.collect()
            collected = True
        time.sleep(0.002)
    return True
