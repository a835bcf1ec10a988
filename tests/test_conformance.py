"""The conformance kit (ustat_rl.conformance) accepts faithful implementations and rejects
deliberately wrong ones.

The kit's tolerance is stated in its module docstring (relative, scaled by the dtype's epsilon,
the reward scale and the denominator). Hypothesis runs derandomized, so these tests are
deterministic; each wrong implementation below differs from its convention by far more than the
tolerance on batches the strategies contain (ties, near-ties, singletons, offsets), so the kit
must find one. Faithful implementations are written here in the frameworks' own style (torch
float32 where the input is float32, no shift trick), to show the tolerance is not too tight.
"""

import doctest
import subprocess
import sys
import textwrap
import time
from collections import defaultdict

import numpy as np
import pytest
import torch

import ustat_rl.conventions as conventions_module
from ustat_rl import cli
from ustat_rl.conformance import CONVENTION_NAMES, check_conformance
from ustat_rl.conventions import advantages

#: Upper bound on one convention's run with the default 200 batches (the kit's promise).
SECONDS_PER_CONVENTION = 30.0


def test_conventions_doctests():
    result = doctest.testmod(conventions_module)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("name", CONVENTION_NAMES)
def test_reference_conforms_quickly(name):
    start = time.perf_counter()
    report = check_conformance(lambda z, ids: advantages(name, z, ids), name)
    assert report.passed, report.summary()
    assert report.n_examples >= 100
    assert time.perf_counter() - start < SECONDS_PER_CONVENTION


# ---------------------------------------------------------------- faithful, framework-style
def trl_style(rewards, num_generations):
    """TRL GRPOTrainer's order of operations, scale_rewards="group", in the input's dtype."""
    grouped = rewards.view(-1, num_generations)
    mean = grouped.mean(dim=1).repeat_interleave(num_generations)
    if num_generations > 1:
        std = grouped.std(dim=1).repeat_interleave(num_generations)
    else:
        std = torch.zeros_like(rewards)
    return (rewards - mean) / (std + 1e-4)


def verl_style(token_level_rewards, response_mask, index):
    """verl's GRPO outcome advantage: a loop over index groups, singleton mean 0 and std 1."""
    scores = token_level_rewards.sum(dim=-1)
    by_id = defaultdict(list)
    for i in range(scores.shape[0]):
        by_id[int(index[i])].append(scores[i])
    mean, std = {}, {}
    for key, values in by_id.items():
        if len(values) == 1:
            mean[key], std[key] = torch.tensor(0.0), torch.tensor(1.0)
        else:
            stacked = torch.stack(values)
            mean[key], std[key] = stacked.mean(), stacked.std()
    out = scores.clone()
    for i in range(scores.shape[0]):
        key = int(index[i])
        out[i] = (scores[i] - mean[key]) / (std[key] + 1e-6)
    return out.unsqueeze(-1) * response_mask, None


def openrlhf_style(rewards, n_samples_per_prompt):
    """OpenRLHF's group_norm: reshape, mean, Bessel std + 1e-9, in numpy."""
    grouped = np.asarray(rewards).reshape(-1, n_samples_per_prompt)
    centred = grouped - grouped.mean(axis=1, keepdims=True)
    return (centred / (grouped.std(axis=1, ddof=1, keepdims=True) + 1e-9)).reshape(-1)


def test_framework_style_implementations_conform():
    for fn, convention, signature, tensors in (
            (trl_style, "trl_group", "trl", "torch"),
            (verl_style, "verl_grpo", "verl", "torch"),
            (openrlhf_style, "openrlhf_group_norm", "trl", "numpy")):
        report = check_conformance(fn, convention, signature=signature, tensors=tensors)
        assert report.passed, report.summary()


# ---------------------------------------------------------------- deliberately wrong
def _per_group(z, ids, rule):
    z = np.asarray(z, dtype=np.float64)
    out = np.empty_like(z)
    for g in np.unique(ids):
        sel = ids == g
        out[sel] = rule(z[sel])
    return out


def variance_floor(z, ids):
    return _per_group(z, ids, lambda r: (r - r.mean()) / np.sqrt(max(r.var(ddof=1), 1e-4)))


def population_std(z, ids):
    return _per_group(z, ids, lambda r: (r - r.mean()) / (r.std() + 1e-4))


