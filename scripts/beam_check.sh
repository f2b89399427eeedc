#!/usr/bin/env bash
# The Beam path (loader/beam, `load --runner`), tested with apache-beam installed: a virtualenv
# of its own with the [beam] extra (apache-beam pins pyarrow < 26 and protobuf < 7, so the main
# test virtualenv stays without it and its Beam tests skip, saying why) runs the Beam, planner
# and range-reading tests on the DirectRunner against the emulator.
# Usage: scripts/beam_check.sh   (install: about 20 s on top of the test extras; tests ~1 min)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${SPANNER_LOADER_BEAM_VENV:-$ROOT/.venv-beam}"
PY="${PYTHON:-python3}"
echo "== Beam: the [beam] extra in $VENV"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
# re-installed only when the dependencies or the compiled encoder changed
stamp="$VENV/.installed-$(cat pyproject.toml setup.py loader/_native.c | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  if ! { "$VENV/bin/python" -m pip install --quiet --upgrade pip \
      && "$VENV/bin/python" -m pip install --quiet -e "$ROOT[test,beam]"; } \
      >"$VENV/install.log" 2>&1; then
    cat "$VENV/install.log" >&2
    echo "error: installing the [beam] extra into $VENV failed (see above)" >&2
    exit 1
  fi
  rm -f "$VENV"/.installed-*
  touch "$stamp"
fi
# `build`: what Beam's stager runs for --setup_file when it is there (tests/test_beam_packaging.py)
# (asked from /: a build/ folder left by setup.py in the checkout imports as a namespace package)
if ! (cd / && "$VENV/bin/python" -c "import build.__main__") 2>/dev/null; then
  "$VENV/bin/python" -m pip install --quiet build >>"$VENV/install.log" 2>&1
fi
"$VENV/bin/python" -c "import apache_beam; print('apache-beam', apache_beam.__version__)"
"$VENV/bin/python" -m pytest -q -p no:cacheprovider -n "${SPANNER_LOADER_TEST_WORKERS:-2}" -W ignore::FutureWarning \
  tests/test_beam.py tests/test_beam_limits.py tests/test_beam_spill.py tests/test_beam_presplit.py tests/test_plan.py tests/test_plan_read.py tests/test_nul.py tests/test_beam_packaging.py \
  tests/test_beam_results.py tests/test_benchmarks_beam.py tests/test_beam_tryout.py
