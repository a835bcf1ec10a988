"""The conformance kit (ustat_rl.conformance.kit) accepts faithful implementations and rejects
deliberately wrong ones.

The kit's tolerance is stated in its module docstring: a rounding bound for any implementation
whose working precision is float32 or finer, whatever dtype it is passed. Hypothesis runs
derandomized, so these tests are deterministic. The faithful implementations below are written
here, independently of ``ustat_rl.advantages.conventions``, in the frameworks' own style (a torch loop over
groups or a reshape, ``torch.std``, no shift trick), once computing in float32 (the inputs cast,
as TRL and verl's vectorised path do) and once in float64: both must pass against their
convention. Each wrong implementation differs from its convention by far more than the tolerance
on batches the strategies contain (ties, near-ties, singletons, offsets), so the kit must find
one, and it must find it in float32 and float64 batches alike where the issue is numerical.
"""

import doctest
import subprocess
import sys
import textwrap
import uuid
from collections import defaultdict

import numpy as np
import pytest
import torch

import ustat_rl.advantages.conventions as conventions_module
from ustat_rl.advantages.conventions import CONVENTIONS, advantages
from ustat_rl.conformance.adapters import TargetError
from ustat_rl.conformance.kit import (
    CONVENTION_NAMES,
    _compare,
    adapt,
    check_conformance,
    load_function,
    tolerance,
)
from ustat_rl.conformance.search import Search
from ustat_rl.interface import cli

pytestmark = pytest.mark.integration  # conformance runs: the kit's searches and its command line


def test_conventions_doctests():
    result = doctest.testmod(conventions_module)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("name", CONVENTION_NAMES)
def test_reference_conforms(name):
    report = check_conformance(lambda z, ids: advantages(name, z, ids), name)
    assert report.passed, report.summary()
    assert report.n_examples >= 100


# ---------------------------------------------------------------- faithful, framework-style
_STD_EPS = {"trl_group": 1e-4, "verl_grpo": 1e-6, "verl_grpo_vectorized": 1e-6,
            "openrlhf_group_norm": 1e-9, "slime_grpo": 1e-6}
_MEAN_ONLY = ("trl_none", "verl_grpo_nostd", "openrlhf_dr_grpo", "fullmean", "prime_rl_grpo",
              "verl_opo")
_LOO_ONLY = ("verl_rloo", "verl_rloo_vectorized", "openrlhf_rloo", "trl_rloo", "grpo")


def _group_rule(name, r, work):
    """One group's advantages, ``r`` a 1-D tensor in the working dtype."""
    n = r.numel()
    if name.startswith("verl_grpo_passk"):  # topk(2): the best sample gets r_max - r_second
        out = torch.zeros_like(r)
        top, where = torch.topk(r, 2)
        gap = top[0] - top[1]
        out[where[0]] = gap / (r.std() + 1e-6) if name == "verl_grpo_passk" else gap
        return out
    if name == "prime_rl_max_rl":  # a group of mean <= 0 gets 0, a singleton (z - z)/z
        mean = r.mean()
        return torch.zeros_like(r) if mean <= 0 else (r - mean) / mean
    if name in ("verl_reinforce_pp", "openrlhf_reinforce", "roll_batch"):  # no group baseline
        return r.clone()
    if name in ("areal_grpo", "areal_grpo_cbff54d6"):  # reward_norm; a group of one: std 1
        return (r - r.mean()) / ((r.std() if n > 1 else 1.0) + 1e-5)
    if name == "areal_rollout_norm":  # population std, 1e-8 added; group_size 1 untouched
        return (r - r.mean()) / (r.std(correction=0) + 1e-8) if n > 1 else r.clone()
    if name == "trl_async_grpo":  # population std, 1e-8 added; a singleton (z - z)/1e-8
        return (r - r.mean()) / (r.std(correction=0) + 1e-8)
    if name == "rllm_grpo":  # np.std (ddof 0), 1e-6 added; a group of one: mean 0, std 1
        return (r - r.mean()) / (r.std(correction=0) + 1e-6) if n > 1 else r / (1.0 + 1e-6)
    if name == "rllm_prpo":  # no group baseline
        return r.clone()
    if n == 1:  # the frameworks' singleton rules
        keeps = name in ("verl_grpo", "verl_grpo_vectorized", "verl_grpo_nostd", "verl_rloo",
                         "verl_reinforce_pp_baseline", "verl_gpg", "skyrl_maxrl",
                         "verl_opo")
        if name in ("verl_grpo", "verl_grpo_vectorized"):
            return r / (torch.tensor(1.0) + 1e-6)  # float32 std 1, as verl substitutes
        return r.clone() if keeps else torch.zeros_like(r)
    mean = r.mean()
    if name in _STD_EPS:
        return (r - mean) / (r.std() + _STD_EPS[name])
    if name == "skyrl_maxrl":  # the group mean plus 1e-6 divides, whatever its sign
        return (r - mean) / (mean + 1e-6)
    if name in _MEAN_ONLY or name in ("trl_batch", "verl_reinforce_pp_baseline",
                                      "openrlhf_reinforce_baseline", "verl_gpg",
                                      "nemo_rl_reinforce_pp", "slime_reinforce_pp_baseline",
                                      "rllm_reinforce_pp_baseline"):
        return r - mean
    loo = r - (r.sum() - r) / (n - 1)
    if name in _LOO_ONLY or name == "trl_rloo_normalized":
        return loo
    if name == "paper_algorithm2":  # the zero rule needs exact ties detected exactly
        return torch.zeros_like(r) if bool(torch.all(r == r[0])) else loo / r.std()
    if name == "nemo_rl_grpo":  # others' std; exact ties among the others keep the numerator
        out = torch.empty_like(r)
        for k in range(n):
            others = torch.cat([r[:k], r[k + 1:]])
            tie = bool(torch.all(others == others[0]))
            out[k] = loo[k] if tie else loo[k] / (others.std() + 1e-6)
        return out
    raise KeyError(name)


