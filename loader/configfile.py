"""Command options from a TOML file (``--config job.toml``), so a recurring job is a reviewed file.

Design:

* **Keys are the command's options.** A key is an option's long name without the dashes
  (``max-bad-rows``), with dashes or underscores (``max_bad_rows``), or the parameter's Python
  name (``null_markers``); ``sources`` is the positional SOURCE argument. There are no sections
  (but ``[beam]``, below) and no second vocabulary to learn: ``spanner-loader load --help`` documents the file too.
* **Checked up front, against the command itself.** Every key must name one of the command's
  parameters: a typo is a :class:`~loader.errors.ConfigError` naming the file, the key and the
  closest option (difflib), not a setting that silently does nothing. Every value goes through
  the parameter's own click type, so ``priority = "urgent"`` fails with the same message
  ``--priority urgent`` would, prefixed with the file and key.
* **The command line wins.** The file becomes click's ``ctx.default_map``, which click consults
  only for parameters the command line did not give. The full order is: command line, then
  environment variables (``SPANNER_DATABASE``...), then the file, then built-in defaults. A
  repeatable option given on the command line replaces the file's list rather than extending
  it, as any other option does.
* **Paths are relative to the file**, like the manifest's: ``report = "reports/orders.json"``
  means next to ``job.toml`` wherever cron starts the job. That holds for path-typed options
  and for local ``sources`` (not ``gs://`` URIs or ``-``).
* Repeatable options and ``sources`` take a TOML array (a single string is accepted as a
  one-element list); flags take ``true``/``false`` (``header = false`` is ``--no-header``).
* **One table: ``[beam]``**, Apache Beam's pipeline options for ``load --runner`` under Beam's
  own names (``region = "europe-west1"``, ``num_workers = 4``): each key becomes a
  ``--beam-option key=value``; ``true`` is a bare flag (``--key``), ``false`` leaves it out, an
  array repeats the option. ``runner`` there sets ``--runner``. ``--beam-option`` on the command
  line adds to the table (a key given in both: the command line's value wins, as Beam takes
  the last), unlike other repeatable options, which the command line replaces. Its local file
  options (``setup_file``, ``requirements_file``) are relative to the file, like other paths.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import click

from .errors import ConfigError

#: Parameters a file cannot set: the file option itself and click's own.
_NOT_FROM_FILE = frozenset({"config", "help", "version"})

BEAM_TABLE = "beam"
FILE_BEAM_OPTIONS = "spanner_loader.config_beam_options"
"""``ctx.meta`` key: the ``[beam]`` table's options (``k=v`` strings), which the command line's
``--beam-option`` values are appended to."""

_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)\s*$")


def _file_params(command: click.Command) -> dict[str, click.Parameter]:
    """Every key spelling a file may use, mapped to the parameter it sets."""
    keys: dict[str, click.Parameter] = {}
    for param in command.params:
        if not param.name or param.name in _NOT_FROM_FILE or not param.expose_value:
            continue
        names = {param.name, param.name.replace("_", "-")}
        if isinstance(param, click.Option):
            for opt in param.opts:
                if opt.startswith("--"):
                    names |= {opt[2:], opt[2:].replace("-", "_")}
        for name in names:
            keys[name] = param
    return keys


def _canonical_key(param: click.Parameter) -> str:
    """How messages name a parameter: its long option without dashes, or its argument name."""
    if isinstance(param, click.Option):
        for opt in param.opts:
            if opt.startswith("--"):
                return opt[2:]
    return param.name or "?"


def _is_path_type(param: click.Parameter) -> bool:
    return isinstance(param.type, click.Path)


def _relative_to(base: Path, value: Any, *, uri: bool) -> Any:
    """A relative local path in the file is relative to the file's folder."""
    if not isinstance(value, str) or not value:
        return value
    if "://" in value or (uri and value == "-"):
        return value  # a URI (gs://...), also where a path is accepted (--state-file)
    p = Path(value).expanduser()
    return value if p.is_absolute() else str(base / p)


def _read_toml(path: Path) -> dict[str, Any]:
    import tomllib  # here: a run without a config file does not need it

    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(
            f"config file {path} does not exist",
            hint="give the path of a TOML file of options, e.g. --config job.toml",
        ) from None
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        text = str(e)
        m = _TOML_POSITION.search(text)
        where = f"{path}, line {m.group(1)}" if m else str(path)
        reason = _TOML_POSITION.sub("", text).strip()
        raise ConfigError(
            f"{where}: not valid TOML: {reason}",
            hint='strings need quotes (priority = "low"), lists brackets '
            '(null-marker = ["\\\\N"]); see https://toml.io',
        ) from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: not UTF-8 text ({e.reason})") from None


