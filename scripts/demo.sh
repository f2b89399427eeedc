#!/usr/bin/env bash
# A real demo load: examples/shop served from a local GCS emulator as gs://shop-export/...,
# loaded into a local Spanner emulator with schemas/shop.sql, report printed, then verified.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
cd "$ROOT"
exec python examples/demo.py "$@"
