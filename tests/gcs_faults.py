"""A fault the GCS emulator cannot produce: the connection dropping in the middle of an object.

:class:`DroppingSession` is the HTTP session of a real storage client (talking to the
emulator). It cuts the body of a media download short when it reaches a chosen byte of the
object, raising ``ConnectionError`` as a reset connection does, and records where each
ranged request started, so a test can see the client resume at the first missing byte.

:func:`client` makes a storage client over such a session, for ``load(storage_client=...)``;
:func:`main` runs the loader's command line with such a client (for subprocess tests): the
environment variable ``GCS_DROP_AT`` names the object offset, ``GCS_DROP_TIMES`` how many
responses to cut there (default: every one, a persistent failure).
"""

from __future__ import annotations

import functools
import os
import re
from typing import Any, Iterator, Optional

import requests

CHUNK = 16 << 10
"""Bytes per ranged read in these tests (the loader's default is 8 MiB): several per object."""


class DroppingSession(requests.Session):
    def __init__(self, drop_at: int, times: Optional[int] = None) -> None:
        super().__init__()
        self.drop_at = drop_at
        self.times = times
        self.starts: list[int] = []
        self.drops = 0

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kw: Any) -> Any:
        resp = super().request(method, url, *args, **kw)
        if method != "GET" or "alt=media" not in str(url):
            return resp
        headers = {k.lower(): v for k, v in (kw.get("headers") or {}).items()}
        m = re.match(r"bytes=(\d+)-(\d*)", headers.get("range", ""))
        start = int(m.group(1)) if m else 0
        end = int(m.group(2)) if m and m.group(2) else None
        self.starts.append(start)
        covers = start <= self.drop_at and (end is None or self.drop_at <= end)
        if covers and (self.times is None or self.drops < self.times):
            self.drops += 1
            resp.raw.stream = functools.partial(_cut, resp.raw.stream, self.drop_at - start)
        return resp


def _cut(stream: Any, limit: int, *args: Any, **kw: Any) -> Iterator[bytes]:
    sent = 0
    for chunk in stream(*args, **kw):
        if sent + len(chunk) >= limit:
            if limit > sent:
                yield chunk[: limit - sent]
            raise ConnectionError("connection reset by peer (injected)")
        sent += len(chunk)
        yield chunk
    raise ConnectionError("connection reset by peer (injected)")


def client(session: requests.Session) -> Any:
    """A storage client for the emulator at $STORAGE_EMULATOR_HOST, over ``session``."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    return storage.Client(
        project="spanner-loader-local", credentials=AnonymousCredentials(), _http=session
    )


def small_chunks(monkeypatch: Any = None) -> None:
    """Make the loader read gs:// sources in CHUNK-byte ranges (a read setting, not the backend:
    the client itself is injected through ``load(storage_client=...)``)."""
    import loader.source
    import loader.table_load

    chunked = functools.partial(loader.source.open_source, chunk_size=CHUNK)
    if monkeypatch is not None:
        monkeypatch.setattr(loader.table_load, "open_source", chunked)
    else:
        loader.table_load.open_source = chunked


def main() -> None:
    """``python -c 'import gcs_faults; gcs_faults.main()' load ...``: the CLI, with the fault."""
    import loader.pipeline
    from loader.cli import main as cli_main

    drop_at = os.environ.get("GCS_DROP_AT")
    times = os.environ.get("GCS_DROP_TIMES")
    session = DroppingSession(int(drop_at) if drop_at else 1 << 62, int(times) if times else None)
    small_chunks()
    # The command line has no way to pass a client: hand it to the load() the command calls.
    loader.pipeline.load = functools.partial(loader.pipeline.load, storage_client=client(session))
    cli_main()
