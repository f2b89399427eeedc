"""loader.source against a real GCS emulator (gcp-storage-emulator) and real local files.

Faults the emulator cannot produce (it ignores generation preconditions and never transcodes
gzip) are injected by thin wrappers around real emulator blobs.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.csv as pc
import pytest
from gcs_server import free_port, gcs_emulator
from google.api_core import exceptions as gexc
from google.api_core.retry import Retry

import loader.source
from loader.errors import ExitCode, SourceError
from loader.source import (
    SourceInfo,
    expand_sources,
    glob_to_regex,
    make_storage_client,
    open_source,
    total_bytes,
)

# The directory that holds the `loader` package under test (the measuring subprocess imports it).
PACKAGE_PARENT = Path(loader.__file__).parent.parent
FAST_RETRY = Retry(initial=0.01, maximum=0.05, multiplier=2, timeout=0.3)


# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def gcs_url() -> Iterator[str]:
    """A GCS emulator for the whole session, with STORAGE_EMULATOR_HOST pointing at it."""
    with gcs_emulator() as url, pytest.MonkeyPatch.context() as mp:
        mp.setenv("STORAGE_EMULATOR_HOST", url)
        yield url


@pytest.fixture(scope="session")
def client(gcs_url: str) -> Any:
    return make_storage_client()


@pytest.fixture
def bucket(client: Any) -> Any:
    """A fresh bucket per test."""
    return client.create_bucket(f"b-{uuid.uuid4().hex[:12]}")


def put(bucket: Any, name: str, data: bytes, content_encoding: str | None = None) -> Any:
    blob = bucket.blob(name)
    if content_encoding:
        blob.content_encoding = content_encoding
    blob.upload_from_string(data, content_type="text/csv")
    return blob


def read_all(info: SourceInfo, client: Any = None, **kwargs: Any) -> bytes:
    with open_source(info, storage_client=client, **kwargs) as f:
        return f.read()


def expand(patterns: list[str], client: Any = None) -> tuple[list[SourceInfo], list[str]]:
    return expand_sources(patterns, storage_client=client)


# -- listing and globs -------------------------------------------------------------------------


def test_many_objects_sorted_and_exact(bucket: Any, client: Any) -> None:
    names = [f"many/part-{i:03d}.csv" for i in range(40)]
    contents = {n: f'id,v\n{i},x{i}\r\n{i},"q\n"'.encode() for i, n in enumerate(names)}
    for n in random.Random(7).sample(names, len(names)):
        put(bucket, n, contents[n])
    sources, notes = expand([f"gs://{bucket.name}/many/"], client)
    assert [s.name for s in sources] == names
    assert notes == []
    for s in sources:
        assert s.kind == "gcs" and s.bucket == bucket.name and s.generation
        assert s.size == len(contents[s.name or ""])
        assert read_all(s, client, chunk_size=5) == contents[s.name or ""]  # CRLF kept
    assert total_bytes(sources) == sum(len(c) for c in contents.values())


GLOB_TREE = [
    "d/a1.csv",
    "d/a2.csv",
    "d/b1.csv",
    "d/x.txt",
    "d/sub/a3.csv",
    "d/sub/deep/a4.csv",
    "other/a5.csv",
]
GLOB_CASES = [
    ("d/*.csv", ["d/a1.csv", "d/a2.csv", "d/b1.csv"]),
    ("d/a?.csv", ["d/a1.csv", "d/a2.csv"]),
    ("d/[ab]1.csv", ["d/a1.csv", "d/b1.csv"]),
    ("d/[!a]*", ["d/b1.csv", "d/x.txt"]),
    ("d/[a-b]?.csv", ["d/a1.csv", "d/a2.csv", "d/b1.csv"]),
    ("d/**/a*.csv", ["d/a1.csv", "d/a2.csv", "d/sub/a3.csv", "d/sub/deep/a4.csv"]),
    ("d/**.csv", ["d/a1.csv", "d/a2.csv", "d/b1.csv", "d/sub/a3.csv", "d/sub/deep/a4.csv"]),
    ("d/*/a*.csv", ["d/sub/a3.csv"]),
    ("**/a5.csv", ["other/a5.csv"]),
    ("*/a1.csv", ["d/a1.csv"]),
]


@pytest.mark.parametrize("pattern,expected", GLOB_CASES)
def test_gcs_globs(bucket: Any, client: Any, pattern: str, expected: list[str]) -> None:
    for name in GLOB_TREE:
        put(bucket, name, b"a\n1\n")
    sources, _ = expand([f"gs://{bucket.name}/{pattern}"], client)
    assert [s.name for s in sources] == expected


@pytest.mark.parametrize("pattern,expected", GLOB_CASES)
def test_local_globs_match_gcs_semantics(tmp_path: Path, pattern: str, expected: list[str]) -> None:
    for name in [*GLOB_TREE, "d/.hidden.csv"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"a\n1\n")
    sources, _ = expand([f"{tmp_path}/{pattern}"])
    assert [os.path.relpath(s.uri, tmp_path) for s in sources] == expected
    assert all(s.kind == "file" and s.mtime_ns and s.size == 4 for s in sources)


def test_local_relative_glob_directory_and_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "data" / "sub").mkdir(parents=True)
    for name in ["data/b.csv", "data/a.csv", "data/sub/c.csv", "data/.secret.csv", "top.csv"]:
        (tmp_path / name).write_bytes(b"x\n")
    monkeypatch.chdir(tmp_path)
    assert [s.uri for s in expand(["*.csv"])[0]] == [str(tmp_path / "top.csv")]
    everything = [os.path.relpath(s.uri, tmp_path) for s in expand(["data/"])[0]]
    assert everything == ["data/a.csv", "data/b.csv", "data/sub/c.csv"]
    assert [s.uri for s in expand(["data/.s*"])[0]] == [str(tmp_path / "data/.secret.csv")]
    # Named twice: loaded once, with a note; argument order is kept across patterns.
    sources, notes = expand(["top.csv", "data/a.csv", "top.csv"])
    assert [os.path.basename(s.uri) for s in sources] == ["top.csv", "a.csv"]
    assert notes == [f"{tmp_path / 'top.csv'} is named by more than one pattern; loading it once"]


def test_glob_to_regex_edges() -> None:
    assert glob_to_regex("a/*.csv").fullmatch("a/x.csv")
    assert not glob_to_regex("a/*.csv").fullmatch("a/b/x.csv")
    assert glob_to_regex("a/**/x.csv").fullmatch("a/x.csv")
    assert glob_to_regex("a/**/x.csv").fullmatch("a/b/c/x.csv")
    assert not glob_to_regex("a/?").fullmatch("a//")
    assert not glob_to_regex("a[!b]c").fullmatch("a/c")
    assert glob_to_regex("x[.csv").fullmatch("x[.csv")  # unclosed bracket is literal
    assert glob_to_regex("f(1)+.csv").fullmatch("f(1)+.csv")  # regex metachars are literal
    assert glob_to_regex("[]]x").fullmatch("]x")
    assert glob_to_regex("[\\]x").fullmatch("\\x")


def test_placeholders_and_empty_objects_are_skipped_with_notes(bucket: Any, client: Any) -> None:
    put(bucket, "p/", b"")
    put(bucket, "p/sub/", b"")
    put(bucket, "p/empty.csv", b"")
    put(bucket, "p/real.csv", b"a\n1\n")
    sources, notes = expand([f"gs://{bucket.name}/p/"], client)
    assert [s.name for s in sources] == ["p/real.csv"]
    b = bucket.name
    assert notes == [
        f"gs://{b}/p/: skipped 2 folder placeholder objects: gs://{b}/p/, gs://{b}/p/sub/",
        f"gs://{b}/p/: skipped 1 empty object: gs://{b}/p/empty.csv",
    ]
    sources, notes = expand([f"gs://{b}/p/empty.csv", f"gs://{b}/p/real.csv"], client)
    assert [s.name for s in sources] == ["p/real.csv"]
    assert notes == [f"gs://{b}/p/empty.csv: skipped an empty object"]
    with pytest.raises(SourceError, match="only empty objects or folder placeholders"):
        expand([f"gs://{b}/p/sub/"], client)


def test_empty_local_file_skipped(tmp_path: Path) -> None:
    (tmp_path / "e.csv").write_bytes(b"")
    (tmp_path / "f.csv").write_bytes(b"a\n")
    sources, notes = expand([str(tmp_path / "e.csv"), str(tmp_path / "*.csv")])
    assert [os.path.basename(s.uri) for s in sources] == ["f.csv"]
    assert notes[0] == f"{tmp_path / 'e.csv'}: skipped an empty file"
    # local files are files, not objects (a GCS word)
    assert notes[1] == f"{tmp_path}/*.csv: skipped 1 empty file: {tmp_path / 'e.csv'}"
    (tmp_path / "g.csv").write_bytes(b"")
    _, notes = expand([str(tmp_path / "*.csv")])
    assert notes[0].startswith(f"{tmp_path}/*.csv: skipped 2 empty files: ")


# -- errors while listing ----------------------------------------------------------------------


def test_no_match_names_the_pattern(bucket: Any, client: Any, tmp_path: Path) -> None:
    put(bucket, "data/a.csv", b"a\n")
    pattern = f"gs://{bucket.name}/data/*.tsv"
    with pytest.raises(SourceError) as e:
        expand([pattern], client)
    assert str(e.value) == f"no objects match {pattern}"
    assert e.value.hint == f"list what is there with `gcloud storage ls gs://{bucket.name}/data/`"
    assert e.value.exit_code == ExitCode.USAGE
    with pytest.raises(SourceError, match=f"no objects under gs://{bucket.name}/nothing/$"):
        expand([f"gs://{bucket.name}/nothing/"], client)
    with pytest.raises(SourceError, match=f"^no files match {tmp_path}/\\*.csv$"):
        expand([f"{tmp_path}/*.csv"])


def test_missing_bucket_and_object(bucket: Any, client: Any) -> None:
    with pytest.raises(SourceError) as e:
        expand(["gs://no-such-bucket-xyz/a.csv"], client)
    assert "bucket gs://no-such-bucket-xyz does not exist" in str(e.value)
    with pytest.raises(SourceError, match="bucket gs://no-such-bucket-xyz does not exist"):
        expand(["gs://no-such-bucket-xyz/*.csv"], client)
    with pytest.raises(SourceError) as e:
        expand([f"gs://{bucket.name}/dir/missing.csv"], client)
    assert str(e.value) == f"object gs://{bucket.name}/dir/missing.csv not found"
    assert e.value.hint == f"check the name with `gcloud storage ls gs://{bucket.name}/dir/`"
    put(bucket, "dir/x.csv", b"a\n")
    with pytest.raises(SourceError) as e:
        expand([f"gs://{bucket.name}/dir"], client)
    assert e.value.hint == f"add a trailing slash to load them all: gs://{bucket.name}/dir/"
    with pytest.raises(SourceError, match="wildcards in bucket names"):
        expand(["gs://buck*/x"], client)
    with pytest.raises(SourceError, match="needs a bucket"):
        expand(["gs:///x"], client)


def test_local_errors(tmp_path: Path) -> None:
    with pytest.raises(SourceError) as e:
        expand([str(tmp_path / "missing.csv")])
    assert str(e.value) == f"no such file: {tmp_path / 'missing.csv'}"
    with pytest.raises(SourceError) as e:
        expand([str(tmp_path)])
    assert str(e.value) == f"{tmp_path} is a directory"
    assert e.value.hint is not None and f"{tmp_path}/" in e.value.hint
    with pytest.raises(SourceError, match="no such file"):
        expand([str(tmp_path / "nodir") + "/"])
    with pytest.raises(SourceError, match="unsupported URL scheme"):
        expand(["s3://bucket/x.csv"])
    with pytest.raises(SourceError, match="no sources given"):
        expand([])


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads unreadable files")
def test_local_permission_denied(tmp_path: Path) -> None:
    p = tmp_path / "secret.csv"
    p.write_bytes(b"a\n")
    p.chmod(0)
    with pytest.raises(SourceError, match="permission denied"):
        expand([str(p)])


def test_local_permission_denied_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same check, for runs as root (which reads anything): the OS refusal is injected."""
    p = tmp_path / "secret.csv"
    p.write_bytes(b"a\n")

    def refuse(path: Any, *args: Any, **kwargs: Any) -> int:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(SourceError) as e:
        expand([str(p)])
    assert str(e.value) == f"permission denied opening {p}"
    assert e.value.hint == "make the file readable by this user (e.g. `chmod a+r`)"


