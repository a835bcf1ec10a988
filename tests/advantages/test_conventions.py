"""Named advantage conventions (ustat_rl.advantages.conventions; docs/conventions.md).

Each convention is checked against a second, literal implementation written here with torch
tensor operations in the frameworks' own order (group loop, ``torch.std`` with its default Bessel
correction, epsilon added where the framework adds it). Both routes run in float64, so they
agree to rounding: the tolerance is ``1e-12`` relative to the advantage size plus ``1e-12``.
"""

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from ustat_rl.advantages.conventions import (
    CONVENTION_NAMES,
    CONVENTIONS,
    VERL_SINGLETON_DIVISOR,
    advantages,
    get_convention,
)

pytestmark = pytest.mark.fast

RTOL = ATOL = 1e-12


def _literal(name, z, ids):
    """The convention as the frameworks write it: a loop over groups in torch."""
    z = torch.tensor(z, dtype=torch.float64)
    out = torch.empty_like(z)
    groups = {}
    for i, g in enumerate(ids):
        groups.setdefault(int(g), []).append(i)
    for members in groups.values():
        idx = torch.tensor(members)
        r = z[idx]
        n = len(members)
        mean = r.mean()
        std = r.std() if n > 1 else None
        if name == "trl_group":
            out[idx] = (r - mean) / ((std if n > 1 else 0.0) + 1e-4)
        elif name in ("trl_none", "openrlhf_dr_grpo", "fullmean", "prime_rl_grpo"):
            out[idx] = r - mean
        elif name == "trl_async_grpo":  # numpy's std: ddof 0
            out[idx] = (r - mean) / (r.std(correction=0) + 1e-8)
        elif name == "skyrl_maxrl":  # a singleton keeps z (mean 0 substituted, no division)
            out[idx] = (r - mean) / (mean + 1e-6) if n > 1 else r
        elif name == "slime_grpo":
            out[idx] = (r - mean) / (std + 1e-6)
        elif name in ("verl_grpo", "verl_grpo_vectorized"):
            mean, std = (mean, std) if n > 1 else (torch.tensor(0.0), torch.tensor(1.0))  # float32, as verl
            out[idx] = (r - mean) / (std + 1e-6)
        elif name == "verl_grpo_nostd":
            out[idx] = r - (mean if n > 1 else 0.0)
        elif name == "verl_opo":  # equal lengths T: sum(T z)/sum(T), baseline 0 for a singleton
            T = torch.full_like(r, 3.0)
            out[idx] = r - ((T * r).sum() / T.sum() if n > 1 else 0.0)
        elif name == "openrlhf_group_norm":
            out[idx] = (r - mean) / (std + 1e-9)
        elif name in ("verl_rloo", "verl_rloo_vectorized", "openrlhf_rloo", "trl_rloo", "grpo",
                      "trl_rloo_normalized"):
            if n > 1:
                out[idx] = r - (r.sum() - r) / (n - 1)
            else:
                out[idx] = r if name == "verl_rloo" else torch.zeros_like(r)
        elif name == "trl_batch":
            out[idx] = r - mean
        elif name == "verl_reinforce_pp_baseline":
            out[idx] = r - (mean if n > 1 else 0.0)
        elif name == "openrlhf_reinforce_baseline":
            out[idx] = r - mean
        elif name in ("nemo_rl_reinforce_pp",  # a singleton's baseline is its reward
                      "slime_reinforce_pp_baseline"):
            out[idx] = r - mean if n > 1 else torch.zeros_like(r)
        elif name == "nemo_rl_grpo":
            for k, i in enumerate(members):
                others = torch.cat([r[:k], r[k + 1:]])
                s = others.std()
                out[i] = (r[k] - others.mean()) / (s + 1e-6) if s > 0 else r[k] - others.mean()
        elif name == "paper_algorithm2":
            loo = r - (r.sum() - r) / (n - 1)
            out[idx] = loo / std if std > 0 else torch.zeros_like(r)
        elif name in ("verl_grpo_passk", "verl_grpo_passk_nostd"):  # needs n >= 2, as verl
            top, where = torch.topk(r, 2)
            best = torch.zeros_like(r)
            best[where[0]] = (top[0] - top[1]) / (std + 1e-6 if name == "verl_grpo_passk" else 1)
            out[idx] = best
        elif name == "verl_gpg":  # scaled by N / max(#nonzero, 1) over the batch below
            out[idx] = r - (mean if n > 1 else 0.0)
        elif name in ("verl_reinforce_pp", "openrlhf_reinforce", "roll_batch"):  # no group baseline
            out[idx] = r
        elif name == "prime_rl_max_rl":
            out[idx] = (r - mean) / mean if mean > 0 else torch.zeros_like(r)
        elif name == "areal_grpo":  # reward_norm per group; a group of one: mean z, std 1
            out[idx] = (r - mean) / ((std if n > 1 else 1.0) + 1e-5)
        elif name == "rllm_grpo":  # np.std (ddof 0); a group of one: mean 0, std 1
            out[idx] = ((r - mean) / (r.std(correction=0) + 1e-6) if n > 1
                        else r / (1.0 + 1e-6))
        elif name == "areal_grpo_cbff54d6":  # each trajectory group, ragged or not
            out[idx] = (r - mean) / ((std if n > 1 else 1.0) + 1e-5)
        elif name == "areal_rollout_norm":  # population std + 1e-8; group_size 1 untouched
            out[idx] = (r - mean) / (r.std(correction=0) + 1e-8) if n > 1 else r
        elif name == "rllm_prpo":  # no group baseline
            out[idx] = r
        elif name == "rllm_reinforce_pp_baseline":  # a singleton: z - z
            out[idx] = r - mean
        else:
            raise KeyError(name)
    if name == "rllm_prpo":  # the batch's mean and population std, 1e-6 added
        out = (out - out.mean()) / (out.std(correction=0) + 1e-6)
    elif name == "rllm_reinforce_pp_baseline":  # population std of every c, no mean taken out
        out = out / (out.std(correction=0) + 1e-6)
    if name == "trl_batch":
        out = out / ((z.std() if z.numel() > 1 else 0.0) + 1e-4)
    elif name == "trl_rloo_normalized":
        out = (out - out.mean()) / (out.std() + 1e-4)
    elif name == "roll_batch":  # ROLL's reward_norm, batch mean and batch std
        out = (out - out.mean()) / (out.std() + 1e-6)
    elif name in ("areal_grpo", "areal_grpo_cbff54d6"):  # then adv_norm over the batch
        out = (out - out.mean()) / (out.std() + 1e-5)
    elif name == "verl_gpg":
        out = out * (z.numel() / max(int(torch.count_nonzero(z)), 1))
    elif name in ("verl_reinforce_pp_baseline", "verl_reinforce_pp"):  # masked_mean: / (N + 1e-8)
        count = out.numel() + 1e-8
        centred = out - out.sum() / count
        var = (centred**2).sum() / count * out.numel() / (out.numel() - 1)
        out = centred * torch.rsqrt(var + 1e-8)
    elif name == "slime_reinforce_pp_baseline":  # one-pass variance, Bessel from N = 2
        mean = out.sum() / out.numel()
        var = (out**2).sum() / out.numel() - mean**2
        var = var * out.numel() / (out.numel() - 1) if out.numel() >= 2 else var
        out = (out - mean) * torch.rsqrt(var + 1e-8)
    elif name in ("openrlhf_reinforce_baseline", "openrlhf_reinforce",
                  "nemo_rl_reinforce_pp"):  # population, clamped
        centred = out - out.mean()
        out = centred * (centred**2).mean().clamp(min=1e-8).rsqrt()
    return out.numpy()


