#!/usr/bin/env bash
# The oldest google-cloud-spanner the loader supports, tested: a virtualenv with exactly the
# floor pyproject.toml names ("google-cloud-spanner>=X") runs the commit, end-to-end load,
# type round-trip, pre-splitting and wire-protocol tests against it (README, "Dependencies":
# why the floor is where it is). The floor has no DatabaseAdmin.add_split_points (3.53 added it): pre-splitting
# takes its note path there, and the tests of the AddSplitPoints requests skip.
# Releases before 3.55 lack client internals the committer uses, so at the floor commits take
# the public path (database.batch(); see loader/commit/spanner.py), and the tests of the raw
# Commit path skip, saying why.
# Usage: scripts/oldest_client_check.sh   (CI runs it before the suite; about 1-2 minutes)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
floor="$(sed -n 's/^ *"google-cloud-spanner>=\([0-9][0-9.]*\)",.*/\1/p' pyproject.toml)"
if [ -z "$floor" ]; then
  echo "error: no google-cloud-spanner>=X floor in pyproject.toml" >&2
  exit 1
fi
VENV="${SPANNER_LOADER_OLDEST_VENV:-$ROOT/.venv-oldest}"
PY="${PYTHON:-python3}"
echo "== oldest client: google-cloud-spanner==$floor"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
# re-installed only when the floor, the dependencies or the compiled encoder changed
stamp="$VENV/.installed-$(cat pyproject.toml setup.py loader/_native.c | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  if ! { "$VENV/bin/python" -m pip install --quiet --upgrade pip \
      && "$VENV/bin/python" -m pip install --quiet -e "$ROOT[test]" \
        "google-cloud-spanner==$floor"; } >"$VENV/install.log" 2>&1; then
    cat "$VENV/install.log" >&2
    echo "error: installing google-cloud-spanner==$floor into $VENV failed (see above)" >&2
    exit 1
  fi
  rm -f "$VENV"/.installed-*
  touch "$stamp"
fi
# exactly the floor (pip would not install another release for "==X", but check what is there)
"$VENV/bin/python" - "$floor" <<'PY'
import importlib.metadata as m
import sys

from packaging.version import Version

got = m.version("google-cloud-spanner")
if Version(got) != Version(sys.argv[1]):
    sys.exit(f"error: the virtualenv has google-cloud-spanner {got}, not {sys.argv[1]}")
PY
"$VENV/bin/python" -m pytest -q -p no:cacheprovider -n "${SPANNER_LOADER_TEST_WORKERS:-2}" -W ignore::FutureWarning \
  tests/test_commit.py tests/test_commit_request.py tests/test_commit_fallback.py \
  tests/test_load_e2e.py tests/test_types_e2e.py "tests/test_encode.py::test_emulator_round_trip" \
  tests/test_presplit.py tests/test_waves.py tests/test_wire.py \
  "tests/test_state.py::test_state_writes_are_repeated_while_spanner_aborts_them"
