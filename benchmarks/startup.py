"""Section 7 of benchmarks/run.py: the fixed cost of one run (issue "Half the fixed cost").

Each figure is a fresh process, best of ``--repeat`` runs after one warm-up run:

* ``python -c pass`` and ``python -c "import google.cloud.spanner"``: the interpreter alone,
  and the client library alone, for scale;
* ``spanner-loader --help`` (``python -m loader --help``);
* **start to first commit**: a one-row CSV loaded into the emulator (database and table made
  beforehand, the checkpoint table already there) by a fresh ``python -m loader load``
  process. The figure runs from just before the process is spawned to the commit timestamp
  Spanner gave the row (a ``--commit-timestamp`` column, read back afterwards; the emulator
  runs on this machine, so both come from one clock). Each run loads a new file, so each is a
  new job: a first run, not a "nothing to do" one. The whole process's wall time and CPU time
  are in the note.

With ``--startup-baseline TREE`` (a source tree of another version, e.g. ``git worktree add
/tmp/base main``), the --help and first-commit figures are also measured for that tree, in
the same run, and their ratios reported. The processes keep their bytecode in a cache
under ``--data-dir`` (``PYTHONPYCACHEPREFIX``, filled by the warm-up runs), as an installed
package has its bytecode: a process that compiles the loader's sources first would measure
the compiler.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

STARTUP_TABLE = "StartUp"
STARTUP_DDL = (
    f"CREATE TABLE {STARTUP_TABLE} (Id INT64 NOT NULL, "
    "CommittedAt TIMESTAMP OPTIONS (allow_commit_timestamp = true)) PRIMARY KEY (Id);\n"
)


def _env(tree: Path, cache: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONPYCACHEPREFIX=str(cache))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_once(cmd: Sequence[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Run ``cmd`` in a fresh process: (wall seconds, CPU seconds of the child). A failure
    raises with its output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(list(cmd), env=env, cwd=cwd, capture_output=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # no other child is reaped meanwhile
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd)} exited {proc.returncode}: {proc.stdout + proc.stderr!r}"
        )
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def best(cmd: Sequence[str], env: dict[str, str], cwd: Path, repeat: int) -> tuple[float, float]:
    """Best wall seconds and best CPU seconds of ``repeat`` runs, after one warm-up run."""
    runs = [run_once(cmd, env, cwd) for _ in range(repeat + 1)][1:]
    return min(w for w, _ in runs), min(c for _, c in runs)


def first_commit(
    tree: Path, env: dict[str, str], target: Sequence[str], database: Any, data_dir: Path, key: int
) -> tuple[float, float, float]:
    """Load a one-row file with a fresh ``python -m loader`` of ``tree``: (seconds from the
    spawn to the row's commit timestamp, wall seconds of the process, CPU seconds)."""
    from google.cloud import spanner

    path = data_dir / f"startup-{os.getpid()}-{key}.csv"
    path.write_text(f"Id\n{key}\n", encoding="ascii")
    cmd = [sys.executable, "-m", "loader", "load", str(path), "--table", STARTUP_TABLE]
    cmd += ["--commit-timestamp", "CommittedAt", "-q"]
    cmd += list(target)
    t0 = time.time()
    wall, cpu = run_once(cmd, env, tree)
    path.unlink()
    with database.snapshot() as snap:
        ((at,),) = list(
            snap.execute_sql(
                f"select CommittedAt from {STARTUP_TABLE} where Id = @k",
                params={"k": key},
                param_types={"k": spanner.param_types.INT64},
            )
        )
    return at.timestamp() - t0, wall, cpu


def section_startup(
    res: Any, database: Any, data_dir: Path, repeat: int, baseline: Optional[Path] = None
) -> None:
    """7. process start to first commit of a one-row file, beside ``python -c pass``."""
    from benchmarks.run import INSTANCE, PROJECT, ROOT, Figure

    print("7. start-up", flush=True)
    repeat = max(1, repeat)
    # one bytecode cache for every tree (it mirrors each source's absolute path), kept
    # between runs beside the generated files
    cache = data_dir / "pycache"
    trees = [("ours", ROOT)] + ([("baseline", baseline.resolve())] if baseline else [])
    plain = _env(ROOT, cache)

    def fig(name: str, wall: float, cpu: float, note: str = "") -> Any:
        return res.add(Figure("startup", name, 1, wall, note=f"cpu {cpu:.3f}s {note}".strip()))

    wall, cpu = best([sys.executable, "-c", "pass"], plain, ROOT, repeat)
    fig("python -c pass", wall, cpu)
    wall, cpu = best([sys.executable, "-c", "import google.cloud.spanner"], plain, ROOT, repeat)
    fig("python -c 'import google.cloud.spanner'", wall, cpu)

    target = ["--project", PROJECT, "--instance", INSTANCE, "--database", database.database_id]
    key = time.time_ns() % 2**60
    figures: dict[tuple[str, str], float] = {}
    for label, tree in trees:
        env = _env(tree, cache)
        wall, cpu = best([sys.executable, "-m", "loader", "--help"], env, tree, repeat)
        figures[(label, "help")] = fig(f"{label}: spanner-loader --help", wall, cpu).seconds
        runs = []
        for _ in range(repeat + 1):  # the first one fills the bytecode cache
            key += 1
            runs.append(first_commit(tree, env, target, database, data_dir, key))
        runs = runs[1:]
        at = min(r[0] for r in runs)
        figures[(label, "commit")] = fig(
            f"{label}: start to first commit, 1-row file",
            at,
            min(r[2] for r in runs),
            f"process wall {min(r[1] for r in runs):.3f}s",
        ).seconds
    res.info["startup"] = {f"{k[0]} {k[1]}": v for k, v in figures.items()}
    if baseline:
        res.ratio(
            "start-up: first commit, ours / baseline",
            figures[("ours", "commit")] / figures[("baseline", "commit")],
            0.5,
            higher=False,
        )
        res.ratio(
            "start-up: --help, ours / baseline",
            figures[("ours", "help")] / figures[("baseline", "help")],
            1,
            higher=False,
        )