def _example(spec, rng):
    """Three or four groups in shuffled order, ragged where the convention allows it."""
    sizes = [4, 4, 4] if spec.equal_group_sizes else [2, 5, 3, 1]
    sizes = [max(size, spec.min_group_size) for size in sizes]
    ids = np.repeat(np.array([7, -3, 12, 40])[:len(sizes)], sizes)
    z = rng.normal(size=ids.size)
    z[ids == -3] = 0.25  # one all-equal group
    order = rng.permutation(ids.size)
    return z[order], ids[order]


@pytest.mark.parametrize("name", CONVENTION_NAMES)
def test_convention_matches_literal_framework_formula(name):
    spec = get_convention(name)
    z, ids = _example(spec, np.random.default_rng(0))
    expected = _literal(name, z, ids)
    got = advantages(name, z, ids)
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)
    # negative control: the same comparison rejects the population std (a real slip), which
    # multiplies each advantage by sqrt(n / (n - 1)) of the sample count its std runs over
    if spec.bessel:
        _, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
        n = np.full(z.size, z.size) if spec.statistics == "batch" else counts[inverse]
        wrong = got * np.sqrt(n / np.maximum(n - 1, 1))
        assert not np.allclose(wrong, expected, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name", [n for n in CONVENTION_NAMES
                                  if CONVENTIONS[n].statistics == "group"])
