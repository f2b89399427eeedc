"""No internal errors for bad input, as a property: the CLI driven with generated hostile inputs.

Each example runs the real command line in a subprocess against the session's emulator and
asserts what a user is promised (README "Exit codes", "Rejected rows"):

* the process ends within a time limit, with a documented exit code;
* never a traceback, never the "this is unexpected" path;
* a failure is one ``error:`` line with a ``hint:``;
* nothing is lost silently: every source record is written or in the reject file, and for
  generated CSVs whose bad records are known, the table holds exactly the good rows and the
  reject file names exactly the bad records' lines.

The number of examples is bounded so the module stays at about a minute; Hypothesis prints the
seed (``--hypothesis-seed``) and the failing example when a property breaks.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pytest
from conftest import ROOT, read_table
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.slow

K_DDL = "CREATE TABLE K (Id INT64 NOT NULL, V STRING(MAX)) PRIMARY KEY (Id)"
TIME_LIMIT = 90.0
"""Seconds a single command may take before it counts as a hang (a small file, the emulator)."""
DOCUMENTED = {0, 2, 3, 4}
"""Exit codes these inputs may end with: loaded, usage error, rows rejected, too many rejects
(1 is a failure of Spanner or the network, 5 a signal, 6 verify: none of them is provoked)."""

COMMON = settings(
    deadline=None,
    derandomize=False,
    print_blob=True,
    # each example is a process and a load: no shrinking, the failing example is shown as drawn
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str


def cli(
    args: list[str], cwd: Path, env: Optional[dict[str, str]] = None, stdin: bytes = b""
) -> Run:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT)
    e.update(env or {})
    try:
        p = subprocess.run(
            [sys.executable, "-m", "loader", *args],
            input=stdin,
            capture_output=True,
            cwd=cwd,
            env=e,
            timeout=TIME_LIMIT,
        )
    except subprocess.TimeoutExpired as t:
        pytest.fail(f"no answer within {TIME_LIMIT:.0f} s: spanner-loader {' '.join(args)}\n{t}")
    return Run(
        p.returncode,
        p.stdout.decode("utf-8", "replace"),
        p.stderr.decode("utf-8", "replace"),
    )


def assert_no_internal_error(r: Run, args: list[str], allowed: set[int] = DOCUMENTED) -> None:
    said = f"spanner-loader {' '.join(args)}\nexit {r.code}\nstderr:\n{r.stderr}\nstdout:\n{r.stdout[:2000]}"
    assert "Traceback" not in r.stderr + r.stdout, said
    assert "this is unexpected" not in r.stderr, said
    assert r.code in allowed, said
    if r.code not in (0, 3):
        lines = r.stderr.splitlines()
        errors = [ln for ln in lines if ln.startswith("error: ")]
        assert len(errors) == 1, said
        assert any(ln.startswith("hint: ") for ln in lines), said


def reject_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]


# --------------------------------------------------------------------------------------------
# generated CSVs whose bad records are known

_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\r"),
    max_size=12,
)
"""Values of V; no lone carriage return (whether it counts as a line end inside quotes is
the dialect's business, not this property's)."""


@st.composite
def good_record(draw: Any, key: int) -> tuple[str, str]:
    text = draw(_TEXT)
    if draw(st.booleans()) or any(c in text for c in ',"\r\n') or text == "":
        field = '"' + text.replace('"', '""') + '"'
    else:
        field = text
    return f"{key},{field}", text


BAD_RECORDS = [
    ("notanumber,x", "not an INT64"),
    ("1.5,x", "not an INT64"),
    ("99999999999999999999,x", "out of range"),
    ("7,x,extra", "field count"),
    ("8", "field count"),
    (",x", "NULL"),
]


@st.composite
def csv_file(draw: Any) -> tuple[bytes, dict[int, str], set[int], bool]:
    """(file bytes, good rows by key, line numbers of the bad records, ends in an open quote)."""
    n = draw(st.integers(min_value=0, max_value=12))
    keys = draw(st.lists(st.integers(1, 10**6), min_size=n, max_size=n, unique=True))
    lines = ["Id,V"]
    good: dict[int, str] = {}
    bad: set[int] = set()
    line_no = 1
    for key in keys:
        if draw(st.integers(0, 4)) == 0:
            text, _ = draw(st.sampled_from(BAD_RECORDS))
            lines.append(text)
            bad.add(line_no + 1)
            line_no += 1
        else:
            record, value = draw(good_record(key))
            lines.append(record)
            good[key] = value
            line_no += 1 + record.count("\n")
    open_quote = draw(st.integers(0, 5)) == 0
    if open_quote:
        # a quote opened in the last line and never closed: the record is bad (one that
        # swallows lines after it refuses the source: tests/test_parse_open_quote.py)
        lines.append(f'{10**6 + 1},"never closed')
        bad.add(line_no + 1)
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    body = newline.join(lines)
    if draw(st.booleans()):
        body += newline
    return body.encode("utf-8"), good, bad, open_quote


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("hostile")
    (d / "k.sql").write_text(K_DDL + ";\n", encoding="utf-8")
    return d


def fresh_db() -> str:
    return "h" + uuid.uuid4().hex[:12]


@settings(COMMON, max_examples=12)
@given(data=csv_file(), via=st.sampled_from(["file", "stdin", "gzip"]))
def test_generated_csv_loads_exactly_the_good_rows_and_rejects_the_bad_lines(
    spanner_emulator: str, spanner_client: Any, workdir: Path, data: Any, via: str
) -> None:
    import gzip

    body, good, bad, _ = data
    db = fresh_db()
    rejects = workdir / f"{db}.rejects.jsonl"
    if via == "stdin":
        source, stdin = "-", body
    else:
        path = workdir / (f"{db}.csv.gz" if via == "gzip" else f"{db}.csv")
        path.write_bytes(gzip.compress(body) if via == "gzip" else body)
        source, stdin = str(path), b""
    args = [
        "load",
        source,
        "--table",
        "K",
        "--emulator",
        "--ddl",
        str(workdir / "k.sql"),
        "--database",
        db,
        "--max-bad-rows",
        "1000",
        "--rejects",
        str(rejects),
        "--no-state",
        "--json",
        "-q",
    ]
    r = cli(args, workdir, stdin=stdin)
    assert_no_internal_error(r, args)
    said = f"exit {r.code}\n{r.stderr}\n{r.stdout[:2000]}\n{body!r}"
    assert r.code == (3 if bad else 0), said
    database = spanner_client.instance("test-instance").database(db)
    rows = dict(read_table(database, "K", ["Id", "V"]))
    assert rows == good, said
    got = {x["line"] for x in reject_lines(rejects)}
    assert got == bad, said
    for x in reject_lines(rejects):
        assert x["source"] and x["reason"], x


# --------------------------------------------------------------------------------------------
# random bytes: whatever they are, an answer


@settings(COMMON, max_examples=12)
@given(
    body=st.one_of(
        st.binary(max_size=300),
        st.lists(
            st.sampled_from([b"Id", b"V", b",", b'"', b"\n", b"\r", b"1", b"x", b"\\", b"\xff"]),
            max_size=60,
        ).map(b"".join),
    ),
    header_width=st.sampled_from([None, 0, 1, 3, 1100, 5000]),
)
def test_random_bytes_end_in_a_documented_answer(
    spanner_emulator: str, workdir: Path, body: bytes, header_width: Optional[int]
) -> None:
    if header_width is not None:
        body = b",".join(b"c%d" % i for i in range(header_width)) + b"\n" + body
    path = workdir / f"{uuid.uuid4().hex[:8]}.csv"
    path.write_bytes(body)
    rejects = path.with_suffix(".rejects.jsonl")
    args = [
        "validate",
        str(path),
        "--table",
        "K",
        "--emulator",
        "--ddl",
        str(workdir / "k.sql"),
        "--database",
        "hbytes",
        "--max-bad-rows",
        "100000",
        "--rejects",
        str(rejects),
        "--json",
        "-q",
    ]
    r = cli(args, workdir)
    assert_no_internal_error(r, args)
    if r.code in (0, 3):
        report = json.loads(r.stdout)
        read = sum(t["rows_read"] for t in report["tables"])
        rejected = len(reject_lines(rejects))
        assert rejected == sum(t["rows_rejected"] for t in report["tables"]), r.stdout
        assert all(x.get("line") for x in reject_lines(rejects)), reject_lines(rejects)
        assert read >= rejected


# --------------------------------------------------------------------------------------------
# option combinations: valid and invalid values

OPTION_VALUES: dict[str, list[Optional[str]]] = {
    "--delimiter": [None, ",", "\\t", ";", "", "ab"],
    "--quote": [None, '"', "'", ""],
    "--escape": [None, "\\\\", ""],
    "--dialect": [None, "csv", "mysql", "postgres", "tsv", "nonsense"],
    "--header/--no-header": [None, "--header", "--no-header"],
    "--columns": [None, "Id,V", "Id", "Id,V,W", ",", "V,Id"],
    "--skip-rows": [None, "0", "1", "50", "-1", "x"],
    "--encoding": [None, "utf-8", "latin-1", "cp1252", "not-an-encoding"],
    "--null-marker": [None, "NULL", "\\N", ""],
    "--map": [None, "V=V", "V=Nope", "Nope=V", "=", "V"],
    "--ignore": [None, "V", "Id", "Nope"],
    "--mode": [None, "upsert", "insert", "replace", "update", "merge"],
    "--max-mutations": [None, "1", "2", "20000", "0", "80001", "-5", "lots"],
    "--max-batch-bytes": [None, "1", "1KiB", "4MiB", "101MiB", "4 parsecs"],
    "--max-batch-rows": [None, "1", "0", "-1"],
    "--buffer-size": [None, "64KiB", "1", "1GiB", "zz"],
    "--block-size": [None, "4KiB", "1", "1MiB"],
    "--concurrency": [None, "1", "2", "0", "-3", "many"],
    "--parallel-tables": [None, "1", "4", "0", "lots"],
    "--max-retry-time": [None, "5", "0", "-1", "nan"],
    "--max-bad-rows": [None, "0", "3", "-1", "1000"],
    "--priority": [None, "low", "urgent"],
    "--max-commit-delay": [None, "0", "100", "501", "-1"],
    "--max-rows-per-second": [None, "1000000", "0", "-2"],
    "--timezone": [None, "UTC", "Europe/Berlin", "Mars/Olympus"],
    "--timestamp-format": [None, "%Y-%m-%d", "%Q"],
    "--bytes-encoding": [None, "base64", "hex", "rot13"],
    "--commit-timestamp": [None, "V", "Nope"],
    "--state": [None, "--no-state", "--restart", "--incremental"],
    "--table": ["K", "K", "K", "k", "Nope", ""],
}


def option_args(choice: dict[str, Optional[str]]) -> list[str]:
    out: list[str] = []
    for name, value in choice.items():
        if value is None:
            continue
        if name in ("--header/--no-header", "--state"):
            out.append(value)
        else:
            out += [name, value]
    return out


@settings(COMMON, max_examples=25)
@given(
    choice=st.fixed_dictionaries({k: st.sampled_from(v) for k, v in OPTION_VALUES.items()}),
    command=st.sampled_from(["load", "validate", "verify"]),
)
def test_option_combinations_end_in_a_documented_answer(
    spanner_emulator: str, workdir: Path, choice: dict[str, Optional[str]], command: str
) -> None:
    path = workdir / "options.csv"
    if not path.exists():
        path.write_text('Id,V\n1,a\n2,"b, c"\n3,NULL\nx,bad\n4\n', encoding="utf-8")
    extra = option_args(choice)
    if command == "verify":
        # verify takes the input options only
        keep = {"--state", "--mode", "--priority", "--max-commit-delay", "--max-rows-per-second"}
        keep |= {"--max-mutations", "--max-batch-bytes", "--max-batch-rows", "--concurrency"}
        keep |= {"--buffer-size", "--block-size", "--max-retry-time", "--parallel-tables"}
        extra = option_args({k: v for k, v in choice.items() if k not in keep})
    db = fresh_db()
    args = [
        command,
        str(path),
        "--emulator",
        "--ddl",
        str(workdir / "k.sql"),
        "--database",
        db,
        "--rejects" if command != "verify" else "--json",
        *([str(workdir / f"{db}.rejects.jsonl")] if command != "verify" else []),
        *extra,
    ]
    if command != "verify":
        args.append("-q")
    r = cli(args, workdir)
    if command == "verify" and r.code == 6:
        return  # a table that differs from the source is verify's documented answer
    assert_no_internal_error(r, args)


# --------------------------------------------------------------------------------------------
# environment: where the emulator and storage hosts point


def _closed_port() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"127.0.0.1:{port}"


@settings(COMMON, max_examples=8)
@given(
    spanner=st.sampled_from(["closed", "not-a-host:1", "garbage", "", "127.0.0.1:0", "ok"]),
    storage=st.sampled_from([None, "closed", "http://not-a-host:1", "nonsense"]),
    gs=st.booleans(),
)
def test_bad_endpoints_give_a_one_line_error_in_bounded_time(
    spanner_emulator: str,
    workdir: Path,
    spanner: str,
    storage: Optional[str],
    gs: bool,
) -> None:
    env = {
        "SPANNER_EMULATOR_HOST": {"closed": _closed_port(), "ok": spanner_emulator}.get(
            spanner, spanner
        )
    }
    if storage is not None:
        env["STORAGE_EMULATOR_HOST"] = {"closed": "http://" + _closed_port()}.get(storage, storage)
    path = workdir / "env.csv"
    path.write_text("Id,V\n1,a\n", encoding="utf-8")
    source = "gs://no-such-bucket/env.csv" if gs else str(path)
    args = [
        "load",
        source,
        "--table",
        "K",
        "--emulator",
        "--ddl",
        str(workdir / "k.sql"),
        "--database",
        fresh_db(),
        "--no-state",
        "--rejects",
        str(workdir / "env.rejects.jsonl"),
        "--max-retry-time",
        "5",
        "-q",
    ]
    r = cli(args, workdir, env=env)
    # an endpoint that does not answer is a configuration error (2) or, for a gs:// source
    # whose reads outlast --max-retry-time, a failure (1); either way one line and a hint
    assert_no_internal_error(r, args, allowed={0, 1, 2})


def test_a_closed_or_full_standard_output_does_not_fail_a_finished_load(
    spanner_emulator: str, workdir: Path
) -> None:
    """A tryout: `load ... >&-` wrote its rows, then ended with an AttributeError's text and
    exit 1 (a scheduler counts a good load as failed); into /dev/full, "OSError ... this is
    unexpected"."""
    src = workdir / "closed.csv"
    src.write_text("Id,V\n1,a\n")
    args = ["load", str(src), "--table", "K", "--emulator", "--ddl", str(workdir / "k.sql")]
    args += ["--database", fresh_db(), "--no-state", "-q"]
    e = {**os.environ, "PYTHONPATH": str(ROOT)}
    base = [sys.executable, "-m", "loader", *args]
    closed = subprocess.run(
        base,
        stdout=None,
        stderr=subprocess.PIPE,
        env=e,
        cwd=workdir,
        stdin=subprocess.DEVNULL,
        close_fds=True,
        pass_fds=(),
        preexec_fn=lambda: os.close(1),
        timeout=TIME_LIMIT,
    )
    assert closed.returncode == 0 and b"Traceback" not in closed.stderr, closed.stderr
    with open("/dev/full", "w") as full:
        p = subprocess.run(
            base, stdout=full, stderr=subprocess.PIPE, env=e, cwd=workdir, timeout=TIME_LIMIT
        )
    assert p.returncode == 0, p.stderr
    assert b"warning: cannot write the report to standard output" in p.stderr
    assert b"this is unexpected" not in p.stderr


def test_validate_of_standard_input_is_not_told_a_load_would_find_it_loaded(
    spanner_emulator: str, workdir: Path
) -> None:
    """A tryout: `validate -` after `load -` noted "an earlier run of this job loaded it: the
    same load ... finds it loaded", where a load of standard input reads it whole each time."""
    db = fresh_db()
    args = ["--table", "K", "--emulator", "--ddl", str(workdir / "k.sql"), "--database", db]
    first = cli(["load", "-", *args], workdir, stdin=b"Id,V\n1,a\n")
    assert first.code == 0, first.stderr
    again = cli(["validate", "-", *args], workdir, stdin=b"Id,V\n1,a\n")
    assert again.code == 0 and "loaded it" not in again.stderr + again.stdout, again.stderr
