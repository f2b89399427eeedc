"""The command line as a user meets it: one-line errors with hints, exit codes, help, reports.

Commands run in a subprocess (``python -m loader``), as a user runs them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
from conftest import EXAMPLES, ROOT, SHOP_DDL

from loader.cli import cli


def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Any:
    e = dict(os.environ)
    e.update(env or {})
    e["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "loader", *args],
        capture_output=True,
        text=True,
        env=e,
        cwd=cwd or ROOT,
        timeout=300,
    )


def emu(database: str) -> list[str]:
    return ["--emulator", "--database", database, "--ddl", str(SHOP_DDL)]


def assert_clean_error(p: Any, code: int, *fragments: str) -> None:
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    assert p.stderr.startswith("error: ") or p.stderr.startswith("Error: "), p.stderr
    for f in fragments:
        assert f in p.stderr, p.stderr


def test_every_command_documents_every_option_with_an_example() -> None:
    import click

    def walk(cmd: click.Command, path: list[str]) -> None:
        ctx = click.Context(cmd, info_name=" ".join(path))
        text = cmd.get_help(ctx)
        assert "Example" in text, f"{path} has no example"
        for p in cmd.params:
            if isinstance(p, click.Option) and not p.hidden:
                assert p.help, f"{path} option {p.opts} has no help"
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                if isinstance(sub, click.Group):
                    for n2, s2 in sub.commands.items():
                        walk(s2, [*path, name, n2])
                else:
                    walk(sub, [*path, name])

    walk(cli, ["spanner-loader"])


def test_help_runs() -> None:
    for args in (["--help"], ["load", "--help"], ["validate", "--help"], ["verify", "--help"]):
        p = run(*args)
        assert p.returncode == 0 and "Usage:" in p.stdout


def test_bad_flag_is_usage_error() -> None:
    p = run("load", "x.csv", "--table", "T", "--concurrency", "lots")
    assert p.returncode == 2 and "Traceback" not in p.stderr and "concurrency" in p.stderr


def test_an_empty_delimiter_is_refused(tmp_path: Path) -> None:
    """A tryout: `--delimiter ''` loaded with a comma, without a word."""
    src = tmp_path / "a.csv"
    src.write_text("Id\n1\n")
    target = ["--project", "p", "--instance", "i", "--database", "d"]
    r = run("validate", str(src), "--table", "T", *target, "--delimiter", "")
    assert r.returncode == 2, r.stderr
    assert "error: --delimiter cannot be empty" in r.stderr and "Traceback" not in r.stderr


def test_missing_target_says_which_and_how(tmp_path: Path) -> None:
    p = run(
        "load",
        str(EXAMPLES / "Customers.csv"),
        "--table",
        "Customers",
        env={
            "SPANNER_PROJECT": "",
            "SPANNER_INSTANCE": "",
            "SPANNER_DATABASE": "",
            "GOOGLE_CLOUD_PROJECT": "",
        },
    )
    assert_clean_error(p, 2, "missing --project, --instance, --database", "hint:")


def test_unknown_table_lists_existing(spanner_emulator: str) -> None:
    p = run("load", str(EXAMPLES / "Customers.csv"), "--table", "Custmers", *emu("clidb1"))
    assert_clean_error(p, 2, "table 'Custmers' does not exist", "existing tables:", "Customers")


def test_unknown_table_hint_leaves_out_the_loaders_own_table(spanner_emulator: str) -> None:
    p = run("load", str(EXAMPLES / "Products.csv"), "--table", "Products", *emu("clinostate"))
    assert p.returncode == 0, p.stderr  # the checkpoint table now exists beside the shop's
    p = run("load", str(EXAMPLES / "Products.csv"), "--table", "Prodcts", *emu("clinostate"))
    assert_clean_error(p, 2, "existing tables: Customers, OrderItems, Orders, Products")
    assert "SpannerLoaderState" not in p.stderr


def test_unknown_table_in_an_empty_database_says_to_check_the_name(
    spanner_emulator: str,
) -> None:
    """--emulator creates a misspelled database, empty: "existing tables: (none)" gave no lead."""
    p = run(
        "load",
        str(EXAMPLES / "Products.csv"),
        "--table",
        "Products",
        "--emulator",
        "--database",
        "shpo",
    )
    assert_clean_error(
        p,
        2,
        "table 'Products' does not exist",
        "the database has no tables: "
        "check the database name, or create them first (--ddl with the emulator)",
    )


def test_a_load_that_fails_before_its_first_table_still_writes_the_report(
    spanner_emulator: str, tmp_path: Path
) -> None:
    """A script that asked for the report (--json, --report) gets it, with the error and the
    exit code, when the load stops before any table: here a table that does not exist."""
    out = tmp_path / "r.json"
    p = run(
        "load",
        str(EXAMPLES / "Customers.csv"),
        "--table",
        "Custmers",
        *emu("clidb1"),
        "--json",
        "--report",
        str(out),
    )
    assert_clean_error(p, 2, "table 'Custmers' does not exist")
    for doc in (json.loads(p.stdout), json.loads(out.read_text())):
        assert doc["status"] == "failed" and doc["exit_code"] == 2
        assert "table 'Custmers' does not exist" in doc["error"] and doc["tables"] == []
        # the hint the stderr line gives, for a script too (a tryout: only verify had it)
        assert "Customers" in doc["hint"] and doc["hint"] in p.stderr


def test_a_load_stopped_by_a_bug_still_writes_the_report(
    spanner_emulator: str, tmp_path: Path
) -> None:
    """An unexpected error (a bug: a generated key column once raised KeyError) was one line
    on stderr, as it should be, but --json printed nothing and --report wrote no file."""
    out = tmp_path / "r.json"
    src = tmp_path / "k.csv"
    src.write_text("Id\n1\n")
    bug = (
        "import sys, loader.pipeline as p\n"
        "def boom(self, given=None): raise KeyError('Field does not exist')\n"
        "p._Run.__call__ = boom\n"
        "sys.argv[0] = 'spanner-loader'\n"
        "from loader.cli import main\n"
        "main()\n"
    )
    args = ["load", str(src), "--table", "K", *emu("clidb1"), "--json", "--report", str(out)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run(
        [sys.executable, "-c", bug, *args], capture_output=True, text=True, env=env, timeout=120
    )
    assert_clean_error(p, 1, "KeyError", "spanner-loader -vv COMMAND")
    for doc in (json.loads(p.stdout), json.loads(out.read_text())):
        assert doc["status"] == "failed" and doc["exit_code"] == 1
        assert "KeyError" in doc["error"]


def test_csv_column_missing_from_table(spanner_emulator: str, tmp_path: Path) -> None:
    f = tmp_path / "p.csv"
    f.write_text("ProductId,Name,Colour\nx,y,z\n")
    p = run("load", str(f), "--table", "Products", *emu("clidb1"))
    assert_clean_error(p, 2, "Colour")


def test_unreadable_file(spanner_emulator: str, tmp_path: Path) -> None:
    p = run("load", str(tmp_path / "nope.csv"), "--table", "Products", *emu("clidb1"))
    assert_clean_error(p, 2, "nope.csv")


def test_no_such_database(spanner_emulator: str) -> None:
    p = run(
        "load",
        str(EXAMPLES / "Products.csv"),
        "--table",
        "Products",
        "--project",
        "test-project",
        "--instance",
        "test-instance",
        "--database",
        "missing",
    )
    assert_clean_error(p, 2, "not found", "hint:")


@pytest.mark.slow
def test_rejected_rows_exit_3_then_4_with_json_report(
    spanner_emulator: str, tmp_path: Path
) -> None:
    f = tmp_path / "orders.csv"
    header = (EXAMPLES / "Orders.csv").read_text().splitlines()[0]
    good = (EXAMPLES / "Orders.csv").read_text().splitlines()[1:4]
    bad = good[0].split(",")
    bad[2] = "2024-13-45"  # OrderDate
    f.write_text("\n".join([header, *good[1:], ",".join(bad)]) + "\n")
    cust = str(EXAMPLES / "Customers.csv")
    assert run("load", cust, "--table", "Customers", *emu("clidb2"), "-q").returncode == 0
    report = tmp_path / "r.json"
    p = run(
        "load",
        str(f),
        "--table",
        "Orders",
        *emu("clidb2"),
        "--max-bad-rows",
        "5",
        "--report",
        str(report),
        "-q",
    )
    assert p.returncode == 3, p.stderr
    data = json.loads(report.read_text())
    assert data["schema_version"] == 1 and data["status"] == "rejected_rows"
    assert data["rows_written"] == 2 and data["rows_rejected"] == 1
    rejects = [json.loads(x) for x in Path(data["rejects_file"]).read_text().splitlines()]
    assert rejects[0]["line"] == 4 and rejects[0]["column"] == "OrderDate"
    assert "2024-13-45" in rejects[0]["reason"]
    assert rejects[0]["load_id"] == data["load_id"] and re.fullmatch(
        r"\d{8}T\d{6}Z-[0-9a-f]{6}", data["load_id"]
    )

    p = run(
        "load",
        str(f),
        "--table",
        "Orders",
        *emu("clidb2"),
        "--json",
        "-q",
        "--rejects",
        str(tmp_path / "rj.jsonl"),
        "--restart",
    )
    assert p.returncode == 4
    assert "more than 0 bad rows" in p.stderr and "Traceback" not in p.stderr
    # the same reject file over two runs: each line says which run wrote it
    p = run(
        "load",
        str(f),
        "--table",
        "Orders",
        *emu("clidb2"),
        "--max-bad-rows",
        "5",
        "--rejects",
        data["rejects_file"],
        "--restart",
        "--json",
        "-q",
    )
    again = json.loads(p.stdout)
    lines = [json.loads(x) for x in Path(data["rejects_file"]).read_text().splitlines()]
    assert [x["load_id"] for x in lines] == [data["load_id"], again["load_id"]]
    assert again["load_id"] != data["load_id"]


@pytest.mark.slow
def test_manifest_load_and_verify(spanner_emulator: str) -> None:
    args = ["--manifest", str(EXAMPLES / "manifest.json"), *emu("clidb3")]
    p = run("load", *args, "--json", "-q")
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["rows_written"] == 2435 and data["status"] == "ok"
    p = run("verify", *args)
    assert p.returncode == 0 and p.stdout.count(": ok:") == 4, p.stdout
    # a row changed behind the loader's back is found
    from google.cloud import spanner

    db = spanner.Client(project="test-project").instance("test-instance").database("clidb3")
    with db.batch() as b:
        b.update(
            "Products",
            ["ProductId", "Name"],
            [[json.loads(json.dumps(first_product_id())), "changed"]],
        )
    p = run("verify", *args)
    assert p.returncode == 6 and "Products: DIFFERS" in p.stdout and "different keys" in p.stdout


def first_product_id() -> str:
    return (EXAMPLES / "Products.csv").read_text().splitlines()[1].split(",")[0]


def test_validate_writes_nothing(spanner_emulator: str) -> None:
    p = run(
        "validate", str(EXAMPLES / "Customers.csv"), "--table", "Customers", *emu("clidb4"), "-q"
    )
    assert p.returncode == 0, p.stderr
    assert "validated (dry run, nothing written)" in p.stdout
    from google.cloud import spanner

    db = spanner.Client(project="test-project").instance("test-instance").database("clidb4")
    with db.snapshot() as s:
        assert list(s.execute_sql("select count(*) from Customers"))[0][0] == 0


def test_the_entry_point_maps_each_way_out_to_its_exit_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # main() leaves with os._exit (see loader.cli._leave); _run() is everything before that
    from loader.cli import _exit_code, _run

    assert (_exit_code(None), _exit_code(3), _exit_code("boom")) == (0, 3, 1)
    monkeypatch.setattr(sys, "argv", ["spanner-loader", "--help"])
    assert _run() == 0
    assert "Usage:" in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", ["spanner-loader", "load", "--no-such-flag"])
    assert _run() == 2
    assert "no-such-flag" in capsys.readouterr().err


def test_the_process_exits_with_the_code_and_all_its_output_through_a_pipe(
    spanner_emulator: str,
) -> None:
    # leaving without interpreter teardown must still flush what was printed
    orders = EXAMPLES / "Orders.csv"
    p = run("validate", str(orders), "--table", "Orders", *emu("clidb4"), "--json")
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["rows_read"] == len(orders.read_text().splitlines()) - 1


# -- endpoints that do not answer ---------------------------------------------------------------


@contextlib.contextmanager
def _silent_server(http: bool = False, accepted: Any = None) -> Iterator[str]:
    """A loopback TCP server that accepts and never answers (or answers HTTP/1.0 garbage);
    ``accepted``, a threading.Event, is set at its first connection."""
    import socket
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.settimeout(0.2)
    done = threading.Event()
    held: list[Any] = []

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            if accepted is not None:
                accepted.set()
            if http:
                conn.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\nnot spanner")
                conn.close()
            else:
                held.append(conn)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield f"127.0.0.1:{srv.getsockname()[1]}"
    finally:
        done.set()
        t.join(5)
        for c in held:
            c.close()
        srv.close()


def _closed_port() -> str:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"127.0.0.1:{port}"


def test_sigterm_while_the_commands_import_is_one_line_and_exit_5() -> None:
    """SIGTERM in the first tenth of a second (the imports) ended the process with 143 and no
    word, and Ctrl-C there printed a traceback (a tryout)."""
    code = (
        "import os, signal, loader.cli as c\n"
        "def slow():\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    raise AssertionError('not interrupted')\n"
        "c._commands = slow\n"
        "c.main()\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert p.returncode == 5, p.stderr
    assert p.stderr == "interrupted before the command began: nothing was read or written\n"


def test_ctrl_c_while_the_commands_import_exits_5_every_time(tmp_path: Path) -> None:
    """Ctrl-C in the first tenth of a second printed "interrupted before the command began"
    but exited 130 in about one start in five (a nightly-script tryout): a KeyboardInterrupt
    that lands in code a dataclass runs through exec() (the modules' own @dataclass lines)
    leaves the interpreter to end the process by SIGINT after SystemExit(5). Sent at times
    across the imports, every start that says so exits 5."""
    import signal
    import time

    argv = [sys.executable, "-m", "loader", "load", str(EXAMPLES / "Products.csv")]
    argv += ["--table", "Products", "--emulator", "--database", "never", "--no-state"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPANNER_EMULATOR_HOST": "127.0.0.1:9"}
    early = []
    for k in range(40):
        p = subprocess.Popen(
            argv,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        time.sleep(0.01 + 0.004 * k)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
        if "interrupted before the command began" in err:
            early.append(p.returncode)
    assert early and set(early) == {5}, early


def _signalled_load(argv: list[str], module: str, name: str) -> Any:
    """``spanner-loader ARGV`` in a fresh interpreter whose ``module.name`` sends the process
    SIGTERM before it does its work."""
    code = (
        f"import os, signal, sys, importlib\n"
        f"m = importlib.import_module({module!r})\n"
        f"real = m.{name}\n"
        "def slow(*a, **kw):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    return real(*a, **kw)\n"
        f"m.{name} = slow\n"
        f"sys.argv = {['spanner-loader', *argv]!r}\n"
        "from loader.cli import main\n"
        "main()\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )


def test_a_signal_while_the_core_imports_stops_the_load_with_its_report(
    spanner_emulator: str, tmp_path: Path
) -> None:
    """A signal after the options were read but before the load's own handlers were set (the
    core's imports) printed a bare "aborted" and wrote no --report file (a tryout)."""
    report = tmp_path / "r.json"
    argv = ["load", str(EXAMPLES / "Products.csv"), "--table", "Products"]
    argv += [*emu("clisignal"), "--report", str(report)]
    p = _signalled_load(argv, "loader.progress", "make_progress")
    assert p.returncode == 5, p.stderr
    assert "SIGTERM: finishing commits in flight" in p.stderr and "Traceback" not in p.stderr
    saved = json.loads(report.read_text())
    assert saved["status"] == "interrupted" and saved["exit_code"] == 5
    assert sum(t["rows_written"] for t in saved["tables"]) == 0


def test_a_signal_while_the_options_are_read_stops_at_once(tmp_path: Path) -> None:
    """Reading the config can wait (a --manifest from a pipe): a first signal there only
    said "finishing commits in flight" and the wait went on (a review)."""
    argv = ["load", str(EXAMPLES / "Products.csv"), "--table", "Products", "--emulator"]
    argv += ["--database", "never", "--report", str(tmp_path / "r.json")]
    p = _signalled_load(argv, "loader.cli.load_validate", "_build_config")
    assert p.returncode == 5, p.stderr
    assert p.stderr == "interrupted before the command began: nothing was read or written\n"


@pytest.mark.parametrize("command", ["load", "validate", "verify"])
@pytest.mark.parametrize(
    "host,fragment",
    [
        ("closed", "refused the connection"),
        ("not-a-host:1", "cannot resolve the host"),
        ("garbage", "is not host:port"),
        ("silent", "did not answer as a gRPC server within 2 s"),
        # it cost the whole timeout, then said so (a tryout: `python -m http.server`)
        ("http", "is not a gRPC server: it answered 'HTTP/1.0 400 Bad Request'"),
    ],
)
def test_an_endpoint_that_does_not_answer_is_a_one_line_error(
    tmp_path: Path, command: str, host: str, fragment: str
) -> None:
    src = tmp_path / "k.csv"
    src.write_text("Id,Name\n1,a\n", encoding="utf-8")
    args = [command, str(src), "--table", "Customers", "--emulator", "--database", "x1"]
    args += ["--connect-timeout", "2"]
    with contextlib.ExitStack() as stack:
        if host in ("silent", "http"):
            address = stack.enter_context(_silent_server(http=host == "http"))
        else:
            address = _closed_port() if host == "closed" else host
        p = run(*args, env={"SPANNER_EMULATOR_HOST": address})
    assert_clean_error(p, 2, fragment, "SPANNER_EMULATOR_HOST")
    assert address in p.stderr and "hint: " in p.stderr
    if host == "closed":  # unsetting it goes to Spanner without --emulator (a tryout)
        assert "without --emulator, unsetting it sends the load to Spanner" in p.stderr


def test_a_first_signal_while_connecting_stops_at_once(tmp_path: Path) -> None:
    import signal
    import threading
    import time

    src = tmp_path / "k.csv"
    src.write_text("Id,Name\n1,a\n", encoding="utf-8")
    connecting = threading.Event()
    with _silent_server(accepted=connecting) as address:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "SPANNER_EMULATOR_HOST": address}
        proc = subprocess.Popen(
            [sys.executable, "-m", "loader", "load", str(src), "--table", "Customers"]
            + ["--emulator", "--database", "x1", "--connect-timeout", "120"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # the process is connecting once the server has its connection (a fixed sleep could
        # end before a slow machine got that far)
        assert connecting.wait(120)
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 5, err
    assert "stopped while connecting" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "host,fragment",
    [
        ("closed", "refused the connection"),
        ("http://not-a-host:1", "cannot resolve"),
        # the Spanner emulator's gRPC port: it takes the connection, never answers storage
        ("grpc", "does not answer HTTP (it answered in another protocol)"),
        ("silent", "does not answer HTTP (no answer within 1 s)"),
    ],
)
def test_a_storage_endpoint_that_does_not_answer_is_a_one_line_error(
    spanner_emulator: str, host: str, fragment: str
) -> None:
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()  # accepts (the kernel's backlog), never answers
        address = {
            "closed": "http://" + _closed_port(),
            "grpc": "http://" + spanner_emulator,
            "silent": f"http://127.0.0.1:{listener.getsockname()[1]}",
        }.get(host, host)
        p = run(
            "load",
            "gs://bucket/x.csv",
            "--table",
            "Customers",
            *emu("storageprobe"),
            "--max-retry-time",
            "600",
            "--connect-timeout",
            "1",
            env={"STORAGE_EMULATOR_HOST": address},
        )
    assert_clean_error(p, 2, fragment, "STORAGE_EMULATOR_HOST")


def test_superseded_duplicate_keys_are_counted_in_the_report(
    spanner_emulator: str, tmp_path: Path
) -> None:
    """Upsert keeps the last row of a key; the report says how many rows that dropped."""
    ddl = tmp_path / "k.sql"
    ddl.write_text("CREATE TABLE K (Id INT64 NOT NULL, V STRING(MAX)) PRIMARY KEY (Id);\n")
    src = tmp_path / "dup.csv"
    src.write_text("Id,V\n1,a\n2,b\n1,c\n3,d\n", encoding="utf-8")
    args = [str(src), "--table", "K", "--emulator", "--ddl", str(ddl), "--database", "dupkeys"]
    p = run("load", *args, "--json", "-q")
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert (report["rows_read"], report["rows_written"], report["rows_superseded"]) == (4, 3, 1)
    assert report["tables"][0]["rows_superseded"] == 1 and report["rejects_file"] is None
    p = run("load", *args, "-q", "--restart")
    assert "superseded: 1 rows" in p.stdout


@pytest.mark.slow
def test_following_the_generated_column_hint_is_not_refused(
    spanner_emulator: str, tmp_path: Path
) -> None:
    """The first run stops at the generated column before writing anything: adding the
    --ignore it suggests must not count as "other options" than that run's."""
    ddl = tmp_path / "g.sql"
    ddl.write_text(
        "CREATE TABLE G (Id INT64 NOT NULL, X INT64, Y INT64 AS (X * 2) STORED) PRIMARY KEY (Id);\n"
    )
    src = tmp_path / "gen.csv"
    src.write_text("Id,X,Y\n1,2,4\n2,3,6\n", encoding="utf-8")
    args = [str(src), "--table", "G", "--emulator", "--ddl", str(ddl), "--database", "genhint"]
    p = run("load", *args, "-q")
    assert_clean_error(p, 2, "generated", "ignore the CSV column 'Y'")
    p = run("load", *args, "-q", "--ignore", "Y", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["rows_written"] == 2
    # a finished job run again with only tuning options changed: nothing to do
    p = run("load", *args, "-q", "--ignore", "Y", "--json", "--buffer-size", "1MiB")
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert report["rows_written"] == 0 and any("nothing to do" in n for n in report["notes"])
    # an option that changes what is written is told as such, with a hint that works
    p = run("load", *args, "-q", "--ignore", "Y", "--null-marker", "NULL")
    assert_clean_error(p, 2, "change what is written", "--restart")


@pytest.mark.parametrize(
    "content,fragment",
    [("[1, 2, 3]", "not a spanner-loader state file"), ("{not json", "is not JSON")],
)
def test_a_state_file_of_another_shape_is_a_clear_error_with_a_hint_that_works(
    tmp_path: Path, content: str, fragment: str
) -> None:
    state = tmp_path / "state.json"
    state.write_text(content, encoding="utf-8")
    src = tmp_path / "c.csv"
    src.write_text("CustomerId,Name\n1,a\n", encoding="utf-8")
    args = ["load", str(src), "--table", "Customers", *emu("statefile"), "--state-file"]
    p = run(*args, str(state))
    assert_clean_error(p, 2, fragment, "move")
    assert "--restart" not in p.stderr  # it would fail the same way
    p = run(*args, str(state), "--no-state")
    assert_clean_error(p, 2, "--no-state and --state-file")


def test_validate_reports_every_bad_row_by_default(tmp_path: Path) -> None:
    src = tmp_path / "c.csv"
    src.write_text("CustomerId,Name\nx,a\ny,b\n3,c\n", encoding="utf-8")
    rejects = tmp_path / "v.rejects.jsonl"
    p = run(
        "validate", str(src), "--table", "Customers", *emu("validate"), "--rejects", str(rejects)
    )
    assert p.returncode == 3, p.stderr
    assert len(rejects.read_text(encoding="utf-8").splitlines()) == 2
    p = run(
        "validate",
        *(str(src), "--table", "Customers", *emu("validate"), "--max-bad-rows", "1"),
        cwd=tmp_path,
    )
    assert p.returncode == 4, p.stderr


@pytest.mark.parametrize(
    "flag,value,fragment",
    [
        ("--concurrency", "0", "--concurrency must be at least 1"),
        ("--parallel-tables", "0", "--parallel-tables must be at least 1"),
        ("--max-retry-time", "-1", "--max-retry-time must be 0 or more"),
        ("--connect-timeout", "0", "--connect-timeout must be above 0"),
        # NaN was an "unexpected" ValueError, exit 1 (a tryout)
        ("--max-rows-per-second", "nan", "--max-rows-per-second must be above 0, not nan"),
        ("--max-bytes-per-second", "nan", "not a size: 'nan'"),
        ("--bogus", None, "No such option"),
    ],
)
def test_out_of_range_flags_are_refused(
    tmp_path: Path, flag: str, value: Any, fragment: str
) -> None:
    src = tmp_path / "c.csv"
    src.write_text("CustomerId,Name\n1,a\n", encoding="utf-8")
    args = ["load", str(src), "--table", "Customers", "--emulator", "--database", "x1", flag]
    p = run(*args, *([value] if value is not None else []))
    assert_clean_error(p, 2, fragment, "hint: ")


def test_every_exit_code_is_in_the_readme_table_and_the_load_help() -> None:
    from loader.errors import ExitCode

    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    documented = {int(m) for m in re.findall(r"^\| (\d+) \|", section, flags=re.M)}
    assert documented == {int(c) for c in ExitCode}
    help_text = " ".join(run("load", "--help").stdout.split())
    for code in set(ExitCode) - {ExitCode.VERIFY_MISMATCH}:  # verify's own code
        assert f"{int(code)} " in help_text.split("Exit codes:", 1)[1], code
    assert "6 when one does not" in " ".join(run("verify", "--help").stdout.split())


def test_load_help_lists_its_options_by_section_and_validate_hides_write_only_ones() -> None:
    text = run("load", "--help").stdout
    heads = [
        line[:-1] for line in text.splitlines() if line and line.endswith(":") and line[0] != " "
    ]
    assert heads == [
        "Input",
        "CSV format",
        "Columns and values",
        "Target",
        "Writing",
        "Bad rows",
        "Batching and speed",
        "Resume",
        "Pre-splitting",
        "Beyond one machine",
        "Output",
    ]  # no "Other": every option has its section
    flat = " ".join(text.split())
    assert "Spanner's replace mutation" in flat and "not bq load --replace" in flat
    assert "mysqldump --tab" in flat
    shown = run("validate", "--help").stdout
    for hidden in ("--restart", "--priority", "--concurrency"):
        assert hidden not in shown and hidden in text
    # what a dry run reads (the sources an incremental load would, a commit-timestamp column)
    for listed in ("--state-file", "--incremental", "--commit-timestamp"):
        assert listed in shown
    # still accepted (a config file shared with load may set them)
    p = run(
        "validate",
        "-",
        "--table",
        "T",
        "--restart",
        "--concurrency",
        "2",
        "--database",
        "d",
        "--project",
        "p",
        "--instance",
        "i",
        "--connect-timeout",
        "0.2",
    )
    assert "No such option" not in p.stderr


def test_emulator_start_on_a_chosen_port_then_stop(tmp_path: Path) -> None:
    from loader.emulator import free_port

    port = free_port()
    p = run("emulator", "start", "--port", str(port))
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == f"export SPANNER_EMULATOR_HOST=127.0.0.1:{port}"
    pid = int(p.stdout.split("emulator pid ", 1)[1].split(",", 1)[0])
    try:
        busy = run("emulator", "start", "--port", str(port))
        assert_clean_error(busy, 2, f"cannot start the emulator on 127.0.0.1:{port}", "--port")
    finally:
        stop = run("emulator", "stop", "--port", str(port))
    assert stop.returncode == 0, stop.stderr
    assert stop.stdout.startswith(f"stopped the emulator on 127.0.0.1:{port} (pid {pid})")
    assert (
        not Path(f"/proc/{pid}").exists()
        or b"emulator_main" not in Path(f"/proc/{pid}/cmdline").read_bytes()
    )
    again = run("emulator", "stop", "--port", str(port))
    assert again.returncode == 0 and "no emulator started by spanner-loader" in again.stderr


def test_version_says_whether_the_compiled_parts_are_in_use(spanner_emulator: str) -> None:
    from loader import native

    p = run("--version")
    assert p.returncode == 0 and p.stdout.startswith("spanner-loader, version ")
    assert f"compiled parts: {native.status()}" in p.stdout
    off = run("--version", env={"SPANNER_LOADER_NATIVE": "0"})
    assert "compiled parts: built, switched off by SPANNER_LOADER_NATIVE=0" in off.stdout
    # the report says so too
    cust = str(EXAMPLES / "Customers.csv")
    r = run(
        "validate",
        cust,
        "--table",
        "Customers",
        *emu("clidbv"),
        "--json",
        "-q",
        env={"SPANNER_LOADER_NATIVE": "0"},
    )
    data = json.loads(r.stdout)
    assert data["compiled_parts"] is False
    assert any(n.startswith("compiled parts: built, switched off") for n in data["notes"])


def test_skip_rows_past_the_end_of_a_file_is_an_empty_input_with_a_note(
    spanner_emulator: str, tmp_path: Path
) -> None:
    """#16 defect 16: not pyarrow's "Could not skip initial 50 rows"."""
    f = tmp_path / "short.csv"
    f.write_text("CustomerId,Name\n1,a\n2,b\n")
    p = run(
        "load",
        str(f),
        "--table",
        "Customers",
        *emu("clidbs"),
        "--skip-rows",
        "50",
        "--json",
        "-q",
        "--no-state",
    )
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["rows_read"] == 0
    assert any("its 3 lines are all within --skip-rows 50" in n for n in data["notes"]), data


def test_every_error_class_says_whether_it_is_transient_and_carries_its_report() -> None:
    import inspect

    from loader import errors

    classes = [
        c
        for _, c in inspect.getmembers(errors, inspect.isclass)
        if issubclass(c, errors.LoaderError) and c is not errors.LoaderError
    ]
    assert len(classes) >= 9
    for c in classes:
        assert "transient" in vars(c), f"{c.__name__} does not say whether it is transient"
        assert "exit_code" in vars(c), c
    assert errors.LoaderError("x").report is None


def test_a_source_after_a_bare_defer_indexes_gets_a_message_that_says_why(tmp_path: Path) -> None:
    src = tmp_path / "a.csv"
    src.write_text("Id\n1\n")
    r = run("load", "--defer-indexes", str(src), "--table", "T", "--database", "d", "--emulator")
    assert r.returncode == 2
    assert "put the flag after the SOURCE arguments" in r.stderr
    assert "Traceback" not in r.stderr
