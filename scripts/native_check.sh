#!/usr/bin/env bash
# The compiled parts (loader/_native.c) as they ship, checked the ways the test suite cannot:
#  1. a build with AddressSanitizer + UndefinedBehaviorSanitizer and without 128-bit integers
#     (the portable fallback), running the extension's tests against it;
#  2. a build with ThreadSanitizer, running the tests of the kernels that split over threads;
#  3. a wheel: it must be one abi3 wheel, and install into a fresh virtualenv where
#     `spanner-loader --version` says the compiled parts are in use.
# Usage: scripts/native_check.sh   (CI runs it after scripts/test.sh; about 1-2 minutes)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
cd "$ROOT"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "== native: sanitizer build, portable 128-bit fallback"
mkdir "$work/asan"
cp -r loader tests pyproject.toml setup.py README.md "$work/asan/"
rm -f "$work"/asan/loader/_native*.so
(cd "$work/asan" && SPANNER_LOADER_SANITIZE=1 CFLAGS="-DSPANNER_LOADER_NO_INT128" \
  python setup.py -q build_ext --inplace >"$work/asan-build.log" 2>&1) \
  || { cat "$work/asan-build.log"; exit 1; }
(
  cd "$work/asan"
  # the sanitizer runtime must be loaded before the interpreter's own libraries
  export LD_PRELOAD="$(cc -print-file-name=libasan.so)" ASAN_OPTIONS=detect_leaks=0 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 SPANNER_LOADER_REQUIRE_NATIVE=1
  python -c 'import loader._native as n; assert n.INT128 == 0, "the fallback was not built"'
  python -m pytest -q -p no:cacheprovider tests/test_native.py tests/test_encode.py \
    tests/test_key_bytes.py tests/test_native_threads.py tests/test_stage_threads.py \
    tests/test_sort.py tests/test_fast_paths.py tests/test_quotes.py -k "not native_128_bit"
)

echo "== native: thread sanitizer build, the kernels that run on threads"
mkdir "$work/tsan"
cp -r loader tests pyproject.toml setup.py README.md "$work/tsan/"
rm -f "$work"/tsan/loader/_native*.so
(cd "$work/tsan" && SPANNER_LOADER_SANITIZE=thread python setup.py -q build_ext --inplace \
  >"$work/tsan-build.log" 2>&1) || { cat "$work/tsan-build.log"; exit 1; }
(
  cd "$work/tsan"
  export LD_PRELOAD="$(cc -print-file-name=libtsan.so)" TSAN_OPTIONS=halt_on_error=1 \
    SPANNER_LOADER_REQUIRE_NATIVE=1
  # the kernels alone: whole loads (tests/test_stage_threads.py) run Arrow's own thread pool,
  # whose (uninstrumented) futures and shared pointers TSan reports as races in libarrow
  python -m pytest -q -p no:cacheprovider tests/test_native_threads.py
)

echo "== native: one abi3 wheel, installed into a fresh virtualenv"
python -m pip wheel --quiet --no-deps --wheel-dir "$work/dist" . >"$work/wheel.log" 2>&1 \
  || { cat "$work/wheel.log"; exit 1; }
wheel="$(ls "$work"/dist/*.whl)"
echo "built $(basename "$wheel")"
case "$wheel" in
  *-cp311-abi3-*.whl) ;;
  *) echo "error: expected one cp311-abi3 wheel, got $(basename "$wheel")" >&2; exit 1 ;;
esac
python -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet "$wheel" >"$work/install.log" 2>&1 \
  || { cat "$work/install.log"; exit 1; }
# every module of the package is in the wheel (stage packages included) and imports; those
# that need an optional extra ([beam]) are only found, since the base install has no Beam
(cd "$work" && "$work/venv/bin/python" -c '
import importlib, importlib.util, pkgutil, loader
needs_extra = {"loader.beam.pipeline"}
seen = set()
for m in pkgutil.walk_packages(loader.__path__, "loader."):
    seen.add(m.name)
    if m.name in needs_extra:
        assert importlib.util.find_spec(m.name) is not None, m.name
    elif not m.name.endswith("__main__"):
        importlib.import_module(m.name)
assert needs_extra <= seen, needs_extra - seen
')
version="$(cd "$work" && "$work/venv/bin/spanner-loader" --version)"
echo "$version"
grep -q "compiled parts: in use" <<<"$version" \
  || { echo "error: the installed wheel does not use its compiled parts" >&2; exit 1; }
