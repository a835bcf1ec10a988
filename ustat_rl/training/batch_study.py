"""Monte Carlo of batch-level advantage rules and of all-equal groups dropped or refilled.

docs/theory.md section 7 gives exact moments when each group's advantages depend on its own
rewards only. Three rules that frameworks run fall outside it, and this module measures them
by Monte Carlo on a softmax bandit, as bias relative to ``g`` and MSE against ``g``:

* **Batch statistics** (TRL ``scale_rewards="batch"``, TRL RLOO with
  ``normalize_advantages=True``, verl REINFORCE++-baseline): the std (or whitening) runs over
  the whole batch, so groups are coupled (docs/conventions.md).
* **Dropping all-equal groups from the batch** (``all_equal="drop"``): the estimate averages
  over the groups that are not all-equal, so its divisor is random.
* **Refilling** (``all_equal="resample"``, DAPO's dynamic sampling): groups are drawn until
  ``B`` are not all-equal; :func:`ustat_rl.theory.advantage.dynamic_sampling_mse` gives its
  exact mean and MSE.

``all_equal="keep"`` is the convention as written (all-equal groups get advantage 0 and count
in the divisor), whose moments are :func:`ustat_rl.theory.minibatch_advantage_mse`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_int, as_rng, renamed_keywords
from ..advantages.registry import get_rule

__all__ = ["ALL_EQUAL_RULES", "BatchStudy", "batch_monte_carlo"]

#: What happens to a group whose rewards are all equal.
ALL_EQUAL_RULES = ("keep", "drop", "resample")


@dataclass(frozen=True)
class BatchStudy:
    """Monte Carlo of one batch estimator ``g_hat_B = (1/B') sum_b (1/G) sum_g A_bg W_bg``.

    Attributes
    ----------
    mean_factor, mean_factor_se : float
        ``<E g_hat_B, g>/||g||^2`` (1 for no bias along ``g``) and its standard error.
    bias_sq : float
        ``||mean(g_hat_B) - g||^2`` (includes the Monte Carlo noise ``tr Cov/n``).
    mse, mse_se : float
        ``E||g_hat_B - g||^2`` and its standard error.
    kept : float
        Fraction of drawn groups that are not all-equal (``"drop"``, ``"resample"``; estimates
        ``1 - Q`` of :func:`ustat_rl.theory.advantage.dynamic_sampling_mse`), 1 for ``"keep"``.
    n_reps : int
        Batches simulated.
    """

    mean_factor: float
    mean_factor_se: float
    bias_sq: float
    mse: float
    mse_se: float
    kept: float
    n_reps: int


def _batch_advantages(spec, reward: np.ndarray) -> np.ndarray:
    """Advantages of batches ``reward (n, B, G)``; batch statistics are computed per batch."""
    n, B, G = reward.shape
    if spec.statistics == "group":
        return spec.grouped(reward.reshape(n * B, G)).reshape(n, B, G)
    ids = np.repeat(np.arange(B), G)
    return np.stack([spec.advantages(r.reshape(-1), ids).reshape(B, G) for r in reward])


@renamed_keywords(convention="estimator")
def batch_monte_carlo(bandit, estimator, group_size: int, batch_size: int, n_reps: int, rng,
                      all_equal: str = "keep") -> BatchStudy:
    """Bias and MSE of a batch estimator on a :class:`~ustat_rl.policies.softmax.SoftmaxBandit`.

    Parameters
    ----------
    bandit : SoftmaxBandit
    estimator : str
        A name of :data:`ustat_rl.advantages.conventions.CONVENTION_NAMES` (batch statistics allowed).
    group_size, batch_size : int
        ``G`` and ``B``.
    n_reps : int
        Batches.
    rng : numpy.random.Generator or int
    all_equal : str
        One of :data:`ALL_EQUAL_RULES`. With ``"drop"`` a batch whose groups are all all-equal
        gives ``g_hat_B = 0`` (the step is skipped).

    Returns
    -------
    BatchStudy
    """
    if all_equal not in ALL_EQUAL_RULES:
        raise ValueError(f"`all_equal` must be one of {ALL_EQUAL_RULES}, got {all_equal!r}")
    spec = get_rule(estimator)
    G = as_int(group_size, "group_size", 2)
    B = as_int(batch_size, "batch_size", 1)
    n = as_int(n_reps, "n_reps", 2)
    rng = as_rng(rng)
    if all_equal == "resample":
        prompts, actions, rewards, drawn, ok_total = [], [], [], 0, 0
        while sum(len(p) for p in prompts) < n * B:
            need = n * B - sum(len(p) for p in prompts)
            s = bandit.sample_groups(G, 2 * need + 16, rng)
            drawn += len(s.prompt)
            ok = s.reward.min(axis=1) != s.reward.max(axis=1)
            ok_total += int(ok.sum())
            prompts.append(s.prompt[ok]), actions.append(s.action[ok]), rewards.append(s.reward[ok])
        take = n * B
        prompt = np.concatenate(prompts)[:take]
        action = np.concatenate(actions)[:take]
        reward = np.concatenate(rewards)[:take]
        kept = ok_total / drawn  # fraction of drawn groups that are not all-equal: 1 - Q
    else:
        s = bandit.sample_groups(G, n * B, rng)
        prompt, action, reward, kept = s.prompt, s.action, s.reward, 1.0
    reward = reward.reshape(n, B, G)
    score = bandit.scores(prompt, action, full=True).reshape(n, B, G, -1)  # (n, B, G, PK)
    if all_equal == "drop":
        use = reward.min(axis=2) != reward.max(axis=2)  # (n, B)
        adv = np.zeros_like(reward)
        for r in range(n):  # batch statistics run over the kept groups only
            if use[r].any():
                adv[r, use[r]] = _batch_advantages(spec, reward[r:r + 1, use[r]])[0]
        per_group = np.einsum("nbg,nbgk->nbk", adv, score) / G
        count = np.maximum(use.sum(axis=1), 1)[:, None]
        g_hat = per_group.sum(axis=1) / count  # (n, PK)
        kept = float(use.mean())
    else:
        adv = _batch_advantages(spec, reward)
        g_hat = np.einsum("nbg,nbgk->nk", adv, score) / (B * G)
    g = bandit.grad
    along = g_hat @ g / (g @ g)
    err = np.sum((g_hat - g) ** 2, axis=1)
    return BatchStudy(float(along.mean()), float(along.std(ddof=1) / np.sqrt(n)),
                      float(np.sum((g_hat.mean(axis=0) - g) ** 2)), float(err.mean()),
                      float(err.std(ddof=1) / np.sqrt(n)), float(kept), n)