def _check_shape(path: Path, key: str, param: click.Parameter, value: Any) -> list[Any] | Any:
    """Reject values whose TOML shape cannot be right before click's type sees them."""
    many = param.multiple or param.nargs != 1
    if isinstance(value, dict):
        raise ConfigError(
            f"{path}: {key} must be a value, not a table",
            hint="the file has no sections: write every option as key = value at the top",
        )
    if isinstance(value, list):
        if not many:
            raise ConfigError(
                f"{path}: {key} takes one value, not a list",
                hint=f"e.g. {key} = {value[0]!r}" if value else None,
            )
        bad = [v for v in value if isinstance(v, (list, dict))]
        if bad:
            raise ConfigError(f"{path}: {key} must be a list of plain values")
        return value
    if many:
        return [value]
    is_bool_param = isinstance(param.type, click.types.BoolParamType)
    if isinstance(value, bool) and not is_bool_param:
        raise ConfigError(
            f"{path}: {key} = {str(value).lower()} is not a valid value",
            hint=f"{key} is not a flag; give it a number or a string",
        )
    return value


def _flag(param: click.Parameter, key: str) -> str:
    """The option's own flag (``--max-bad-rows``), whichever spelling the file used."""
    flags = [o for o in param.opts if o.startswith("--")]
    return max(flags, key=len) if flags else f"--{key}"


def _convert(path: Path, key: str, param: click.Parameter, value: Any, ctx: click.Context) -> Any:
    """Convert with the parameter's click type; a bad value's message names file and key."""
    values = value if isinstance(value, list) else None
    if isinstance(param.type, click.types.BoolParamType) and not isinstance(value, (bool, str)):
        raise ConfigError(  # click's own check takes 1 for text and fails unseen
            f"{path}: {key}: {value!r} is not true or false",
            hint=f"write {key} = true or {key} = false",
        )
    try:
        if values is not None:
            return tuple(param.type.convert(v, param, ctx) for v in values)
        return param.type.convert(value, param, ctx)
    except click.BadParameter as e:
        raise ConfigError(
            f"{path}: {key}: {e.message}",
            hint=f"{key} takes what {_flag(param, key)} takes on the command line (see "
            "the command's --help)"
            if isinstance(param, click.Option)
            else None,
        ) from None


def default_map_from_toml(
    path: Path, command: click.Command, *, shared_with: Sequence[click.Command] = ()
) -> dict[str, Any]:
    """Read a TOML file of ``command``'s options into a dict for click's ``ctx.default_map``.

    Keys may be spelled as the long options (``max-bad-rows``), with underscores, or as the
    parameter names; ``sources`` sets the positional SOURCE argument. Raises ConfigError for an
    unreadable file, invalid TOML (with its line), an unknown key (with the closest option), a
    key given twice under two spellings, or a value the option's type refuses. Relative local
    paths are made relative to the file's folder. Values are returned converted, keyed by
    parameter name.

    ``shared_with``: commands that share the file (``load``, ``validate``, ``verify`` reading one
    job file). A key that is not ``command``'s but is one of theirs is skipped rather than
    refused; a key that is nobody's is still an error.
    """
    path = Path(path)
    data = _read_toml(path)
    params = _file_params(command)
    base = path.resolve().parent
    ctx = click.Context(command, info_name=command.name)
    result: dict[str, Any] = {}
    seen_as: dict[str, str] = {}
    if isinstance(data.get(BEAM_TABLE), dict):
        beam = data.pop(BEAM_TABLE)
        if "beam_options" in {p.name for p in params.values()}:
            data = {**_beam_table(path, beam, data, base), **data}
        elif not any("beam_options" in {p.name for p in c.params} for c in shared_with):
            raise ConfigError(
                f"{path}: [{BEAM_TABLE}] is for `load --runner`; `{command.name}` takes no Beam "
                "options",
                hint=f"remove the [{BEAM_TABLE}] table",
            )
    for key, raw in data.items():
        param = params.get(key)
        if param is None and any(key in _file_params(c) for c in shared_with):
            continue
        if param is None:
            import difflib

            close = difflib.get_close_matches(key, list(params), n=1, cutoff=0.6)
            suggestion = f" (did you mean {_canonical_key(params[close[0]])!r}?)" if close else ""
            hint = (
                f"keys are the options of `{command.name}` without the leading -- (see "
                f"`{command.name} --help`), and `sources` for SOURCE"
            )
            if isinstance(raw, dict):
                hint = "the file has no [sections]: write every option as key = value at the top"
            raise ConfigError(f"{path}: unknown option {key!r}{suggestion}", hint=hint)
        assert param.name is not None
        if param.name in seen_as:
            raise ConfigError(
                f"{path}: {key!r} and {seen_as[param.name]!r} set the same option; keep one"
            )
        seen_as[param.name] = key
        shaped = _check_shape(path, key, param, raw)
        if _is_path_type(param) or param.name == "sources":
            uri = not _is_path_type(param)
            if isinstance(shaped, list):
                shaped = [_relative_to(base, v, uri=uri) for v in shaped]
            else:
                shaped = _relative_to(base, shaped, uri=uri)
        result[param.name] = _convert(path, key, param, shaped, ctx)
    return result


