"""The Beam worker package, built as Dataflow's launcher builds it for ``--setup_file``.

Dataflow itself cannot run here; what it would do with the package can. Beam's stager turns
``setup.py`` into an sdist (``python -m build --sdist`` when ``build`` is installed, else
``python setup.py sdist``), stages it, and each worker pip-installs it. This test builds the
sdist with the stager's own function, installs it into a fresh virtualenv (dependencies from the
package index, the compiled parts built by pip, as on a worker) and imports what the pipeline's
workers import there, from outside the checkout. Slow (a minute or two: the dependencies are
downloaded), so it runs in ``scripts/beam_check.sh``, where apache-beam is installed.
"""

from __future__ import annotations

import importlib.util
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
import loader, loader.native, loader.plan, loader.beam, loader.beam.work
print(json.dumps({"file": loader.__file__, "native": loader.native.status(),
                  "beam": "apache_beam" in sys.modules}))
"""


def test_setup_file_package_builds_installs_and_imports(tmp_path: Path) -> None:
    import json

    from apache_beam.runners.portability.stager import Stager

    staged = tmp_path / "staged"
    staged.mkdir()
    # what `--beam-option setup_file=.../setup.py` runs on the launcher (a private function of
    # Beam's stager; if it moves, Stager.create_job_resources calls its successor)
    sdist = Path(Stager._build_setup_package(str(ROOT / "setup.py"), str(staged)))
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for needed in ("setup.py", "pyproject.toml", "loader/_native.c", "loader/beam/work.py"):
        assert needed in names, f"{needed} is not in {sdist.name}"
    assert "loader/plan/ranges.py" in names

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