def framework_style(name, work):
    """``plain(rewards, group_ids)`` computing in ``work`` (rewards cast on entry)."""
    def fn(rewards, group_ids):
        z = torch.as_tensor(np.asarray(rewards)).to(work)
        members = defaultdict(list)
        for i, g in enumerate(np.asarray(group_ids).tolist()):
            members[g].append(i)
        out = torch.empty_like(z)
        for idx in members.values():
            out[idx] = _group_rule(name, z[idx], work)
        if name == "trl_batch":
            out = out / ((z.std() if z.numel() > 1 else 0.0) + 1e-4)
        elif name == "trl_rloo_normalized":
            out = (out - out.mean()) / (out.std() + 1e-4)
        elif name == "roll_batch":  # ROLL's reward_norm over the batch
            out = (out - out.mean()) / (out.std() + 1e-6)
        elif name in ("areal_grpo", "areal_grpo_cbff54d6"):  # then adv_norm over the batch
            out = (out - out.mean()) / (out.std() + 1e-5)
        elif name == "verl_gpg":  # alpha = N / max(#nonzero rewards, 1), a Python float
            out = out * (z.numel() / max(int(torch.count_nonzero(z)), 1))
        elif name in ("verl_reinforce_pp_baseline", "verl_reinforce_pp"):  # sum / (count + 1e-8)
            count = out.numel() + 1e-8
            centred = out - out.sum() / count
            var = (centred**2).sum() / count * (out.numel() / (out.numel() - 1))
            out = centred * torch.rsqrt(var + 1e-8)
        elif name == "slime_reinforce_pp_baseline":  # one pass: E[c^2] - E[c]^2, Bessel
            n = out.numel()
            mean = out.sum() / n
            var = (out * out).sum() / n - mean**2
            var = var * (n / (n - 1)) if n >= 2 else var
            out = (out - mean) * torch.rsqrt(var + 1e-8)
        elif name in ("openrlhf_reinforce_baseline", "openrlhf_reinforce",
                      "nemo_rl_reinforce_pp"):
            centred = out - out.mean()
            out = centred * (centred**2).mean().clamp(min=1e-8).rsqrt()
        elif name == "rllm_prpo":  # the batch's mean and population std, 1e-6 added
            out = (out - out.mean()) / (out.std(correction=0) + 1e-6)
        elif name == "rllm_reinforce_pp_baseline":  # population std of every c, mean kept
            out = out / (out.std(correction=0) + 1e-6)
        return out.numpy()
    return fn


