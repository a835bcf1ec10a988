"""Each simulation's defaults live in its ``Config`` dataclass: the parser is built from it.

For every converted script the parser's defaults, help texts and converters equal the
dataclass's (so a second, hand-written copy of a default cannot come back unnoticed), and the
same comparison rejects a planted parser whose default was written by hand and differs.
"""

from __future__ import annotations

import argparse
import dataclasses

import pytest
from script_loader import load_script

from ustat_rl.runs.script_args import positive_int, seed_type
from ustat_rl.runs.script_config import (
    add_config_arguments,
    config_options,
    option,
    parser_default_mismatches,
    resolve_quick,
)

pytestmark = pytest.mark.fast

CONVERTED = [
    "simulations/allocation_training.py",
    "simulations/gradient_mse.py",
    "simulations/limit_law.py",
    "simulations/make_transformer_policies.py",
    "simulations/optimal_group_size.py",
    "simulations/pilot_coverage.py",
    "simulations/small_pilot_coverage.py",
    "simulations/transformer_aggregation_bias.py",
    "simulations/transformer_gradient_mse.py",
    "simulations/transformer_group_size.py",
]


@dataclasses.dataclass(frozen=True)
class _Demo:
    n_runs: int = option(100, flag="--runs", type=positive_int, quick=5, help="runs")
    seed: int = option(7, flag="--seed", type=seed_type, help="root seed")
    sizes: tuple = option((2, 4), flag="--sizes", type=positive_int, nargs="+", help="sizes")
    label: str = "not an option"


def _demo_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    add_config_arguments(parser, _Demo)
    return parser


@pytest.mark.parametrize("relative", CONVERTED)
def test_script_parser_defaults_are_the_config_defaults(relative):
    script = load_script(relative)
    options = config_options(script.Config)
    assert options, f"{relative}: Config declares no option"
    assert parser_default_mismatches(script.build_parser(), script.Config) == []
    # a not-quick parse with no arguments gives every option its field default
    args = resolve_quick(script.build_parser().parse_args([]), script.Config)
    for fld in options:
        dest = fld.metadata["flag"].lstrip("-").replace("-", "_")
        assert getattr(args, dest) == fld.default, (relative, fld.name)


def test_parser_from_the_dataclass_agrees_and_resolves_quick_and_full():
    parser = _demo_parser()
    assert parser_default_mismatches(parser, _Demo) == []
    full = resolve_quick(parser.parse_args([]), _Demo)
    assert (full.runs, full.seed, full.sizes) == (100, 7, (2, 4))
    quick = resolve_quick(parser.parse_args(["--quick"]), _Demo)
    assert (quick.runs, quick.seed) == (5, 7)
    given = resolve_quick(parser.parse_args(["--quick", "--runs", "9", "--sizes", "3"]), _Demo)
    assert (given.runs, given.sizes) == (9, (3,))
    assert "label" not in vars(full)


def test_hand_written_different_default_is_detected():
    """Negative control: a parser whose ``--seed`` default was copied by hand and drifted."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=positive_int, default=None, help="runs")
    parser.add_argument("--seed", type=seed_type, default=8, help="root seed")
    parser.add_argument("--sizes", type=positive_int, nargs="+", default=[2, 4], help="sizes")
    problems = parser_default_mismatches(parser, _Demo)
    assert len(problems) == 1 and problems[0].startswith("--seed: parser default 8")


def test_missing_option_and_other_converter_are_detected():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=None, help="runs")
    parser.add_argument("--seed", type=seed_type, default=7, help="root seed")
    problems = parser_default_mismatches(parser, _Demo)
    assert any(p.startswith("--runs: parser type") for p in problems)
    assert any(p.startswith("--sizes: in _Demo but not in the parser") for p in problems)


def test_option_refuses_a_flag_without_dashes():
    with pytest.raises(ValueError, match="flag"):
        option(1, flag="runs", help="runs")


def test_names_choose_the_help_order_and_refuse_unknown_fields():
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, _Demo, ["seed", "n_runs", "sizes"])
    flags = [a.option_strings[0] for a in parser._actions if a.option_strings][1:]
    assert flags == ["--seed", "--runs", "--sizes"]
    assert parser_default_mismatches(parser, _Demo) == []
    with pytest.raises(ValueError, match="label"):
        add_config_arguments(argparse.ArgumentParser(), _Demo, ["label"])
