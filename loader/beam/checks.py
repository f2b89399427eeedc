"""Checks of ``--runner``, ``--beam-option`` and ``--beam-results`` on the launcher, before it
connects or plans anything: a misspelt runner or option, or a results folder nobody can write,
is a one-line :class:`~loader.errors.ConfigError` (exit 2), not a pipeline that runs without
the option or fails on its first worker with a traceback.

Beam's DirectRunner drops an option it does not know (with a logged warning only); Dataflow
and Prism pass unknown ones on to the service, so there only an option very close to a known
one (a likely typo) is refused.
"""

from __future__ import annotations

import difflib
import os
import tempfile
from collections.abc import Sequence
from typing import Any, Optional

from ..errors import ConfigError


def known_runners() -> list[str]:
    from apache_beam.options.pipeline_options import StandardOptions

    return [path.rsplit(".", 1)[-1] for path in StandardOptions.ALL_KNOWN_RUNNERS]


def check_runner(runner: str) -> None:
    """A runner named as Beam names its classes (``DirectRunner``), or a dotted import path."""
    if "." in runner:
        return
    names = known_runners()
    if runner in names:
        return
    close = [n for n in names if n.lower() in (runner.lower(), runner.lower() + "runner")]
    close = close or difflib.get_close_matches(runner, names, n=1)
    raise ConfigError(
        f"unknown Beam runner {runner!r}",
        hint=(f"did you mean --runner {close[0]}? " if close else "")
        + "runners: DirectRunner, PrismRunner, DataflowRunner, FlinkRunner, SparkRunner",
    )


def _option_parser() -> Any:
    """Beam's own parser of pipeline options (every options class it has loaded)."""
    from apache_beam.options.pipeline_options import PipelineOptions

    parsers: list[Any] = []
    PipelineOptions([]).get_all_options(add_extra_args_fn=parsers.append)
    return parsers[0]


def check_options(runner: str, options: Sequence[tuple[str, str]]) -> None:
    """Refuse a ``--beam-option`` Beam does not know: every one on the DirectRunner (which
    drops it), one close to a known option elsewhere."""
    if not options:
        return
    parser = _option_parser()
    known = sorted(s[2:] for a in parser._actions for s in a.option_strings if s.startswith("--"))
    names = set(known)
    for key, value in options:
        arg = f"--{key}={value}" if value != "" else f"--{key}"
        if key == "runner":
            raise ConfigError(
                f"--beam-option {arg[2:]}: the runner is set by `runner` (here {runner}), not "
                "by a Beam option",
                hint="leave it out of the Beam options",
            )
        if key in names:
            _check_value(parser, arg)
            continue
        close = difflib.get_close_matches(key, known, n=1)
        typo = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
        if typo or runner == "DirectRunner":
            raise ConfigError(
                f"unknown Beam pipeline option {key!r} (--beam-option {arg[2:]})",
                hint=(f"did you mean {close[0]}? " if close else "")
                + "Beam's own option names, without the dashes (e.g. direct_num_workers, "
                "region, temp_location)",
            )


class _Refused(Exception):
    pass


def _check_value(parser: Any, arg: str) -> None:
    """ConfigError when Beam's parser refuses ``arg`` (a value of the wrong type or choice, a
    flag given a value, a value missing), here and now: Beam's own refusal comes once the load
    has begun (after deferred indexes were dropped) as its whole usage text."""

    def refuse(message: str) -> None:
        raise _Refused(message)

    saved = parser.error
    parser.error = refuse
    try:
        parser.parse_known_args([arg])
    except _Refused as e:
        flag = "ignored explicit argument" in str(e)
        raise ConfigError(
            f"Beam refuses --beam-option {arg[2:]}: {e}",
            hint=f"a flag takes no value: --beam-option {arg[2:].split('=', 1)[0]}"
            if flag
            else "correct the value: the message says what Beam takes",
        ) from None
    finally:
        parser.error = saved


def check_results(location: Optional[str]) -> None:
    """A local ``--beam-results`` folder must be one this machine can create and write in."""
    if not location or "://" in location:
        return
    try:
        os.makedirs(location, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=location, prefix=".spanner-loader-probe-"):
            pass
    except OSError as e:
        raise ConfigError(
            f"cannot write in the Beam results folder {location} ({e.strerror or e})",
            hint="name a folder this machine and the workers can write, or leave out "
            "`beam_results` on a local runner",
        ) from None


def check_readable(runner: str, sources: Sequence[Any]) -> None:
    """Sources the runner's workers can read: stdin and pipes only on a local runner (a worker
    in another process cannot read this one's stream, and a retried bundle could not read it
    again), local files not on Dataflow (its workers are other machines)."""
    from .results import LOCAL_RUNNERS

    if runner in LOCAL_RUNNERS:
        return
    for s in sources:
        if s.kind in ("stdin", "pipe"):
            raise ConfigError(
                f"--runner {runner} cannot read {s.uri}: its workers are other processes, "
                "which cannot read this command's standard input or pipe",
                hint="write it to a file (on Dataflow: upload it to gs://BUCKET/...), or load "
                "it without --runner",
            )
        if s.kind == "file" and "Dataflow" in runner:
            raise ConfigError(
                f"--runner {runner} cannot read the local file {s.uri}: Dataflow's workers are "
                "other machines",
                hint="upload it (gcloud storage cp FILE gs://BUCKET/...) and name the gs:// "
                "object, or load it without --runner",
            )