@pytest.mark.parametrize("work", [torch.float32, torch.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", CONVENTION_NAMES)
def test_faithful_implementation_conforms_in_either_precision(name, work):
    report = check_conformance(framework_style(name, work), name)
    assert report.passed, report.summary()


def trl_style(rewards, num_generations):
    """TRL GRPOTrainer, scale_rewards="group": rewards cast to float32 as TRL holds them."""
    rewards = torch.as_tensor(rewards).to(torch.float32)
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
        by_id[index[i]].append(scores[i])
    mean, std = {}, {}
    for key, values in by_id.items():
        if len(values) == 1:
            mean[key], std[key] = torch.tensor(0.0), torch.tensor(1.0)
        else:
            stacked = torch.stack(values)
            mean[key], std[key] = stacked.mean(), stacked.std()
    out = scores.clone()
    for i in range(scores.shape[0]):
        out[i] = (scores[i] - mean[index[i]]) / (std[index[i]] + 1e-6)
    return out.unsqueeze(-1) * response_mask, None


def verl_vectorized_style(token_level_rewards, response_mask, index, floor=0.0):
    """verl's vectorised GRPO: float32 group statistics from np.unique's inverse; ``floor`` > 0
    is the variance floor it had before PR #6348 (the real bug)."""
    scores = token_level_rewards.sum(dim=-1)
    g = torch.as_tensor(np.unique(np.asarray(index), return_inverse=True)[1].reshape(-1))
    s32 = scores.to(torch.float32)
    count = torch.bincount(g).to(torch.float32)
    mean = torch.zeros(count.numel()).index_add_(0, g, s32) / count
    centred = s32 - mean[g]
    var = torch.zeros(count.numel()).index_add_(0, g, centred * centred) / (count - 1).clamp(min=1)
    std = torch.sqrt(torch.clamp(var, min=floor))
    single = count <= 1
    mean, std = torch.where(single, 0.0, mean), torch.where(single, 1.0, std)
    return ((scores - mean[g]) / (std[g] + 1e-6)).unsqueeze(-1) * response_mask, None


def openrlhf_style(rewards, n_samples_per_prompt):
    """OpenRLHF's group_norm: reshape, mean, Bessel std + 1e-9, in numpy."""
    grouped = np.asarray(rewards).reshape(-1, n_samples_per_prompt)
    centred = grouped - grouped.mean(axis=1, keepdims=True)
    return (centred / (grouped.std(axis=1, ddof=1, keepdims=True) + 1e-9)).reshape(-1)


@pytest.mark.parametrize("index", ["uid", "int"])
def test_framework_signatures_conform(index):
    for fn, convention, signature, tensors in (
            (trl_style, "trl_group", "trl", "torch"),
            (verl_style, "verl_grpo", "verl", "torch"),
            (verl_vectorized_style, "verl_grpo_vectorized", "verl", "torch"),
            (verl_vectorized_style, "verl_grpo", "verl", "torch"),
            (openrlhf_style, "openrlhf_group_norm", "trl", "numpy")):
        report = check_conformance(fn, convention, signature=signature, tensors=tensors,
                                   index=index)
        assert report.passed, report.summary()


def test_float64_constant_within_float32_rounding_conforms():
    """verl's singleton divisor is float32 1 + 1e-6; a float64 ``1 + 1e-6`` differs by 5e-8
    relative at z = 1e6, which no float32 implementation can resolve."""
    z, ids = np.array([1e6]), np.array([0])
    got = z / (1.0 + 1e-6)
    assert abs(got[0] - advantages("verl_grpo", z, ids)[0]) > 0.04
    call = adapt(lambda r, g: r / (1.0 + 1e-6))
    assert _compare(call, CONVENTIONS["verl_grpo"], z, ids) is None


def test_spread_below_one_float32_step_is_not_a_false_rejection():
    """At 1e6 + 0.04 the five rewards round to one float32 value (steps of 0.0625): TRL's float32
    mean is off by a float32 step and its std is 0, so every advantage is -0.893, while the
    float64 values spread from -0.074 to 0.111."""
    z = 1e6 + 0.04 + 1e-5 * np.array([0, 1, 2, 0, 1])
    ids = np.zeros(5, dtype=np.int64)
    call = adapt(trl_style, "trl", "torch")
    got = call(z, ids)
    expected = advantages("trl_group", z, ids)
    assert np.unique(z.astype(np.float32)).size == 1 and np.unique(got).size == 1
    assert np.max(np.abs(got - expected)) > 0.5
    assert np.all(np.abs(got - expected) <= tolerance("trl_group", z, ids, np.float64))


def test_tiny_float64_rewards_flushed_by_float32_code_are_not_rejected():
    z, ids = np.array([0.0, 1.57e-155, 1e-320, 0.5]), np.array([0, 0, 1, 1])
    call = adapt(framework_style("verl_grpo", torch.float32))
    assert _compare(call, CONVENTIONS["verl_grpo"], z, ids) is None


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
        counts[i] += 1
    single = torch.tensor([counts[i] == 1 for i in index])
    return out * (~single).unsqueeze(-1), None


def padding_not_masked(token_level_rewards, response_mask, index):
    out, _ = verl_style(token_level_rewards, response_mask, index)
    return out + (1 - response_mask), None


def full_mean_for_rloo(z, ids):
    return _per_group(z, ids, lambda r: r - r.mean())


def pre_6348_floor(token_level_rewards, response_mask, index):
    return verl_vectorized_style(token_level_rewards, response_mask, index, floor=1e-6)


def nemo_one_pass(z, ids):
    """NeMo-RL's leave-one-out std as it computes it, in the rewards' dtype: the others' sums
    as the group's sums minus the sample's, and the variance as E[x^2] - E[x]^2. Exact ties
    among the others get a std of rounding noise instead of 0, and a division by about 1e-6."""
    z = torch.as_tensor(np.asarray(z))
    out = torch.empty_like(z)
    for g in np.unique(ids):
        sel = torch.as_tensor(ids == g)
        r = z[sel]
        n = r.numel()
        b = (r.sum() - r) / (n - 1)
        sq = ((r * r).sum() - r * r) / (n - 1)
        std = ((sq - b * b) * ((n - 1) / (n - 2))).sqrt().nan_to_num(0.0)
        adv = r - b
        out[sel] = torch.where(std > 0, adv / (std + 1e-6), adv)
    return out.numpy()


WRONG = [  # (function, convention, signature, groups its smallest failing batch needs)
    (variance_floor, "trl_group", "plain", 1),
    (population_std, "trl_group", "plain", 1),
    (population_std, "openrlhf_group_norm", "plain", 1),
    (epsilon_inside_sqrt, "verl_grpo", "plain", 1),
    (mean_leaks_other_group, "fullmean", "plain", 2),
    (singleton_zero, "verl_grpo", "verl", 1),
    (padding_not_masked, "verl_grpo", "verl", 1),
    (full_mean_for_rloo, "openrlhf_rloo", "plain", 1),
    (pre_6348_floor, "verl_grpo_vectorized", "verl", 1),
    (nemo_one_pass, "nemo_rl_grpo", "plain", 1),
    (framework_style("verl_rloo", torch.float64), "verl_rloo_vectorized", "plain", 1),
    # the two differ on one-sample groups; the search's smallest batch is two of them
    # (np.array([0.0, 1.0]), each its own group), from which no group can be dropped
    (framework_style("openrlhf_reinforce_baseline", torch.float64), "verl_reinforce_pp_baseline",
     "plain", 2),
]


# the wrong rules take a Bessel variance of one-sample groups on purpose (NaN is a failure too)
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fn,convention,signature,groups", WRONG,
                         ids=[f"{w[0].__name__}-{w[1]}" for w in WRONG])
def test_wrong_implementations_are_rejected_in_either_dtype(fn, convention, signature, groups,
                                                            dtype):
    # the verdict in both dtypes; the shrunk smallest failing batch in float64 (the search draws
    # the same batches with or without shrinking, and shrinking, up to 20 s a case, is the cost)
    shrink = dtype == "float64"
    report = check_conformance(fn, convention, signature=signature,
                               search=Search(dtypes=(dtype,), shrink=shrink),
                               tensors="torch" if signature == "verl" else "numpy")
    assert not report.passed
    failure = report.failure
    assert failure is not None and failure.rewards.dtype == np.dtype(dtype)
    if shrink:
        assert np.unique(failure.group_ids).size == groups, report.summary()
        assert "smallest failing batch" in report.summary()


# ---------------------------------------------------------------- ids as frameworks pass them
def test_verl_adapter_passes_uuid_strings_or_contiguous_ints():
    seen = {}

    def record(token_level_rewards, response_mask, index):
        seen["index"] = index
        return token_level_rewards * 0, None

    z, ids = np.array([1.0, 0.0, 2.0, 3.0]), np.array([-7, 40, -7, 3])
    adapt(record, "verl", index="uid")(z, ids)
    labels = seen["index"]
    assert labels.dtype == object and all(str(uuid.UUID(s)) == s for s in labels)
    assert labels[0] == labels[2] and len(set(labels)) == 3
    adapt(record, "verl", index="int")(z, ids)
    assert seen["index"].tolist() == [0, 2, 0, 1]  # non-negative, contiguous 0..k-1


def test_trl_adapter_passes_contiguous_blocks():
    seen = []
    call = adapt(lambda r, G: seen.append((r.copy(), G)) or np.zeros(r.size), "trl")
    call(np.arange(6.0), np.array([5, 5, 5, -2, -2, -2]))
    assert seen[0][1] == 3 and seen[0][0].tolist() == list(range(6))
    with pytest.raises(ValueError, match="contiguous"):
        call(np.arange(4.0), np.array([1, 2, 1, 2]))


# ---------------------------------------------------------------- output validation
@pytest.mark.parametrize("bad,reason", [
    (lambda z, ids: advantages("grpo", z, ids) + 0j, "complex"),
    (lambda z, ids: advantages("grpo", z, ids).astype(str), "strings"),
    (lambda z, ids: np.array(["a"] * len(z)), "strings"),
    (lambda z, ids: np.zeros(len(z), dtype=np.int64), "dtype int64"),
    (lambda z, ids: np.zeros(len(z) + 1), "shape"),
])
def test_outputs_that_are_not_real_floating_arrays_do_not_conform(bad, reason):
    report = check_conformance(bad, "grpo", search=Search(max_examples=20))
    assert not report.passed and reason in report.failure.message
    assert "\n" not in report.failure.message


# ---------------------------------------------------------------- command line
@pytest.fixture
def module(tmp_path):
    path = tmp_path / "my_advantages.py"
    path.write_text(textwrap.dedent("""
        import numpy as np

        NOT_A_FUNCTION = 3

        def good(rewards, group_ids):
            out = np.empty(len(rewards))
            for g in np.unique(group_ids):
                sel = group_ids == g
                r = np.asarray(rewards, dtype=np.float64)[sel]
                out[sel] = r - (r.sum() - r) / (r.size - 1)
            return out

        def bad(rewards, group_ids):
            return np.asarray(rewards, dtype=np.float64) - np.mean(rewards)

        def complex_out(rewards, group_ids):
            return good(rewards, group_ids) + 1j
    """))
    return path


def _run(*args):
    try:
        return cli.main(["conformance", *args])
    except SystemExit as exc:  # argparse's usage errors
        return exc.code


def test_cli_exit_codes(module, capsys):
    assert _run(f"{module}:good", "--estimator", "openrlhf_rloo", "--max-examples", "50") == 0
    assert _run(f"{module}:bad", "--estimator", "openrlhf_rloo", "--max-examples", "50") == 1
    assert "smallest failing batch" in capsys.readouterr().out
    assert _run(f"{module}:complex_out", "--estimator", "grpo", "--max-examples", "20") == 1
    assert "returned complex values" in capsys.readouterr().out
    assert _run(f"{module}:good", "--estimator", "no_such") == 2
    assert _run("not_a_target", "--estimator", "grpo") == 2
    assert _run(f"{module}:good", "--estimator", "grpo", "--max-examples", "0") == 2
    capsys.readouterr()
    for target, words in ((f"{module}:missing", "has no attribute 'missing'"),
                          (f"{module}:NOT_A_FUNCTION", "is not callable")):
        assert _run(target, "--estimator", "grpo") == 2
        err = capsys.readouterr().err
        assert words in err and err.count("\n") == 1


def test_cli_accepts_every_convention(module, capsys):
    """``--estimator`` takes every name of CONVENTION_NAMES, the issue-29 rows included: a
    leave-one-out function fails verl's GPG (exit 1), a check that ran, not a usage error."""
    for name in CONVENTION_NAMES:
        assert cli._parse_args(["conformance", "m:f", "--estimator", name]).estimator == name
    assert _run(f"{module}:good", "--estimator", "verl_gpg", "--max-examples", "20") == 1
    assert "smallest failing batch" in capsys.readouterr().out


@pytest.mark.parametrize("body,words", [("raise RuntimeError('broken\\nsecond line')",
                                         "raised RuntimeError: broken"),
                                        ("import sys\nsys.exit(0)", "sys.exit(0)"),
                                        ("import sys\nsys.exit(3)", "sys.exit(3)"),
                                        ("import no_such_module_here", "ModuleNotFoundError")])
def test_module_that_fails_at_import_is_a_usage_error(tmp_path, capsys, body, words):
    path = tmp_path / "broken.py"
    path.write_text(body + "\ndef fn(z, ids):\n    return z\n")
    with pytest.raises(TargetError, match="importing"):
        load_function(f"{path}:fn")
    assert _run(f"{path}:fn", "--estimator", "grpo") == 2
    out, err = capsys.readouterr()
    assert words in err and err.count("\n") == 1 and out == ""


def test_sys_exit_at_import_is_a_usage_error_from_the_installed_command(tmp_path):
    """Through ``python -m ustat_rl.interface.cli``: a module calling sys.exit(0) at import must not make
    the command exit 0 ("conforms") without testing anything."""
    path = tmp_path / "exits.py"
    path.write_text("import sys\nsys.exit(0)\n")
    done = subprocess.run([sys.executable, "-m", "ustat_rl.interface.cli", "conformance", f"{path}:fn",
                           "--estimator", "grpo"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "sys.exit(0)" in done.stderr and done.stderr.count("\n") == 1 and done.stdout == ""


def test_cli_runs_as_a_module(tmp_path):
    """One end-to-end run through ``python -m ustat_rl.interface.cli`` (the installed command's path)."""
    module = tmp_path / "loo.py"
    module.write_text("from ustat_rl.advantages.conventions import advantages\n"
                      "def fn(z, ids):\n    return advantages('grpo', z, ids)\n")
    done = subprocess.run([sys.executable, "-m", "ustat_rl.interface.cli", "conformance", f"{module}:fn",
                           "--estimator", "verl_rloo", "--max-examples", "30"],
                          capture_output=True, text=True, timeout=300)
    # leave-one-out differs from verl's rloo only on one-sample groups (verl keeps z)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "group_ids = np.array([" in done.stdout


def test_check_batch_is_the_kits_comparison_on_one_batch():
    """``check_batch`` gives the search's verdict on the batch it is handed: a failure carrying
    that batch for a wrong implementation, None for a right one, and a named error for rewards
    that are not floating."""
    from ustat_rl.conformance.kit import check_batch

    z = np.array([0.0, 1.0, 1.0, 0.5, 0.5, 3.0], dtype=np.float32)
    ids = np.array([4, 4, 4, -1, -1, -1])
    assert check_batch(lambda r, g: advantages("verl_grpo", r, g), "verl_grpo", z, ids) is None
    failure = check_batch(lambda r, g: advantages("trl_group", r, g), "verl_grpo", z, ids)
    assert failure is not None and np.array_equal(failure.rewards, z)
    with pytest.raises(TypeError, match="`rewards`"):
        check_batch(lambda r, g: r, "verl_grpo", z.astype(np.int64), ids)


def test_nan_is_allowed_only_where_the_working_precision_cannot_resolve_the_spread():
    """A group whose spread float32 cannot resolve (tolerance inf) is unchecked: dividing by the
    std a reduction rounds to 0 gives NaN in a correct implementation, and whether it rounds to 0
    depends on the CPU's reduction order. NaN at a resolved sample still fails (control)."""
    from ustat_rl.conformance.kit import check_batch, tolerance

    z = np.array([1e6, 1e6, 1e6 + 0.0625, 1e6, 1.0, 2.0, 3.0, 5.0], dtype=np.float32)
    ids = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    unresolved = ~np.isfinite(tolerance("paper_algorithm2", z, ids, np.float32))
    assert unresolved.tolist() == [True] * 4 + [False] * 4

    def nan_where(mask):
        return lambda r, g: np.where(mask, np.nan, advantages("paper_algorithm2", r, g))

    assert check_batch(nan_where(unresolved), "paper_algorithm2", z, ids) is None
    failure = check_batch(nan_where(~unresolved), "paper_algorithm2", z, ids)
    assert failure is not None and failure.index >= 4
