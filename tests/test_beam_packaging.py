"""The Beam worker package, built as Dataflow's launcher builds it for ``--setup_file``.

Dataflow itself cannot run here; what it would do with the package can. For
``--beam-option setup_file=./setup.py`` Beam's stager runs, in the setup file's folder,
``python -m build --sdist --outdir TMP .`` when the ``build`` package is installed, else
``python setup.py sdist --dist-dir TMP``, stages the sdist, and each worker pip-installs it.
This test runs those same public commands on a copy of the checkout's files (what a fresh clone
holds: tracked and untracked, not ignored), installs the sdist into a fresh virtualenv
(dependencies from the package index, the compiled parts built by pip, as on a worker) and
imports what the pipeline's workers import there, from outside the checkout. Slow (a minute or
two: the dependencies are downloaded), so it runs in ``scripts/beam_check.sh``, the launcher's
side, where apache-beam (and ``build``) are installed.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("apache_beam") is None,
        reason="apache-beam is not installed (scripts/beam_check.sh runs this test)",
    ),
]

CHECK = """
import json, sys
import loader, loader.native, loader.plan, loader.beam, loader.beam.work, loader.beam.spill
print(json.dumps({"file": loader.__file__, "native": loader.native.status(),
                  "beam": "apache_beam" in sys.modules}))
"""


def _checkout_copy(dest: Path) -> Path:
    """The files a clone of this checkout has (and new ones not yet committed), copied."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    if listed.returncode != 0:
        pytest.skip("not a git checkout: cannot tell its files from build leftovers")
    for name in listed.stdout.decode().split("\0"):
        src = ROOT / name
        if name and src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def _sdist(how: str, tmp_path: Path) -> Path:
    """The sdist, built by the command Beam's stager runs for ``setup_file``."""
    src = _checkout_copy(tmp_path / "checkout")
    out = tmp_path / "staged"
    out.mkdir()
    if how == "build":
        if importlib.util.find_spec("build") is None:
            pytest.skip("the `build` package is not installed (scripts/beam_check.sh installs it)")
        cmd = [sys.executable, "-m", "build", "--sdist", "--outdir", str(out), str(src)]
    else:
        cmd = [sys.executable, str(src / "setup.py"), "sdist", "--dist-dir", str(out)]
    done = subprocess.run(cmd, cwd=src, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    built = sorted(out.glob("*.tar.gz"))
    assert len(built) == 1, built
    return built[0]


@pytest.mark.parametrize("how", ["build", "setup.py"])
def test_setup_file_package_builds_installs_and_imports(how: str, tmp_path: Path) -> None:
    sdist = _sdist(how, tmp_path)
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for needed in ("setup.py", "pyproject.toml", "loader/_native.c", "loader/beam/work.py"):
        assert needed in names, f"{needed} is not in {sdist.name}"
    assert "loader/plan/ranges.py" in names and "loader/beam/spill.py" in names

    venv = tmp_path / "worker"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    pip = subprocess.run(
        [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(sdist)],
        capture_output=True,
        text=True,
    )
    assert pip.returncode == 0, pip.stdout + pip.stderr
    out = subprocess.run(
        [str(py), "-c", CHECK], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["file"].startswith(str(venv)), got  # the installed package, not the checkout
    assert got["native"].startswith("in use"), got  # the compiled parts were built and load
    assert got["beam"] is False  # the worker's own apache-beam is the SDK image's


def _readme_beam_options() -> list[tuple[str, str]]:
    text = (ROOT / "README.md").read_text()
    start = text.index("### On Dataflow")
    block = text[text.index("```sh", start) : text.index("```\n", text.index("```sh", start) + 5)]
    pairs = []
    for item in block.split("--beam-option ")[1:]:
        key, _, value = item.split()[0].partition("=")
        pairs.append((key, value))
    return pairs


def test_readme_dataflow_command_is_valid_beam_options() -> None:
    from apache_beam.options.pipeline_options import GoogleCloudOptions, SetupOptions

    from loader.beam.pipeline import pipeline_options

    pairs = _readme_beam_options()
    keys = [k for k, _ in pairs]
    for needed in ("project", "region", "temp_location", "staging_location"):
        assert needed in keys
    opts = pipeline_options("DataflowRunner", pairs)
    known = opts.get_all_options(retain_unknown_options=False)
    for k in keys:
        assert k in known, f"--beam-option {k} is not a Beam option"
    gcp = opts.view_as(GoogleCloudOptions)
    assert gcp.temp_location == "gs://BUCKET/beam/temp"
    assert gcp.service_account_email and gcp.region == "europe-west1"
    # a relative setup file is made absolute (Beam's stager changes into its folder)
    setup = opts.view_as(SetupOptions).setup_file
    assert setup is not None and Path(setup).is_absolute() and setup.endswith("setup.py")
