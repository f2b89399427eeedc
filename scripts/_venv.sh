# Sourced by the other scripts: make .venv with the package and its test extras installed.
# Re-installs only when pyproject.toml, setup.py or the compiled encoder's source changed since
# the last install (the editable install builds loader/_native.c in place).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${SPANNER_LOADER_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
stamp="$VENV/.installed-$(cat "$ROOT/pyproject.toml" "$ROOT/setup.py" "$ROOT/loader/_native.c" | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  echo "installing spanner-loader, its test tools and the GCS emulator into $VENV" \
    "(first run: about a minute; log in $VENV/install.log)" >&2
  if ! { "$VENV/bin/python" -m pip install --quiet --upgrade pip \
      && "$VENV/bin/python" -m pip install --quiet -e "$ROOT[test]"; } >"$VENV/install.log" 2>&1; then
    cat "$VENV/install.log" >&2
    echo "error: installing into $VENV failed (see above)" >&2
    exit 1
  fi
  rm -f "$VENV"/.installed-*
  touch "$stamp"
  echo "installed; the command is $VENV/bin/spanner-loader (or: source $VENV/bin/activate)" >&2
fi
export PATH="$VENV/bin:$PATH"
