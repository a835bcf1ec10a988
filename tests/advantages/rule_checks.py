"""Checks every newly registered advantage rule goes through, shared by the rule test files of
this folder: Monte Carlo on a bandit against the rule's exact MSE (both backends), and a batch
rule's Monte Carlo against whole batches enumerated. Each rejects a neighbouring rule's exact
MSE as its negative control, at the same ``Z_CHECK`` band."""

from __future__ import annotations

import itertools
import re

import numpy as np

from ustat_rl import theory
from ustat_rl.advantages import get_rule
from ustat_rl.advantages.conventions import CONVENTION_NAMES, CONVENTIONS
from ustat_rl.montecarlo import Backend, bandit_squared_errors, run_monte_carlo
from ustat_rl.policies.enumeration import enumerate_prompt_estimates
from ustat_rl.policies.examples import small_bandit
from ustat_rl.tolerances import Z_CHECK
from ustat_rl.training.batch_study import batch_enumeration, batch_monte_carlo


def check_exact_moments_by_enumeration(name: str, sizes, rtol: float = 1e-12,
                                       atol: float = 1e-14) -> None:
    """The rule's exact mean factor and MSE against g (``theory.advantage_moments``) equal the
    sums over every outcome of a group (``enumerate_prompt_estimates``) on the small bandit, at
    each ``G`` of ``sizes``: two float64 routes, to rounding."""
    bandit = small_bandit()
    moments = bandit.moments()
    for G in sizes:
        out = theory.advantage_moments(moments, name, G)
        means, mses = [], []
        for x in range(bandit.n_prompts):
            values, prob = enumerate_prompt_estimates(bandit, x, G, name)
            means.append(prob @ values)
            mses.append(prob @ np.sum((values - bandit.grad_per_prompt[x]) ** 2, axis=1))
        np.testing.assert_allclose(out.mean_factor[:, None] * bandit.grad_per_prompt,
                                   np.array(means), rtol=rtol, atol=atol, err_msg=f"G={G}")
        np.testing.assert_allclose(out.mse_grad, mses, rtol=rtol, atol=atol)


def check_provenance(names, page: str) -> None:
    """Each rule is an ordinary convention (so every test over CONVENTION_NAMES covers it),
    registered under its name, with a full commit, a date, and its repository and file(s)
    named in docs/conventions.md (``page``) beside the commit's first 8 digits and date."""
    assert set(names) <= set(CONVENTION_NAMES)
    for name in names:
        rule = CONVENTIONS[name]
        assert get_rule(name) is rule
        assert re.fullmatch(r"[0-9a-f]{40}", rule.commit), name
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", rule.commit_date), name
        assert f"`{name}`" in page and f"{rule.commit[:8]} ({rule.commit_date})" in page, name
        assert rule.repository in page, name
        assert all(p.strip() in page for p in rule.path.split(",")), name

def check_group_rules_monte_carlo(rules, neighbour, backend: str, seed: int) -> None:
    """Monte Carlo of ``rules`` at G in (2, 5), B = 2, within ``Z_CHECK`` se of the exact MSE;
    ``neighbour(name)`` names the rule whose exact MSE must fall outside that band."""
    bandit = small_bandit()
    sizes, B = (2, 5), 2
    stat, labels = bandit_squared_errors(bandit, rules, sizes, B, backend=Backend(backend, "cpu"))
    est = run_monte_carlo(stat, 40_000, seed=seed, labels=labels)
    for i, (name, G) in enumerate(labels):
        exact = bandit.exact_mse(name, G, B)
        assert abs(est.mean[i] - exact) <= Z_CHECK * est.std_error[i], (name, G, backend)
        wrong = bandit.exact_mse(neighbour(name), G, B)  # negative control
        assert abs(est.mean[i] - wrong) > Z_CHECK * est.std_error[i], (name, G, backend)


def exact_batch(bandit, name, G, B):
    """``(mean factor along g, MSE)`` of a batch rule by enumerating every batch of ``B``
    groups (prompts from f, each group's 2K outcomes per draw), one rule call per batch: the
    literal route that ustat_rl.training.batch_study.batch_enumeration is checked against
    (tests/advantages/test_batch_rules_backends.py)."""
    rule = get_rule(name)
    outcomes = []  # (prob, prompt, action (G,), reward (G,))
    for x in range(bandit.n_prompts):
        comp = bandit.hoeffding(x)
        for idx in itertools.product(range(2 * bandit.n_actions), repeat=G):
            idx = np.array(idx)
            outcomes.append((bandit.prompt_prob[x] * np.prod(comp.outcome_prob[idx]), x,
                             comp.outcome_action[idx], comp.outcome_reward[idx]))
    g = bandit.grad
    ids = np.repeat(np.arange(B), G)
    mean, mse = np.zeros_like(g), 0.0
    for batch in itertools.product(outcomes, repeat=B):
        prob = np.prod([o[0] for o in batch])
        prompt = np.array([o[1] for o in batch])
        action = np.stack([o[2] for o in batch])
        reward = np.concatenate([o[3] for o in batch])
        score = bandit.scores(prompt, action, full=True).reshape(B * G, -1)  # (BG, PK)
        g_hat = rule.advantages(reward, ids) @ score / (B * G)
        mean += prob * g_hat
        mse += prob * np.sum((g_hat - g) ** 2)
    return float(mean @ g / (g @ g)), mse


def check_batch_rule_monte_carlo(name: str, cases, reps: int = 20_000,
                                 neighbours=("fullmean",)) -> None:
    """For each ``(G, B, seed)`` of ``cases`` (those the rule's minimum batch admits), Monte
    Carlo of the batch estimator over ``reps`` batches within ``Z_CHECK`` se of the enumerated
    MSE and mean factor (batch_enumeration, itself checked against exact_batch's literal loop);
    negative controls: the exact MSE of each group rule of ``neighbours`` (the unscaled full mean
    by default) is rejected."""
    bandit = small_bandit()
    for G, B, seed in cases:
        if G * B < get_rule(name).min_batch_size:
            continue
        exact = batch_enumeration(bandit, name, G, B)
        factor, mse = exact.mean_factor, exact.mse
        mc = batch_monte_carlo(bandit, name, G, B, reps, np.random.default_rng(seed))
        assert abs(mc.mse - mse) <= Z_CHECK * mc.mse_se, (name, G, B)
        assert abs(mc.mean_factor - factor) <= Z_CHECK * mc.mean_factor_se, (name, G, B)
        for other in neighbours:
            wrong = bandit.exact_mse(other, G, B)
            assert abs(mc.mse - wrong) > Z_CHECK * mc.mse_se, (name, other, G, B)