def test_all_equal_groups_get_exact_zero_even_at_large_offsets(name):
    spec = CONVENTIONS[name]
    ids = np.repeat([0, 1], 4)
    z = np.array([1e6 + 0.1] * 4 + [0.0, 1.0, 0.0, 0.5])
    a = advantages(spec, z, ids)
    assert np.all(a[:4] == 0.0)
    if spec.centring.is_affine:
        assert np.all(a[4:] != 0.0)
    else:  # Pass@k moves the group's unique best sample only
        assert a[5] != 0.0 and np.count_nonzero(a[4:]) == 1


@pytest.mark.parametrize("G", [2, 3, 8])
def test_full_mean_is_shrunk_leave_one_out(G):
    """z - m_g = ((G - 1)/G) (z - leave-one-out mean) (docs/theory.md C2), for the no-std options."""
    rng = np.random.default_rng(G)
    ids = np.repeat(np.arange(5), G)
    z = rng.normal(size=ids.size)
    loo = advantages("grpo", z, ids)
    for name in ("trl_none", "verl_grpo_nostd", "openrlhf_dr_grpo", "fullmean"):
        np.testing.assert_allclose(advantages(name, z, ids), (G - 1) / G * loo, rtol=1e-12,
                                   atol=1e-12)
    # with the std division the relation is to Algorithm 2, not to leave-one-out
    std_norm = advantages("trl_group", z, ids)
    assert not np.allclose(std_norm, (G - 1) / G * loo, rtol=1e-3)
    alg2 = advantages("paper_algorithm2", z, ids)
    np.testing.assert_allclose(advantages("openrlhf_group_norm", z, ids), (G - 1) / G * alg2,
                               rtol=1e-7)


def test_singleton_rules_are_the_frameworks():
    z = np.array([0.7, 1.0, 0.0])
    ids = np.array([3, 1, 1])
    assert advantages("verl_grpo", z, ids)[0] == 0.7 / VERL_SINGLETON_DIVISOR
    assert VERL_SINGLETON_DIVISOR == 1.0000009536743164  # float32(1) + float32(1e-6)
    assert advantages("verl_grpo_nostd", z, ids)[0] == 0.7
    assert advantages("verl_rloo", z, ids)[0] == 0.7
    assert advantages("verl_rloo_vectorized", z, ids)[0] == 0.0  # multiplied by (n_g > 1)
    assert advantages("verl_grpo_vectorized", z, ids)[0] == 0.7 / VERL_SINGLETON_DIVISOR
    one = np.array([0.7])
    assert advantages("trl_group", one, [0])[0] == 0.0
    assert advantages("trl_rloo", one, [0])[0] == 0.0


def test_validation_names_the_parameter():
    with pytest.raises(ValueError, match="`estimator` must be one of"):
        advantages("grpo_std", [1.0, 0.0], [0, 0])
    with pytest.raises(ValueError, match="at least 2"):
        advantages("openrlhf_group_norm", [1.0, 0.0, 1.0], [0, 0, 1])
    with pytest.raises(ValueError, match="same size"):
        advantages("trl_group", [1.0, 0.0, 1.0], [0, 0, 1])
    with pytest.raises(TypeError, match="group_ids"):
        advantages("grpo", [1.0, 0.0], [0.0, 0.0])
    with pytest.raises(ValueError, match="finite"):
        advantages("grpo", [np.nan, 0.0], [0, 0])
    with pytest.raises(ValueError, match="shape"):
        advantages("grpo", [1.0, 0.0], [0, 0, 0])