def test_storage_client_is_lazy_and_injectable(tmp_path: Path, client: Any) -> None:
    (tmp_path / "a.csv").write_bytes(b"a\n")

    def no_client() -> Any:
        raise AssertionError("a local-only load must not create a storage client")

    assert len(expand_sources([str(tmp_path / "a.csv")], storage_client=no_client)[0]) == 1

    def broken() -> Any:
        raise RuntimeError("no credentials here")

    with pytest.raises(SourceError, match="cannot create a Cloud Storage client"):
        expand_sources(["gs://b/x.csv"], storage_client=broken)
    calls = []

    def factory() -> Any:
        calls.append(1)
        return client

    with pytest.raises(SourceError):
        expand_sources(["gs://nope-bucket/a", "gs://nope-bucket/b"], storage_client=factory)
    assert calls == [1]


# -- compression -------------------------------------------------------------------------------


CSV = b'id,text\n1,"multi\nline"\n2,plain\n3,"with ""quotes"""\n4,last-no-newline'


def test_gzip_by_extension_and_content_encoding(bucket: Any, client: Any, tmp_path: Path) -> None:
    gz = gzip.compress(CSV)
    put(bucket, "z/by-ext.csv.gz", gz)
    put(bucket, "z/by-encoding.csv", gz, content_encoding="gzip")
    put(bucket, "z/sniffed.csv", gz)  # no hint at all: the gzip magic bytes decide
    multi = gzip.compress(CSV[:20]) + gzip.compress(CSV[20:])
    put(bucket, "z/multi.csv.gz", multi)
    sources, _ = expand([f"gs://{bucket.name}/z/"], client)
    by_name = {s.name: s for s in sources}
    assert by_name["z/by-ext.csv.gz"].compression == "gzip"
    assert by_name["z/by-encoding.csv"].compression == "gzip"
    assert by_name["z/by-encoding.csv"].content_encoding == "gzip"
    assert by_name["z/sniffed.csv"].compression is None
    for s in sources:
        with open_source(s, storage_client=client, chunk_size=7) as f:
            assert f.read() == CSV
            assert f.compression == "gzip"
            assert f.compressed_position() == s.size
    (tmp_path / "l.csv.gz").write_bytes(multi)
    local, _ = expand([str(tmp_path / "l.csv.gz")])
    assert local[0].compression == "gzip" and read_all(local[0]) == CSV


