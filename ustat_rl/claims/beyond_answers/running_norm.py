"""ROLL's running reward normalisation: its state, its long-run form and its loop (C69).

:mod:`ustat_rl.theory.running_norm` gives ROLL's ``reward_norm`` with running mean and std: the
state a loop carries (:func:`~ustat_rl.theory.running_norm.fresh_state`,
:func:`~ustat_rl.theory.running_norm.merge_batch`), the population the state tends to
(:func:`~ustat_rl.theory.running_norm.reward_population`), the exact moments of the long-run
form ``(z - mu)/(sigma + 1e-6)`` (:func:`~ustat_rl.theory.running_norm.fixed_statistics_exact`)
and the loop's Monte Carlo (:func:`~ustat_rl.theory.running_norm.running_norm_monte_carlo`).
On C65's three-prompt bandit at ``G = 4``, ``B = 2``:

* exact: ``mu`` and ``sigma`` summed here over the bandit's prompts and actions; three batches
  of 4, 6 and 2 rewards merged into a fresh state give, in every chain, the mean and Bessel std
  of the 12 rewards pooled (rtol 1e-9: the start's weight 1e-24 aside);
* Monte Carlo, the long-run form: batches drawn and scored by hand (C65's sampler), advantages
  ``(z - mu)/(sigma + 1e-6)`` with the ``mu`` and ``sigma`` summed here; the mean factor
  ``<g_B, g>/||g||^2`` and the MSE averaged over the batches against the exact ones;
* Monte Carlo, the loop: its mean factor and MSE at steps 1 and 3 against the loop written out
  here (each chain's rewards of the steps so far pooled by concatenation, their mean and Bessel
  std applied to the last batch), two independent samples compared through the standard error
  of their difference.

Each comparison passes within ``Z_STRICT = 4.5`` standard errors (two-sided false-failure
rate 6.8e-6 each, 6 comparisons: 4.1e-5 for the claim). Negative control: the scale
``1/(sd of the prompts' mean rewards + 1e-6)``, which leaves the spread within a prompt out of
``sigma``, is rejected as the long-run mean factor by the same comparison.
"""

from __future__ import annotations

import numpy as np

from ...tolerances import Z_STRICT
from ..registry import check_close, check_exact, check_true, register
from .scale_free import (
    BANDIT_LOGITS,
    BANDIT_PROMPT_PROB,
    BANDIT_REWARD_PROB,
    batch_estimates,
    hand_gradient,
    policy_tables,
    sampled_batches,
)

__all__ = ["RUN_GROUP_SIZE", "RUN_BATCH_SIZE", "RUN_STEPS", "RUN_CHAINS", "RUN_EPSILON",
           "hand_population", "written_loop"]

#: ``G``, ``B``, the loop's steps compared and its chains (quick, full).
RUN_GROUP_SIZE, RUN_BATCH_SIZE = 4, 2
RUN_STEPS = (1, 3)
RUN_CHAINS = (20_000, 200_000)
#: ROLL's epsilon, as its source writes it (alibaba/ROLL 8eb27cc2, roll/utils/functionals.py).
RUN_EPSILON = 1e-6


def hand_population() -> tuple[float, float, float]:
    """``(mu, sigma, between)``: the mean and sd of one response's reward (a prompt from ``f``,
    a response from ``pi``) and the sd of the prompts' mean rewards alone, summed over the
    bandit."""
    pi, q = policy_tables()
    f = np.asarray(BANDIT_PROMPT_PROB)
    value = (pi * q).sum(axis=1)  # (P,) P(Z = 1 | x)
    mu = float(f @ value)
    between = float(f @ value**2) - mu * mu
    return mu, float(np.sqrt(mu * (1.0 - mu))), float(np.sqrt(between))


def _moments(est: np.ndarray, grad: np.ndarray):
    """Mean factor and MSE of estimates ``(R, d)`` with their standard errors."""
    along = est @ grad / (grad @ grad)
    err = np.einsum("rd,rd->r", est - grad, est - grad)
    n = np.sqrt(est.shape[0])
    return along.mean(), along.std(ddof=1) / n, err.mean(), err.std(ddof=1) / n


