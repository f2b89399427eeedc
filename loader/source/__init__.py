"""Sources: find every input a load names and open each as a streamed, decompressed byte stream.

:func:`expand_sources` turns patterns (``gs://`` objects, prefixes and globs, local paths and
globs, ``-`` for stdin) into :class:`SourceInfo` records (identity: generation, size, mtime) in a
deterministic order; :func:`open_source` opens one as a :class:`SourceStream`, a read-only
binary file object that ``pyarrow.csv.open_csv`` reads directly. Every failure leaves this
package as a :class:`~loader.errors.SourceError` with a one-line message and a hint.

One module per question:

=================  =================================================================================
``identity``       what a source is: :class:`SourceInfo`, :func:`total_bytes`
``patterns``       which inputs a pattern names: globs, listing GCS and disk, skip notes
``compression``    which compressions are read (plain, gzip) and how others are recognised
``gcs``            where a ``gs://`` object is read: the storage client, the endpoint probe,
                   ranged reads pinned to a generation, GCS error messages, the read retry
``local``          where a file, a pipe or stdin is read, and their error messages
``raw``            the counting raw reader the ``gcs`` and ``local`` readers implement
``stream``         :func:`open_source` and :class:`SourceStream`: sniffing and decompression
=================  =================================================================================

Every name other modules use is re-exported here, so ``from loader.source import ...`` is the
way in. A storage client is injected as ``storage_client=`` (a client, or a zero-argument
factory returning one); without one, :func:`make_storage_client` makes one on first use, so a
load of local files never needs credentials.
"""

from __future__ import annotations

from .gcs import (
    DEFAULT_CHUNK_SIZE,
    EMULATOR_ENV,
    EMULATOR_PROJECT,
    ClientArg,
    make_storage_client,
    probe_storage,
    read_retry,
)
from .identity import SourceInfo, total_bytes
from .patterns import canonical_pattern, expand_sources, glob_to_regex, is_stream
from .stream import SourceStream, open_source

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "EMULATOR_ENV",
    "EMULATOR_PROJECT",
    "ClientArg",
    "SourceInfo",
    "SourceStream",
    "canonical_pattern",
    "expand_sources",
    "glob_to_regex",
    "is_stream",
    "make_storage_client",
    "open_source",
    "probe_storage",
    "read_retry",
    "total_bytes",
]
