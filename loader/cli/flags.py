"""The core's option names in the words of the command line.

Core messages name options as a library user sets them, between backticks: `max_bad_rows`,
`restart=True`, `mode='upsert'` (see loader/errors.py). :func:`speak_flags` rewrites each into
the flag of the click command that ran, found among that command's own parameters, so there
is no second list of names to keep in step:

* a parameter of that name (``max_bad_rows`` -> --max-bad-rows), else a flag ``no_<name>``
  (``state=False`` -> --no-state), else the parameter whose long option is the name with
  dashes (``ignore`` -> --ignore);
* a value is written the way a shell user types it: ``mode='upsert'`` -> ``--mode upsert``,
  ``concurrency=4`` -> ``--concurrency 4``; a boolean picks the flag or its off switch
  (``restart=True`` -> --restart, ``header=False`` -> --no-header);
* a name the command has no flag for, or a value no flag can say, stays as it is.
"""

from __future__ import annotations

import ast
import re
import shlex
import sys
from typing import Any, Optional, Sequence

import click

MARKED = re.compile(r"`([a-z][a-z0-9_]*)(?:=([^`]*))?`")
"""An option named in a core message: `name` or `name=value`."""


def speak_flags(text: str, command: Optional[click.Command]) -> str:
    """``text`` with each marked option name written as ``command``'s flag, or as the
    ``load`` command's, "load --flag", when ``command`` has none (verify's notes name what to
    change in the load: ``skip_existing``)."""
    if command is None or "`" not in text:
        return text
    app = sys.modules.get(f"{__package__}.app")  # the commands, once registered
    load = app.cli.commands.get("load") if app is not None else None

    def one(m: re.Match[str]) -> str:
        return (
            flag_text(command, m.group(1), m.group(2))
            or (load is not None and _of_load(flag_text(load, m.group(1), m.group(2))))
            or m.group(0)
        )

    return MARKED.sub(one, text)


def _of_load(flag: Optional[str]) -> Optional[str]:
    return None if flag is None else "load " + flag


def find_option(command: click.Command, name: str) -> Optional[tuple[click.Option, bool]]:
    """The option of ``command`` that sets the library option ``name``, and whether it is
    the negative flag (``--no-state`` for ``state``); None when it has none."""
    options = [p for p in command.params if isinstance(p, click.Option)]
    for p in options:
        if p.name == name:
            return p, False
    for p in options:
        if p.name == f"no_{name}" and p.is_bool_flag:
            return p, True
    dashed = "--" + name.replace("_", "-")
    for p in options:
        if dashed in p.opts:
            return p, False
    if name in _SHORTER:  # a dialect field whose flag drops its `_char`
        return find_option(command, _SHORTER[name])
    return None


_SHORTER = {"quote_char": "quote", "escape_char": "escape"}
"""Library names whose flag is a shorter word (``quote_char`` -> --quote)."""


def flag_text(command: click.Command, name: str, raw: Optional[str] = None) -> Optional[str]:
    """``name`` (with the value ``raw``, a Python literal) as ``command``'s flag, or None."""
    found = find_option(command, name)
    if found is None:
        return None
    param, negative = found
    if raw is None:  # the option itself, not a value of it
        return None if negative else _long(param.opts)
    try:
        value: Any = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return None
    if param.is_bool_flag:
        if not isinstance(value, bool):
            return None
        return _long(param.opts) if value != negative else _long(param.secondary_opts)
    flag = _long(param.opts)
    if flag is None:
        return None
    if isinstance(value, (list, tuple)) and param.multiple:
        return " ".join(f"{flag} {_shell(v)}" for v in value) or None
    if value is None:
        return f"no {flag}"
    return f"{flag} {_shell(value)}"


def _long(opts: Sequence[str]) -> Optional[str]:
    """The long spelling of an option (--concurrency rather than -c)."""
    return next((o for o in opts if o.startswith("--")), opts[0] if opts else None)


def _shell(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return shlex.quote(str(value))
