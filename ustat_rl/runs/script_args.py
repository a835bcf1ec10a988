"""Argument checks shared by the simulation scripts (``simulations/*.py``) and the ``ustat-rl``
command: one rule per kind of option, each failure an argparse usage error (one line naming the
option, exit code 2) raised while the arguments are parsed, before any work.

* :func:`seed_type`, :func:`positive_int`: argparse ``type=`` converters for integer options.
* :func:`check_device`: ``--device`` is ``cpu``, ``cuda`` or ``cuda:N`` and is there (CUDA
  asked for on a machine without it is refused here, not deep inside torch).
* :func:`check_script_args`: the device and the output folder of a script, in one call.
"""

from __future__ import annotations

import argparse

from .._paths import parser_check_outputs

__all__ = ["check_device", "check_script_args", "positive_int", "seed_type"]


def _integer(text: str, minimum: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be {what}, got {value}")
    return value


def seed_type(text: str) -> int:
    """A root seed: an integer >= 0 (numpy's SeedSequence refuses negative entropy)."""
    return _integer(text, 0, "an integer >= 0")


def positive_int(text: str) -> int:
    """An integer >= 1 (counts: seeds, iterations, prompts)."""
    return _integer(text, 1, "an integer >= 1")


def check_device(parser: argparse.ArgumentParser, device, option: str = "--device") -> None:
    """``parser.error`` unless ``device`` is ``None`` (automatic) or a usable torch device.

    The rule is :func:`ustat_rl.montecarlo.torch_backend.resolve_device`'s: ``cpu``, ``cuda``
    or ``cuda:N``, with CUDA available and ``N`` below the number of visible devices.
    """
    if device is None:
        return
    from ..montecarlo.torch_backend import resolve_device

    try:
        resolve_device(device)
    except ValueError as exc:
        parser.error(f"{option}: {exc}")


def check_script_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The checks every simulation script shares: ``--device`` (if the script has one) and the
    output folder ``args.out`` (writable, not a file)."""
    if hasattr(args, "device"):
        check_device(parser, args.device)
    parser_check_outputs(parser, [(args.out, "--out", "folder")])