def epsilon_inside_sqrt(z, ids):
    return _per_group(z, ids, lambda r: (r - r.mean()) / np.sqrt(r.var(ddof=1) + 1e-6))


def mean_leaks_other_group(z, ids):
    """Centres each group on the mean of itself and the group with the next id."""
    z = np.asarray(z, dtype=np.float64)
    keys = np.unique(ids)
    out = np.empty_like(z)
    for k, g in enumerate(keys):
        pool = np.isin(ids, keys[k:k + 2])
        out[ids == g] = z[ids == g] - z[pool].mean()
    return out


def singleton_zero(token_level_rewards, response_mask, index):
    """verl GRPO, except a one-sample group gets 0 instead of z / (1 + 1e-6)."""
    out, _ = verl_style(token_level_rewards, response_mask, index)
    counts = defaultdict(int)
    for i in index:
        counts[int(i)] += 1
    single = torch.tensor([counts[int(i)] == 1 for i in index])
    return out * (~single).unsqueeze(-1), None


def padding_not_masked(token_level_rewards, response_mask, index):
    out, _ = verl_style(token_level_rewards, response_mask, index)
    return out + (1 - response_mask), None


def full_mean_for_rloo(z, ids):
    return _per_group(z, ids, lambda r: r - r.mean())


WRONG = [
    (variance_floor, "trl_group", "plain"),
    (population_std, "trl_group", "plain"),
    (population_std, "openrlhf_group_norm", "plain"),
    (epsilon_inside_sqrt, "verl_grpo", "plain"),
    (mean_leaks_other_group, "verl_grpo_nostd", "plain"),
    (singleton_zero, "verl_grpo", "verl"),
    (padding_not_masked, "verl_grpo", "verl"),
    (full_mean_for_rloo, "openrlhf_rloo", "plain"),
]


# the wrong rules take a Bessel variance of one-sample groups on purpose (NaN is a failure too)
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("fn,convention,signature", WRONG, ids=[w[0].__name__ for w in WRONG])
def test_wrong_implementations_are_rejected_with_a_small_example(fn, convention, signature):
    report = check_conformance(fn, convention, signature=signature,
                               tensors="torch" if signature == "verl" else "numpy")
    assert not report.passed
    failure = report.failure
    assert failure is not None and failure.rewards.size <= 8, report.summary()
    assert "smallest failing batch" in report.summary()


def test_cli_exit_codes(tmp_path, capsys):
    module = tmp_path / "my_advantages.py"
    module.write_text(textwrap.dedent("""
        import numpy as np

        def good(rewards, group_ids):
            out = np.empty(len(rewards))
            for g in np.unique(group_ids):
                sel = group_ids == g
                r = np.asarray(rewards, dtype=np.float64)[sel]
                out[sel] = r - (r.sum() - r) / (r.size - 1)
            return out

        def bad(rewards, group_ids):
            return np.asarray(rewards, dtype=np.float64) - np.mean(rewards)
    """))

    def run(*args):
        try:
            return cli.main(["conformance", *args])
        except SystemExit as exc:  # argparse's usage errors
            return exc.code

    assert run(f"{module}:good", "--convention", "openrlhf_rloo", "--max-examples", "50") == 0
    assert run(f"{module}:bad", "--convention", "openrlhf_rloo", "--max-examples", "50") == 1
    assert "smallest failing batch" in capsys.readouterr().out
    assert run(f"{module}:good", "--convention", "no_such") == 2
    assert run(f"{module}:missing", "--convention", "grpo") == 2
    assert run("not_a_target", "--convention", "grpo") == 2
    assert run(f"{module}:good", "--convention", "grpo", "--max-examples", "0") == 2


def test_cli_runs_as_a_module(tmp_path):
    """One end-to-end run through ``python -m ustat_rl.cli`` (the installed command's path)."""
    module = tmp_path / "loo.py"
    module.write_text("from ustat_rl.conventions import advantages\n"
                      "def fn(z, ids):\n    return advantages('grpo', z, ids)\n")
    done = subprocess.run([sys.executable, "-m", "ustat_rl.cli", "conformance", f"{module}:fn",
                           "--convention", "verl_rloo", "--max-examples", "30"],
                          capture_output=True, text=True, timeout=300)
    # leave-one-out differs from verl's rloo only on one-sample groups (verl keeps z)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "group_ids = np.array([" in done.stdout
