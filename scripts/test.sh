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
echo "== pytest (6 to 13 minutes on 2 cores, as fast as the machine)"
python -m pytest -q "$@"