def written_loop(step: int, reps: int, rng):
    """The loop written out: ``step`` batches per chain, the last one's advantages from the mean
    and Bessel std of every reward so far, pooled by concatenation."""
    G, N = RUN_GROUP_SIZE, RUN_GROUP_SIZE * RUN_BATCH_SIZE
    earlier = [sampled_batches(G, N, reps, rng)[2].reshape(reps, -1) for _ in range(step - 1)]
    x, a, z = sampled_batches(G, N, reps, rng)
    pooled = np.concatenate(earlier + [z.reshape(reps, -1)], axis=1)  # (R, t B G)
    mean = pooled.mean(axis=1)[:, None, None]
    std = pooled.std(axis=1, ddof=1)[:, None, None]
    return batch_estimates((z - mean) / (std + RUN_EPSILON), x, a)


@register("C69", "Beyond the paper: ROLL's running reward normalisation: its state is the pooled "
          "mean and Bessel std of every batch merged, its long-run form's exact mean factor and "
          "MSE equal Monte Carlo of (z - mu)/(sigma + 1e-6) written out, and its loop's Monte "
          "Carlo equals the loop written out at steps 1 and 3",
          "derived (docs/theory.md C69; section 2, ROLL's reward_norm)",
          "reward_population against the bandit summed by hand; fresh_state and merge_batch "
          "over 3 batches against the pooled rewards (1e-9); fixed_statistics_exact and "
          "running_norm_monte_carlo at G = 4, B = 2 against batches drawn and scored by hand, "
          "within 4.5 se; the sd of the prompts' means as the negative control")
def check_c69(ctx) -> list:
    from ...policies.softmax import SoftmaxBandit
    from ...theory.running_norm import (
        fixed_statistics_exact,
        fresh_state,
        merge_batch,
        reward_population,
        running_norm_monte_carlo,
    )

    bandit = SoftmaxBandit(BANDIT_LOGITS, BANDIT_REWARD_PROB, BANDIT_PROMPT_PROB)
    mu, sigma, between = hand_population()
    checks = [check_exact("reward_population: (mu, sigma) of one response's reward",
                          [mu, sigma], list(reward_population(bandit)))]
    rng = np.random.default_rng(ctx.seed_for("C69"))
    batches = [rng.random((5, k)) for k in (4, 6, 2)]
    state = fresh_state(5)
    for b in batches:
        state = merge_batch(state, b)
    pooled = np.concatenate(batches, axis=1)  # (5, 12)
    checks.append(check_exact("three batches (4, 6, 2 rewards) merged into a fresh state: the "
                              "pooled mean and Bessel std in each of 5 chains",
                              np.concatenate([pooled.mean(axis=1), pooled.std(axis=1, ddof=1)]),
                              np.concatenate([state.mean, state.std]), rtol=1e-9))
    G, B, N = RUN_GROUP_SIZE, RUN_BATCH_SIZE, RUN_GROUP_SIZE * RUN_BATCH_SIZE
    reps = ctx.reps(*RUN_CHAINS)
    grad = hand_gradient()
    exact = fixed_statistics_exact(bandit, G, B)
    x, a, z = sampled_batches(G, N, reps, rng)
    est = batch_estimates((z - mu) / (sigma + RUN_EPSILON), x, a)
    factor, factor_se, mse, mse_se = _moments(est, grad)
    checks.append(check_close(f"long-run form, G = {G}, B = {B}: mean factor", exact.mean_factor,
                              factor, factor_se, z=Z_STRICT,
                              note=f"{reps} batches drawn and scored by hand"))
    checks.append(check_close(f"long-run form, G = {G}, B = {B}: MSE", exact.mse, mse, mse_se,
                              z=Z_STRICT))
    wrong = 1.0 / (between + RUN_EPSILON)
    checks.append(check_true("negative control: the scale 1/(sd of the prompts' means + 1e-6) is "
                             "rejected as the long-run mean factor",
                             abs(wrong - factor) > Z_STRICT * factor_se, wrong,
                             evidence="monte-carlo", note="a power check, no rate"))
    loop = running_norm_monte_carlo(bandit, G, B, RUN_STEPS, reps, rng)
    for step, got in zip(loop.steps, loop.moments):
        mine = _moments(written_loop(step, reps, rng), grad)
        for name, value, se, i in (("mean factor", got.mean_factor, got.mean_factor_se, 0),
                                   ("MSE", got.mse, got.mse_se, 2)):
            checks.append(check_close(
                f"the loop at step {step}: {name} against the loop written out", mine[i], value,
                float(np.hypot(se, mine[i + 1])), z=Z_STRICT,
                note="two independent samples; se of their difference"))
    return checks
