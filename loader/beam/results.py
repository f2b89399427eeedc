"""Where a Beam load's workers leave what the launcher collects after the job: rejects and each
key range's commit counts, as JSON-lines files in a folder, local or ``gs://bucket/prefix``.

Each file is named after the element that wrote it (a byte range's rejects, a key range's
result), so an engine re-running a bundle overwrites that bundle's file instead of adding a
second one. Nothing here imports Beam.

The folder (``LoadConfig.beam_results``, ``--beam-results``) defaults to the launcher's
temporary directory on the local runners (DirectRunner, PrismRunner) and to
``<temp_location>/spanner-loader-results`` on the others (Dataflow's workers share no
filesystem with the launcher); each launch writes under a folder of its own inside it
(:func:`launch_folder`) and the launcher deletes that folder once it has read it.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Optional

from ..errors import ConfigError
from ..source.gcs import _LazyClient

LOCAL_RUNNERS = ("DirectRunner", "PrismRunner")
"""Runners whose workers share the launcher's filesystem."""
SUBFOLDER = "spanner-loader-results"


def default_location(
    runner: str, options: Sequence[tuple[str, str]], explicit: Optional[str]
) -> Optional[str]:
    """The results folder for ``runner``: ``explicit`` if given, None (the launcher's temporary
    directory) on a local runner, else under the job's ``temp_location``."""
    if explicit:
        return explicit
    if runner in LOCAL_RUNNERS:
        return None
    temp = dict(options).get("temp_location") or dict(options).get("gcp_temp_location")
    if not temp:
        raise ConfigError(
            f"--runner {runner} needs a location its workers and this machine both reach, for "
            "rejects and commit counts",
            hint="add --beam-option temp_location=gs://BUCKET/temp (or --beam-results gs://...)",
        )
    return temp.rstrip("/") + "/" + SUBFOLDER


def launch_folder(location: str, run_id: str, table: str) -> str:
    """A folder of this launch's own under ``location`` (a re-run never reads an earlier
    launch's files)."""
    return f"{location.rstrip('/')}/{run_id}/{table}-{uuid.uuid4().hex[:12]}"


def _split_gs(uri: str) -> tuple[str, str]:
    rest = uri[len("gs://") :]
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise ConfigError(f"{uri!r} names no bucket", hint="e.g. gs://BUCKET/loader-results")
    return bucket, prefix.strip("/")


class ResultFolder:
    """One launch's folder of JSON-lines files (local path or ``gs://``)."""

    def __init__(self, folder: str, storage_client: Any = None) -> None:
        self.folder = folder.rstrip("/")
        self.gcs = folder.startswith("gs://")
        self._client = _LazyClient(storage_client)  # a client, a factory, or None (default)

    def _storage(self) -> Any:
        return self._client.get()

    def write(self, name: str, records: Sequence[dict[str, Any]]) -> None:
        """Write (or overwrite) the file ``name`` with one JSON line per record."""
        data = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)
        if self.gcs:
            bucket, prefix = _split_gs(self.folder)
            blob = self._storage().bucket(bucket).blob(f"{prefix}/{name}" if prefix else name)
            blob.upload_from_string(data.encode("utf-8"), content_type="application/jsonl")
            return
        os.makedirs(self.folder, exist_ok=True)
        tmp = Path(self.folder) / f".{name}.{uuid.uuid4().hex[:8]}.tmp"
        tmp.write_text(data, encoding="utf-8")
        os.replace(tmp, Path(self.folder) / name)  # a reader never sees half a file

    def read(self, prefix: str) -> Iterator[dict[str, Any]]:
        """The records of every file whose name starts with ``prefix``, files in name order."""
        for _, text in self._files(prefix):
            yield from (json.loads(line) for line in text.splitlines() if line.strip())

    def _files(self, prefix: str) -> Iterator[tuple[str, str]]:
        if self.gcs:
            bucket, folder = _split_gs(self.folder)
            base = f"{folder}/" if folder else ""
            blobs = self._storage().list_blobs(bucket, prefix=base + prefix)
            for blob in sorted(blobs, key=lambda b: b.name):
                yield blob.name, blob.download_as_bytes().decode("utf-8")
            return
        if not os.path.isdir(self.folder):
            return
        for name in sorted(os.listdir(self.folder)):
            if name.startswith(prefix):
                yield name, (Path(self.folder) / name).read_text(encoding="utf-8")

    def delete(self) -> None:
        """Remove the folder and its files (best effort: leftovers only cost storage)."""
        try:
            if self.gcs:
                bucket, folder = _split_gs(self.folder)
                for blob in list(self._storage().list_blobs(bucket, prefix=folder + "/")):
                    blob.delete()
            else:
                import shutil

                shutil.rmtree(self.folder, ignore_errors=True)
                try:  # the run's folder above it (launch_folder), when no other launch uses it
                    os.rmdir(os.path.dirname(self.folder.rstrip("/")))
                except OSError:
                    pass
        except Exception:
            pass
