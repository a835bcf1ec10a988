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

from .._validation import as_int, as_rng
from ..advantages.registry import get_rule

__all__ = ["ALL_EQUAL_TREATMENTS", "BatchEnumeration", "BatchStudy", "batch_enumeration",
           "batch_monte_carlo"]

#: The most batches :func:`batch_enumeration` enumerates.
MAX_ENUMERATED_BATCHES = 2_000_000

#: What happens to a group whose rewards are all equal.
ALL_EQUAL_TREATMENTS = ("keep", "drop", "resample")


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
    """Advantages of batches ``reward (n, B, G)``; batch statistics are computed per batch,
    once per distinct batch of rewards (a batch's advantages are a function of its rewards;
    binary rewards at small ``B G`` repeat a few patterns)."""
    n, B, G = reward.shape
    if spec.statistics == "group":
        return spec.grouped(reward.reshape(n * B, G)).reshape(n, B, G)
    ids = np.repeat(np.arange(B), G)
    rows, inverse = np.unique(reward.reshape(n, B * G), axis=0, return_inverse=True)
    out = np.stack([spec.advantages(r, ids) for r in rows])
    return out[inverse.reshape(-1)].reshape(n, B, G)


@dataclass(frozen=True)
class BatchEnumeration:
    """Exact moments of one batch estimator ``g_hat_B = (1/(B G)) sum_b sum_g A_bg W_bg``.

    Attributes
    ----------
    mean_factor : float
        ``<E g_hat_B, g>/||g||^2``.
    projection : float
        ``E <g_hat_B, g>`` (``mean_factor ||g||^2``).
    mse : float
        ``E||g_hat_B - g||^2``.
    mean : ndarray (P K,)
        ``E g_hat_B``.
    n_batches : int
        Batches enumerated.
    """

    mean_factor: float
    projection: float
    mse: float
    mean: np.ndarray
    n_batches: int


def batch_enumeration(bandit, estimator, group_size: int, batch_size: int,
                      group_weights=None) -> BatchEnumeration:
    """Exact mean and MSE of any rule of the rewards, batch statistics included, by enumerating
    every batch of ``B`` groups of ``G`` on a small :class:`~ustat_rl.policies.SoftmaxBandit`.

    Each group draws its prompt from ``f`` and ``G`` independent (action, reward) cells from
    ``pi(. | x)`` and the reward law; a batch is ``B`` independent groups. There are
    ``(P (2 K)^G)^B`` batches; each distinct vector of rewards is handed to the rule once.

    Parameters
    ----------
    bandit : SoftmaxBandit
    estimator : str or AdvantageRule
        Any registered rule of the rewards alone (group or batch statistics).
    group_size, batch_size : int
        ``G`` and ``B``; at most ``MAX_ENUMERATED_BATCHES`` batches.
    group_weights : callable, optional
        ``reward (M, B, G) -> (M, B)``: each group's weight in the batch's estimate,
        ``g_hat_B = sum_b w_b (1/G) sum_g A_bg W_bg``; ``1/B`` each by default. A group filter
        that reads the whole batch (the reward-variance filter) is such a weighting.

    Returns
    -------
    BatchEnumeration

    Examples
    --------
    >>> from ustat_rl.policies.examples import small_bandit
    >>> bandit = small_bandit()
    >>> out = batch_enumeration(bandit, "grpo", 2, 2)
    >>> bool(abs(out.mse - bandit.exact_mse("grpo", 2, 2)) < 1e-12)
    True
    """
    import itertools

    spec = get_rule(estimator)
    if spec.centring.reference_source == "baseline":
        raise ValueError(f"`estimator` {spec.name!r} needs a baseline b(x) beyond the rewards")
    G = as_int(group_size, "group_size", max(spec.min_group_size, 1))
    B = as_int(batch_size, "batch_size", 1)
    P, K = bandit.n_prompts, bandit.n_actions
    per_group = P * (2 * K) ** G
    if per_group**B > MAX_ENUMERATED_BATCHES:
        raise ValueError(f"`group_size` {G} and `batch_size` {B} give {per_group}^{B} batches, "
                         f"more than the {MAX_ENUMERATED_BATCHES} enumerated; use Monte Carlo")
    if B * G < spec.min_batch_size:
        raise ValueError(f"rule {spec.name!r} needs batches of at least {spec.min_batch_size} "
                         f"samples, got B G = {B * G}")
    lo, hi = bandit.reward_values
    cells = [(a, z) for a in range(K) for z in (0, 1)]  # (action, reward is hi)
    prob, reward, score = [], [], []  # per group outcome
    for x in range(P):
        q = bandit.reward_prob[x]
        for pick in itertools.product(cells, repeat=G):
            a = np.array([c[0] for c in pick])
            z = np.array([c[1] for c in pick])
            prob.append(bandit.prompt_prob[x] * np.prod(
                bandit.policy[x, a] * np.where(z == 1, q[a], 1.0 - q[a])))
            reward.append(np.where(z == 1, hi, lo))
            score.append(bandit.scores(np.array([x]), a[None, :], full=True)[0])  # (G, P K)
    prob, reward, score = np.array(prob), np.array(reward, dtype=np.float64), np.array(score)
    idx = np.array(list(itertools.product(range(per_group), repeat=B)))  # (M, B)
    batch_prob = np.prod(prob[idx], axis=1)
    adv = _batch_advantages(spec, reward[idx])  # (M, B, G)
    if group_weights is None:
        g_hat = np.einsum("mbg,mbgk->mk", adv, score[idx]) / (B * G)
    else:
        w = np.asarray(group_weights(reward[idx]), dtype=np.float64)  # (M, B)
        g_hat = np.einsum("mb,mbg,mbgk->mk", w, adv, score[idx]) / G
    g = bandit.grad
    mean = batch_prob @ g_hat
    mse = float(batch_prob @ np.sum((g_hat - g) ** 2, axis=1))
    projection = float(mean @ g)
    return BatchEnumeration(projection / float(g @ g), projection, mse, mean, int(len(idx)))


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
        One of :data:`ALL_EQUAL_TREATMENTS`. With ``"drop"`` a batch whose groups are all all-equal
        gives ``g_hat_B = 0`` (the step is skipped).

    Returns
    -------
    BatchStudy
    """
    if all_equal not in ALL_EQUAL_TREATMENTS:
        raise ValueError(f"`all_equal` must be one of {ALL_EQUAL_TREATMENTS}, got {all_equal!r}")
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