def test_corrupt_and_truncated_gzip(tmp_path: Path) -> None:
    gz = gzip.compress(CSV * 50)
    (tmp_path / "trunc.csv.gz").write_bytes(gz[: len(gz) // 2])
    bad = bytearray(gz)
    bad[len(bad) // 2] ^= 0xFF
    (tmp_path / "bad.csv.gz").write_bytes(bytes(bad))
    for name in ("trunc.csv.gz", "bad.csv.gz"):
        info = expand([str(tmp_path / name)])[0][0]
        with pytest.raises(SourceError, match="corrupt or truncated gzip data") as e:
            read_all(info)
        assert e.value.hint is not None and "gzip -t" in e.value.hint


@pytest.mark.parametrize("ext", [".bz2", ".zst", ".xz", ".zip", ".snappy", ".lz4", ".tar.gz"])
def test_unsupported_compression_by_extension(bucket: Any, client: Any, ext: str) -> None:
    put(bucket, f"u/data.csv{ext}", b"whatever")
    with pytest.raises(SourceError, match="compression is not supported") as e:
        expand([f"gs://{bucket.name}/u/*"], client)
    assert e.value.hint is not None and "gzip" in e.value.hint


def test_unsupported_compression_by_encoding_and_magic(
    bucket: Any, client: Any, tmp_path: Path
) -> None:
    put(bucket, "u/brotli.csv", b"whatever", content_encoding="br")
    with pytest.raises(SourceError, match="Content-Encoding 'br' compression is not supported"):
        expand([f"gs://{bucket.name}/u/brotli.csv"], client)
    (tmp_path / "z.csv").write_bytes(b"\x28\xb5\x2f\xfd" + b"\0" * 20)
    info = expand([str(tmp_path / "z.csv")])[0][0]
    with pytest.raises(SourceError, match="zstd compression is not supported") as e:
        open_source(info)
    assert e.value.hint is not None and "zstd -dc" in e.value.hint


class TranscodingBlob:
    """Serves an object with Content-Encoding: gzip the way GCS does: decompressed, unless the
    caller asks for the raw bytes (the emulator never transcodes)."""

    def __init__(self, blob: Any) -> None:
        self.blob = blob
        self.calls: list[dict[str, Any]] = []

    def download_to_file(self, sink: Any, **kw: Any) -> None:
        self.calls.append(kw)
        if kw.get("raw_download"):
            self.blob.download_to_file(sink, **kw)
        else:
            whole = gzip.decompress(self.blob.download_as_bytes())
            sink.write(whole[kw["start"] : kw["end"] + 1])


class WrapClient:
    """A real client whose blobs pass through ``wrap`` (to inject faults)."""

    def __init__(self, client: Any, wrap: Any) -> None:
        self.client, self.wrap = client, wrap

    def bucket(self, name: str) -> Any:
        real = self.client.bucket(name)
        outer = self

        class Bucket:
            def blob(self, blob_name: str) -> Any:
                return outer.wrap(real.blob(blob_name))

        return Bucket()


def test_reads_raw_bytes_despite_decompressive_transcoding(bucket: Any, client: Any) -> None:
    put(bucket, "t/enc.csv", gzip.compress(CSV), content_encoding="gzip")
    info = expand([f"gs://{bucket.name}/t/enc.csv"], client)[0][0]
    blobs: list[TranscodingBlob] = []

    def wrap(blob: Any) -> Any:
        blobs.append(TranscodingBlob(blob))
        return blobs[-1]

    assert read_all(info, WrapClient(client, wrap), chunk_size=16) == CSV
    calls = blobs[0].calls
    assert len(calls) > 1
    assert all(c["raw_download"] and c["if_generation_match"] == info.generation for c in calls)


# -- streaming ---------------------------------------------------------------------------------


def test_object_larger_than_chunk_is_exact(bucket: Any, client: Any) -> None:
    rng = random.Random(3)
    data = bytes(rng.getrandbits(8) for _ in range(300_000)).replace(b"\x1f", b"x")
    put(bucket, "big.bin", data)
    info = expand([f"gs://{bucket.name}/big.bin"], client)[0][0]
    assert info.size is not None
    with open_source(info, storage_client=client, chunk_size=64 << 10) as f:
        parts = []
        while chunk := f.read(10_000):
            parts.append(chunk)
            assert f.compressed_position() <= info.size  # never past the stored size
        assert f.compressed_position() == info.size == len(data)
        assert f.tell() == len(data)
    assert b"".join(parts) == data


def test_quoted_newline_straddling_chunks_through_pyarrow(bucket: Any, client: Any) -> None:
    rows = [
        (i, f'line one {i}\nline two, with comma\r\n"quoted"' * (i % 3 + 1)) for i in range(200)
    ]
    body = "id,text\n" + "\n".join(
        f'{i},"{t.replace(chr(34), chr(34) * 2)}"' for i, t in rows
    )  # no final newline
    data = body.encode()
    put(bucket, "q/quoted.csv", data)
    put(bucket, "q/quoted.csv.gz", gzip.compress(data))
    for info in expand([f"gs://{bucket.name}/q/"], client)[0]:
        with open_source(info, storage_client=client, chunk_size=7) as f:
            reader = pc.open_csv(
                f,
                read_options=pc.ReadOptions(block_size=512, use_threads=False),
                parse_options=pc.ParseOptions(newlines_in_values=True),
            )
            table = reader.read_all()
        assert table.column("id").to_pylist() == [i for i, _ in rows]
        assert table.column("text").to_pylist() == [t for _, t in rows]


def test_quoted_crlf_at_every_block_boundary(tmp_path: Path) -> None:
    """Arrow drops the LF of a quoted CRLF split across two reads (apache/arrow#51368); the
    stream never ends a read on a CR, so every split position parses right."""
    value = "x\r\ny"
    for pad in range(12):  # moves the CR across a 16-byte block end (row 0 stays < 16 bytes)
        data = b"a,b\n0," + b"p" * pad + b'\n1,"' + value.encode() + b'"\n' + b"2,z\r\n" * 30
        path = tmp_path / f"crlf{pad}.csv"
        path.write_bytes(data)
        info = expand([str(path)])[0][0]
        with open_source(info) as f:
            table = pc.open_csv(
                f,
                read_options=pc.ReadOptions(block_size=16, use_threads=False),
                parse_options=pc.ParseOptions(newlines_in_values=True),
            ).read_all()
        assert table.column("b").to_pylist() == ["p" * pad, value] + ["z"] * 30
        with open_source(info) as f:
            parts = iter(lambda: f.read(16), b"")
            assert b"".join(parts) == data
        with open_source(info) as f:
            assert all(not p.endswith(b"\r") for p in iter(lambda: f.read(16), b""))


def test_stdin(tmp_path: Path) -> None:
    sources, _ = expand(["-"])
    assert sources == [SourceInfo(uri="-", kind="stdin", name="-")]
    assert total_bytes(sources) == 0
    assert read_all(sources[0], stdin=io.BytesIO(CSV)) == CSV
    assert read_all(sources[0], stdin=io.BytesIO(gzip.compress(CSV))) == CSV


def test_source_info_round_trips_through_json(bucket: Any, client: Any, tmp_path: Path) -> None:
    put(bucket, "r/a.csv.gz", gzip.compress(b"a\n1\n"))
    (tmp_path / "l.csv").write_bytes(b"a\n1\n")
    sources, _ = expand([f"gs://{bucket.name}/r/a.csv.gz", str(tmp_path / "l.csv"), "-"], client)
    again = [
        SourceInfo.from_dict(d) for d in json.loads(json.dumps([s.to_dict() for s in sources]))
    ]
    assert again == sources
    assert all(a.same_content(b) for a, b in zip(again, sources))
    with pytest.raises(SourceError, match="unknown kind"):
        SourceInfo.from_dict({"uri": "x", "kind": "s3"})


# -- changes and faults while reading ----------------------------------------------------------


def test_object_deleted_mid_read(bucket: Any, client: Any) -> None:
    data = b"id\n" + b"".join(b"%d\n" % i for i in range(20_000))
    blob = put(bucket, "d/gone.csv", data)
    info = expand([f"gs://{bucket.name}/d/gone.csv"], client)[0][0]
    with open_source(info, storage_client=client, chunk_size=4096) as f:
        reader = pc.open_csv(f, read_options=pc.ReadOptions(block_size=4096, use_threads=False))
        reader.read_next_batch()
        blob.delete()
        with pytest.raises(SourceError) as e:
            reader.read_all()
    assert f"gs://{bucket.name}/d/gone.csv was deleted or replaced while it was being read" in str(
        e.value
    )
    # Deleted between listing and opening:
    with pytest.raises(SourceError, match="deleted or replaced after it was listed"):
        open_source(info, storage_client=client)


def test_object_rewritten_mid_read_is_detected_without_preconditions(
    bucket: Any, client: Any
) -> None:
    """The emulator ignores ifGenerationMatch: the length checks still catch a rewrite."""
    data = b"x" * 50_000
    for new in (b"y" * 20_000, b"y" * 80_000):
        put(bucket, "w/obj.csv", data)
        info = expand([f"gs://{bucket.name}/w/obj.csv"], client)[0][0]
        with open_source(info, storage_client=client, chunk_size=16_384) as f:
            f.read(1000)
            put(bucket, "w/obj.csv", new)
            with pytest.raises(SourceError, match="changed while it was being read"):
                f.read()


class FaultBlob:
    """Fails the n-th ranged read with ``exc`` (and counts the calls)."""

    def __init__(self, blob: Any, fail_at: int, exc: BaseException) -> None:
        self.blob, self.fail_at, self.exc, self.calls = blob, fail_at, exc, 0

    def download_to_file(self, sink: Any, **kw: Any) -> None:
        self.calls += 1
        if self.calls == self.fail_at:
            raise self.exc
        self.blob.download_to_file(sink, **kw)


@pytest.mark.parametrize(
    "exc,message,transient",
    [
        (gexc.PreconditionFailed("conditionNotMet"), "was replaced while it was being read", False),
        (gexc.Forbidden("caller does not have storage.objects.get"), "permission denied", False),
        (gexc.ServiceUnavailable("backend"), "network failure reading", True),
        (
            gexc.RetryError("Timeout of 120.0s exceeded", ConnectionError("reset")),
            r"network failure reading .* \(gave up after retrying\)",
            True,
        ),
    ],
)
def test_read_faults_become_source_errors(
    bucket: Any, client: Any, exc: BaseException, message: str, transient: bool
) -> None:
    put(bucket, "f/a.csv", b"a\n" * 10_000)
    info = expand([f"gs://{bucket.name}/f/a.csv"], client)[0][0]
    wrapped = WrapClient(client, lambda b: FaultBlob(b, 2, exc))
    with open_source(info, storage_client=wrapped, chunk_size=1024) as f:
        f.read(100)
        with pytest.raises(SourceError, match=message) as e:
            f.read()
    assert e.value.transient is transient
    assert "\n" not in str(e.value)


def test_network_failure_is_retried_then_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{free_port()}")
    dead = make_storage_client()
    with pytest.raises(SourceError) as e:
        expand_sources(["gs://b/x/"], storage_client=dead, retry=FAST_RETRY)
    assert e.value.transient
    assert str(e.value).startswith("network failure listing gs://b/x/ (gave up after retrying)")
    info = SourceInfo(uri="gs://b/x.csv", kind="gcs", bucket="b", name="x.csv", size=10)
    with pytest.raises(SourceError, match="network failure reading gs://b/x.csv"):
        open_source(info, storage_client=dead, retry=FAST_RETRY)


def test_local_file_changed_after_listing_or_while_reading(tmp_path: Path) -> None:
    p = tmp_path / "grow.csv"
    p.write_bytes(b"a\n" * 100_000)
    info = expand([str(p)])[0][0]
    with open_source(info) as f:
        f.read(10)
        with open(p, "ab") as out:
            out.write(b"b\n")
        with pytest.raises(SourceError, match="changed while it was being read"):
            f.read()
    with pytest.raises(SourceError, match="changed since it was listed"):
        open_source(info)


def test_local_bytes_exact_and_missing_at_open(tmp_path: Path) -> None:
    data = b'a,b\r\n1,"x\r\ny"\n2,3'  # CRLF, CR inside quotes, no final newline
    p = tmp_path / "exact.csv"
    p.write_bytes(data)
    info = expand([str(p)])[0][0]
    assert read_all(info) == data
    with open_source(info) as f:
        assert f.readline() == b"a,b\r\n"
        assert f.read1(3) == b'1,"'
    p.unlink()
    with pytest.raises(SourceError, match="no such file"):
        open_source(info)


# -- memory ------------------------------------------------------------------------------------


MEASURE = r"""
import gc, json, os, resource, sys, threading, time, tracemalloc
sys.path.insert(0, sys.argv[1])
import pyarrow as pa, pyarrow.csv as pc
from loader.source import expand_sources, make_storage_client, open_source

def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))

client = make_storage_client()
sources, _ = expand_sources([sys.argv[2]], storage_client=client)
peak = [rss()]
base = peak[0]
done = threading.Event()
def sample():
    while not done.is_set():
        peak[0] = max(peak[0], rss())
        time.sleep(0.002)
t = threading.Thread(target=sample, daemon=True)
t.start()
tracemalloc.start()
rows = 0
with open_source(sources[0], storage_client=client, chunk_size=int(sys.argv[3])) as f:
    reader = pc.open_csv(f, read_options=pc.ReadOptions(block_size=1 << 20))
    for batch in reader:
        rows += batch.num_rows
        peak[0] = max(peak[0], rss())
    # Drop the reader while Arrow is alive: one left for interpreter teardown can abort there
    # ("terminate called without an active exception").
    del reader, batch
    gc.collect()
done.set()
t.join()
print(json.dumps({
    "size": sources[0].size, "rows": rows, "rss_base": base, "rss_peak_growth": peak[0] - base,
    "tracemalloc_peak": tracemalloc.get_traced_memory()[1],
    "arrow_pool_peak": pa.default_memory_pool().max_memory(),
}), flush=True)
# The figures are out. Skip interpreter teardown: with Arrow's threads still winding down it
# can abort ("terminate called without an active exception"), the open problem noted for
# test_parse's abandoned-reader test, and this test measures memory, not exit.
os._exit(0)
"""


def _write_csv(path: Path, target_bytes: int) -> int:
    block = "".join(
        f'{i},customer-{i:08d},"note for {i}, with a comma",{i * 0.25}\n' for i in range(10_000)
    ).encode()
    repeats = -(-target_bytes // len(block))  # ceil: at least target_bytes
    with open(path, "wb") as f:
        f.write(b"id,name,note,amount\n")
        for _ in range(repeats):
            f.write(block)
    return repeats * 10_000


@pytest.mark.slow
def test_peak_memory_is_bounded_on_a_large_object(tmp_path: Path) -> None:
    """Stream a ~300 MB and a ~30 MB object through open_source + pyarrow in a fresh process:
    the large one must not cost more memory than the small one plus slack."""
    results = {}
    with gcs_emulator(data_dir=str(tmp_path / "gcs")) as url, pytest.MonkeyPatch.context() as mp:
        mp.setenv("STORAGE_EMULATOR_HOST", url)
        client = make_storage_client()
        bucket = client.create_bucket("mem")
        for label, size in (("small", 30 << 20), ("large", 300 << 20)):
            path = tmp_path / f"{label}.csv"
            rows = _write_csv(path, size)
            bucket.blob(f"{label}.csv").upload_from_filename(str(path))
            path.unlink()
            out = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    MEASURE,
                    str(PACKAGE_PARENT),
                    f"gs://mem/{label}.csv",
                    str(8 << 20),
                ],
                capture_output=True,
                text=True,
                env=dict(os.environ),
            )
            assert out.returncode == 0, f"exit {out.returncode}:\n{out.stderr[-4000:]}"
            results[label] = json.loads(out.stdout)
            assert results[label]["rows"] == rows
    print(json.dumps(results, indent=1))
    small, large = results["small"], results["large"]
    assert large["size"] >= 300 << 20
    # Measured (8 MiB chunks, 2 CPUs): RSS grows ~60-75 MB for both sizes, mostly Arrow's
    # readahead blocks and allocator arenas; one chunk buffer is 8 MiB. The bounds leave room
    # for allocator noise; what matters is that 10x the data costs no more memory.
    assert large["rss_peak_growth"] < 128 << 20 < large["size"] // 2
    assert large["rss_peak_growth"] < small["rss_peak_growth"] + (32 << 20)
    assert large["tracemalloc_peak"] < 64 << 20
    assert large["arrow_pool_peak"] < 64 << 20


# -- pipes -------------------------------------------------------------------------------------


def test_a_named_pipe_is_streamed_not_skipped_as_empty(tmp_path: Path) -> None:
    """A FIFO (like <(zcat x.gz) or /dev/stdin) has size 0: it must be read like -."""
    import threading

    from loader.source import expand_sources, open_source

    fifo = tmp_path / "rows.csv"
    os.mkfifo(fifo)
    data = gzip.compress(b"Id,V\n1,a\n2,b\n")

    def write() -> None:
        with open(fifo, "wb") as f:
            f.write(data)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    infos, notes = expand_sources([str(fifo)])
    assert notes == [] and [i.kind for i in infos] == ["pipe"]
    with open_source(infos[0]) as stream:
        assert stream.read() == b"Id,V\n1,a\n2,b\n"  # gzip found by its magic bytes
    writer.join(5)
    assert not writer.is_alive()


def test_a_process_substitution_is_streamed(tmp_path: Path) -> None:
    """<(zcat x.csv.gz) as a shell passes it: /dev/fd/N, a pipe."""
    gz = tmp_path / "x.csv.gz"
    gz.write_bytes(gzip.compress(b"Id,Name,Amount,At,Ok\n1,a,1,,true\n2,b,2,,false\n"))
    with subprocess.Popen(["gzip", "-dc", str(gz)], stdout=subprocess.PIPE) as zcat:
        assert zcat.stdout is not None
        fd = zcat.stdout.fileno()
        code = (
            "import sys; from loader.source import expand_sources, open_source\n"
            f"infos, notes = expand_sources(['/dev/fd/{fd}'])\n"
            "print(infos[0].kind, notes, open_source(infos[0]).read().count(b'\\n'))\n"
        )
        p = subprocess.run(
            [sys.executable, "-c", code],
            pass_fds=(fd,),
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
        )
    assert p.stdout.split() == ["pipe", "[]", "3"], p.stderr


def test_an_emulator_address_without_a_scheme_is_read_as_http(
    gcs_url: str, bucket: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """STORAGE_EMULATOR_HOST=host:port (as SPANNER_EMULATOR_HOST is written) passed the
    loader's own check, then the client failed: "No connection adapters were found", exit 1
    (a tryout)."""
    put(bucket, "a.csv", b"Id\n1\n")
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_url.split("://", 1)[1])
    client = make_storage_client()
    (info,), _ = expand([f"gs://{bucket.name}/a.csv"], client)
    assert read_all(info, client) == b"Id\n1\n"
