"""A simulation script's options built from its ``Config`` dataclass, so each default is
written once.

A script declares an option as a dataclass field made by :func:`option`: the field's default is
the full run's value, the field's metadata carries the flag, its help text, its argparse
``type`` (for example the validated converters of :mod:`ustat_rl.runs.script_args`) and, where a
``--quick`` run uses a smaller value, that value. :func:`add_config_arguments` adds one argparse
argument per such field; :func:`resolve_quick` fills the options the command line left unset
with the quick or the full value; :func:`parser_default_mismatches` compares a parser with its
dataclass, so a second, hand-written copy of a default is caught by a test.

Options whose value depends on ``--quick`` get the parser default ``None`` (so a script can tell
"not given" from "given"); every other option's parser default is the field's default.
"""

from __future__ import annotations

import argparse
import dataclasses

__all__ = [
    "add_config_arguments",
    "config_options",
    "option",
    "parser_default_mismatches",
    "resolve_quick",
]

_NO_QUICK = object()


def option(default, *, flag: str, help: str | None, type=None, nargs=None, choices=None,
           quick=_NO_QUICK) -> dataclasses.Field:
    """A dataclass field that is also a command-line option.

    Parameters
    ----------
    default
        The field's default: the value of a full run (and of the option when not given).
        Tuples are kept as tuples; with ``nargs`` a parsed list is turned into a tuple by
        :func:`resolve_quick`.
    flag : str
        The option's flag, for example ``"--reps"``; its argparse ``dest`` (``reps``) is the
        attribute the parsed namespace carries.
    help : str or None
        The option's help text (``None``: the option is listed without one).
    type : callable, optional
        Argparse ``type=`` converter (validation happens while parsing).
    nargs : str or int, optional
        Argparse ``nargs=`` for list-valued options.
    choices : sequence, optional
        Argparse ``choices=``.
    quick : optional
        The value a ``--quick`` run uses instead of ``default``. When given, the parser default
        is ``None`` and :func:`resolve_quick` chooses between the two values.

    Returns
    -------
    dataclasses.Field
        To be assigned to a field of a dataclass.
    """
    if not flag.startswith("--"):
        raise ValueError(f"flag must start with '--', got {flag!r}")
    meta = {"flag": flag, "help": help, "type": type, "nargs": nargs, "choices": choices}
    if quick is not _NO_QUICK:
        meta["quick"] = quick
    return dataclasses.field(default=default, metadata=meta)


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def config_options(config_cls) -> list[dataclasses.Field]:
    """The fields of ``config_cls`` made by :func:`option`, in declaration order.

    Parameters
    ----------
    config_cls : dataclass type

    Returns
    -------
    list of dataclasses.Field
    """
    return [f for f in dataclasses.fields(config_cls) if "flag" in f.metadata]


def _parser_default(fld: dataclasses.Field):
    if "quick" in fld.metadata:
        return None
    default = fld.default
    if fld.metadata["nargs"] is not None and isinstance(default, tuple):
        return list(default)
    return default


def add_config_arguments(parser: argparse.ArgumentParser, config_cls, names=None) -> None:
    """Add one argument to ``parser`` per :func:`option` field of ``config_cls``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
    config_cls : dataclass type
        Its :func:`option` fields give each argument's flag, default, help, type, nargs and
        choices.
    names : sequence of str, optional
        Field names, in the order the help lists them (default: every option field, in
        declaration order); for a dataclass whose field order is fixed by positional callers.
    """
    options = {f.name: f for f in config_options(config_cls)}
    if names is not None:
        unknown = [n for n in names if n not in options]
        if unknown:
            raise ValueError(f"names: {unknown} are not option fields of {config_cls.__name__}")
        options = {n: options[n] for n in names}
    for fld in options.values():
        meta = fld.metadata
        kwargs = {"default": _parser_default(fld), "help": meta["help"]}
        for key in ("type", "nargs", "choices"):
            if meta[key] is not None:
                kwargs[key] = meta[key]
        parser.add_argument(meta["flag"], dest=_dest(meta["flag"]), **kwargs)


def resolve_quick(args: argparse.Namespace, config_cls) -> argparse.Namespace:
    """Fill the quick-dependent options the command line left unset; lists become tuples.

    An option declared with ``quick=`` and not given takes its quick value when
    ``args.quick`` is true and its field default otherwise.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed arguments (changed in place).
    config_cls : dataclass type

    Returns
    -------
    argparse.Namespace
        ``args``.
    """
    quick = bool(getattr(args, "quick", False))
    for fld in config_options(config_cls):
        dest = _dest(fld.metadata["flag"])
        value = getattr(args, dest)
        if value is None and "quick" in fld.metadata:
            value = fld.metadata["quick"] if quick else fld.default
        if isinstance(value, list):
            value = tuple(value)
        setattr(args, dest, value)
    return args


def parser_default_mismatches(parser: argparse.ArgumentParser, config_cls) -> list[str]:
    """Where ``parser`` disagrees with the :func:`option` fields of ``config_cls``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
    config_cls : dataclass type

    Returns
    -------
    list of str
        One line per option that is missing from the parser or whose parser default, help,
        type, nargs or choices differ from the field's; empty when they agree.
    """
    actions = {a.option_strings[0]: a for a in parser._actions if a.option_strings}
    problems = []
    for fld in config_options(config_cls):
        meta = fld.metadata
        action = actions.get(meta["flag"])
        if action is None:
            problems.append(f"{meta['flag']}: in {config_cls.__name__} but not in the parser")
            continue
        expected = {"default": _parser_default(fld), "help": meta["help"], "type": meta["type"],
                    "nargs": meta["nargs"], "choices": meta["choices"],
                    "dest": _dest(meta["flag"])}
        for key, want in expected.items():
            got = getattr(action, key)
            if got != want:
                problems.append(f"{meta['flag']}: parser {key} {got!r}, "
                                f"{config_cls.__name__}.{fld.name} says {want!r}")
    return problems
