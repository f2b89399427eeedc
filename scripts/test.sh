#!/usr/bin/env bash
# The whole test suite: lint, type check, tests (emulators are started by the fixtures).
# Usage: scripts/test.sh [pytest args...]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
cd "$ROOT"
echo "== ruff"
ruff check loader tests examples benchmarks setup.py
ruff format --check loader tests examples benchmarks setup.py README.md
echo "== mypy"
mypy loader benchmarks
# Two workers by default (SPANNER_LOADER_TEST_WORKERS, or -n N among the arguments: the last
# -n wins; -n 0 runs in this process, e.g. for --pdb). Each worker starts its own emulators.
workers="${SPANNER_LOADER_TEST_WORKERS:-2}"
echo "== pytest on $workers workers (3 to 6 minutes on 2 cores, as fast as the machine)"
python -m pytest -q -n "$workers" "$@"
