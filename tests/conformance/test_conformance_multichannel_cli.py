"""``ustat-rl conformance`` on multi-reward rules (docs/conventions.md, "Rules of several reward
channels"): the kit of :mod:`ustat_rl.conformance.multichannel` from the command line.

The implementations are written here in numpy, TRL's order (reshape into ``(-1, G)``, Bessel
std, 1e-4 added): one correct in float32, one in float64, and planted bugs (the orders swapped,
the batch step dropped) that the same command rejects.
"""

import textwrap

import pytest

from ustat_rl.advantages.multichannel import multichannel_rule_names
from ustat_rl.interface import cli

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    path = tmp_path_factory.mktemp("impl") / "multireward_impl.py"
    path.write_text(textwrap.dedent("""
        import numpy as np

        def _groups(r, ids):
            G = int(np.sum(ids == ids[0]))
            return r.reshape(-1, G, r.shape[1]), G

        def _normalize_then_sum(rewards, ids, weights, work, batch_step=True):
            r = np.asarray(rewards, dtype=work)
            w = np.asarray(weights, dtype=work)
            grouped, G = _groups(r, ids)
            mean = grouped.mean(axis=1, keepdims=True)
            std = grouped.std(axis=1, ddof=1, keepdims=True) if G > 1 else 0.0 * mean
            x = ((grouped - mean) / (std + work(1e-4))).reshape(-1, r.shape[1]) @ w
            if not batch_step:
                return x
            return (x - x.mean()) / (x.std(ddof=1) + work(1e-4))

        def good32(rewards, ids, weights):
            return _normalize_then_sum(rewards, ids, weights, np.float32)

        def good64(rewards, ids, weights):
            return _normalize_then_sum(rewards, ids, weights, np.float64)

        def no_batch_step(rewards, ids, weights):
            return _normalize_then_sum(rewards, ids, weights, np.float64, batch_step=False)

        def sum_first(rewards, ids, weights):
            r = np.asarray(rewards, dtype=np.float64) @ np.asarray(weights, dtype=np.float64)
            G = int(np.sum(ids == ids[0]))
            s = r.reshape(-1, G)
            std = s.std(axis=1, ddof=1, keepdims=True) if G > 1 else 0.0 * s
            return ((s - s.mean(axis=1, keepdims=True)) / (std + 1e-4)).reshape(-1)
    """))
    return path


def _run(*args):
    try:
        return cli.main(["conformance", *args])
    except SystemExit as exc:  # argparse's usage errors
        return exc.code


@pytest.mark.parametrize("fn", ["good32", "good64"])
def test_a_correct_implementation_conforms(module, fn, capsys):
    assert _run(f"{module}:{fn}", "--estimator", "trl_normalize_then_sum", "--signature", "trl",
                "--max-examples", "60") == 0
    assert "trl_normalize_then_sum" in capsys.readouterr().out


@pytest.mark.parametrize("fn", ["no_batch_step", "sum_first"])
def test_a_planted_bug_is_rejected(module, fn, capsys):
    assert _run(f"{module}:{fn}", "--estimator", "trl_normalize_then_sum", "--signature", "trl",
                "--max-examples", "60") == 1
    assert "smallest failing batch" in capsys.readouterr().out


def test_fixed_weights_are_passed_and_checked(module, capsys):
    assert _run(f"{module}:good64", "--estimator", "trl_normalize_then_sum", "--signature",
                "trl", "--weights", "1,0.5", "--max-examples", "30") == 0
    for bad in ("1,x", "1,nan"):
        assert _run(f"{module}:good64", "--estimator", "trl_normalize_then_sum",
                    "--weights", bad) == 2
        err = capsys.readouterr().err
        assert "--weights" in err and err.count("\n") == 1


def test_options_that_do_not_apply_are_refused_in_one_line(module, capsys):
    capsys.readouterr()
    for extra in (["--signature", "verl"], ["--torch"], ["--index", "int"]):
        assert _run(f"{module}:good64", "--estimator", "verl_gdpo", *extra) == 2
        err = capsys.readouterr().err
        assert "do not apply" in err and err.count("\n") == 1
    assert _run(f"{module}:good64", "--estimator", "trl_group", "--weights", "1,1") == 2
    assert "multi-reward" in capsys.readouterr().err
    assert _run(f"{module}:missing", "--estimator", "verl_gdpo") == 2
    assert "has no attribute 'missing'" in capsys.readouterr().err


def test_every_multireward_rule_is_a_choice(capsys):
    """argparse takes each name (an unknown one exits 2 from argparse with "invalid choice");
    ``--max-examples 0`` then stops before anything is loaded."""
    for name in multichannel_rule_names():
        assert _run("x:y", "--estimator", name, "--max-examples", "0") == 2
        err = capsys.readouterr().err
        assert "--max-examples must be >= 1" in err and "invalid choice" not in err


def test_every_multireward_rule_has_its_row_in_the_conventions_page():
    from pathlib import Path

    from ustat_rl.advantages.multichannel import get_multichannel_rule

    page = (Path(__file__).resolve().parents[2] / "docs" / "conventions.md").read_text()
    for name in multichannel_rule_names():
        source = get_multichannel_rule(name).provenance
        assert f"`{name}`" in page and source.commit[:8] in page and source.repository in page
        assert all(p.strip() in page for p in source.path.split(","))