_BEAM_PATHS = ("setup_file", "requirements_file")


def _beam_table(
    path: Path, table: dict[str, Any], top: dict[str, Any], base: Path
) -> dict[str, Any]:
    """The ``[beam]`` table as top-level keys: ``beam-option`` (``k=v`` strings) and
    ``runner``."""
    out: dict[str, Any] = {}
    options: list[str] = []
    for key, value in table.items():
        where = f"[{BEAM_TABLE}] {key}"
        if key == "runner":
            if "runner" in top:
                raise ConfigError(f"{path}: 'runner' and '{where}' set the same option; keep one")
            if not isinstance(value, str):
                raise ConfigError(f'{path}: {where} must be a string, e.g. "DataflowRunner"')
            out["runner"] = value
            continue
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, (dict, list)):
                raise ConfigError(
                    f"{path}: {where} must be a value or a list of values",
                    hint='Beam options are flat: e.g. region = "europe-west1"',
                )
            if v is False:
                continue
            if key in _BEAM_PATHS:
                v = _relative_to(base, v, uri=False)
            options.append(key if v is True else f"{key}={v}")
    if options:
        if any(k in top for k in ("beam-option", "beam_option", "beam_options")):
            raise ConfigError(
                f"{path}: beam-option and [{BEAM_TABLE}] both set Beam options; keep one",
                hint=f"move them into [{BEAM_TABLE}] as key = value",
            )
        out["beam-option"] = options
    return out


def _siblings(ctx: click.Context, names: Sequence[str]) -> list[click.Command]:
    """The commands named ``names`` in the same group as ``ctx``'s command."""
    group = ctx.parent.command if ctx.parent is not None else None
    if not isinstance(group, click.Group):
        return []
    return [group.commands[n] for n in names if n in group.commands and n != ctx.info_name]


def _load_config(ctx: click.Context, value: Optional[Path], shared_with: Sequence[str]) -> None:
    if value is None:
        return
    from_file = default_map_from_toml(
        Path(value), ctx.command, shared_with=_siblings(ctx, shared_with)
    )
    ctx.default_map = {**(ctx.default_map or {}), **from_file}
    if from_file.get("beam_options"):
        ctx.meta[FILE_BEAM_OPTIONS] = tuple(from_file["beam_options"])


def config_option_callback(
    ctx: click.Context, param: click.Parameter, value: Optional[Path]
) -> None:
    """click callback of ``--config``: load the file into ``ctx.default_map``.

    The option must be ``is_eager=True`` (so this runs before the other parameters take their
    values) and ``expose_value=False``. Entries of an existing default map (a parent's) are
    kept unless the file sets them. Every key must be an option of this command; see
    :func:`config_option` for a file shared by several commands.
    """
    _load_config(ctx, value, ())


def config_option(
    *, shared_with: Sequence[str] = (), help: Optional[str] = None
) -> Callable[[Any], Any]:
    """The ``--config FILE`` option, ready to decorate a command.

    ``shared_with`` names sibling commands of the same group whose options the file may also
    hold (skipped by this command), e.g. ``("load", "validate", "verify")`` so one job file
    serves all three.
    """

    def callback(ctx: click.Context, param: click.Parameter, value: Optional[Path]) -> None:
        _load_config(ctx, value, shared_with)

    return click.option(
        "--config",
        type=click.Path(dir_okay=False, path_type=Path),
        is_eager=True,
        expose_value=False,
        callback=callback,
        help=help
        or "TOML file of this command's options (keys are the option names, e.g. "
        "max-bad-rows = 10; `sources` for SOURCE). Command-line options override it, and so "
        "do SPANNER_PROJECT, SPANNER_INSTANCE and SPANNER_DATABASE.",
    )