def test_verl_reinforce_pp_baseline_counts_epsilon_in_the_mean():
    """Two singleton groups [1e6, 1e6]: c = z, masked_mean = 2e6/(2 + 1e-8), so the whitened
    values are (1e6 - mean) / sqrt(var + 1e-8) = 0.707, where a plain mean would give 0."""
    c = 1e6
    mean = 2 * c / (2 + 1e-8)
    var = 2 * (c - mean) ** 2 / (2 + 1e-8) * 2  # masked_mean of squares, Bessel 2/(2 - 1)
    expected = (c - mean) / np.sqrt(var + 1e-8)
    got = advantages("verl_reinforce_pp_baseline", [c, c], [0, 1])
    np.testing.assert_allclose(got, [expected, expected], rtol=1e-6)
    assert abs(expected - 0.7071) < 1e-3  # negative control: the plain mean gives exactly 0


def test_openrlhf_reinforce_baseline_whitens_with_the_population_variance():
    # c = [0.5, -0.5, 0, 0]: batch mean 0, population variance 0.125
    got = advantages("openrlhf_reinforce_baseline", [1.0, 0.0, 2.0, 2.0], [0, 0, 1, 1])
    np.testing.assert_allclose(got, np.array([0.5, -0.5, 0.0, 0.0]) / np.sqrt(0.125), rtol=1e-12)
    # all-equal groups leave nothing to whiten; the floor keeps 0/0 away
    assert np.all(advantages("openrlhf_reinforce_baseline", [3.0, 3.0], [0, 0]) == 0.0)


def test_nemo_rl_divides_by_the_others_std_and_keeps_ties_undivided():
    z = np.array([1.0, 0.7, 0.7, 0.7])
    got = advantages("nemo_rl_grpo", z, np.zeros(4, dtype=np.int64))
    assert got[0] == pytest.approx(0.3)  # the others are all 0.7: s_-0 = 0, undivided
    s = np.std([1.0, 0.7, 0.7], ddof=1)  # the others of sample 1
    assert got[1] == pytest.approx((0.7 - 0.8) / (s + 1e-6), rel=1e-12)
    with pytest.raises(ValueError, match="at least 3"):
        advantages("nemo_rl_grpo", [1.0, 0.0], [0, 0])


def test_every_framework_row_names_a_full_commit_and_its_date():
    text = (Path(__file__).parents[2] / "docs" / "conventions.md").read_text(encoding="utf-8")
    for spec in CONVENTIONS.values():
        assert f"`{spec.name}`" in text
        if spec.framework == "ustat-rl":
            continue
        assert re.fullmatch(r"[0-9a-f]{40}", spec.commit), spec.name
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", spec.commit_date), spec.name
        assert f"{spec.commit[:8]} ({spec.commit_date})" in text, spec.name
        assert spec.repository in text and spec.path.split(", ")[0].split("/")[-1] in text


def test_convention_spec_is_the_registry_rule_type():
    """``ConventionSpec`` is public (``__all__``): the type of every convention, so callers can
    check what ``get_convention`` returns."""
    from ustat_rl.advantages.conventions import CONVENTIONS, ConventionSpec
    from ustat_rl.advantages.rule import AdvantageRule

    assert ConventionSpec is AdvantageRule
    assert all(isinstance(spec, ConventionSpec) for spec in CONVENTIONS.values())


def test_every_source_file_a_convention_cites_is_in_the_conventions_page():
    """The provenance paths (the files each rule was read from) match docs/conventions.md."""
    from ustat_rl.advantages.conventions import CONVENTIONS

    page = (Path(__file__).resolve().parents[2] / "docs" / "conventions.md").read_text()
    cited = {p.strip() for spec in CONVENTIONS.values() if spec.path
             for p in spec.path.split(",")}
    assert cited and all(p.endswith(".py") for p in cited), cited
    assert {p for p in cited if p not in page} == set()
