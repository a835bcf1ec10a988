"""Unbiased per-prompt moments from a pilot sample, in O(n k) (docs/theory.md section 7).

Each moment of the contract :class:`ustat_rl.theory.PromptMoments` is the expectation of a kernel
of at most three distinct i.i.d. draws ``(W_i, Z_i)`` at one prompt; averaging the kernel over all
ordered tuples of distinct samples gives an unbiased U-statistic. The averages are computed here
from power sums of the group (``sum_i Z_i^q`` and ``sum_i ||W_i||^2 Z_i^q``), never by looping
over tuples; the tests check the closed forms against the loops, and
``proofs_check.pilot`` proves each kernel unbiased.

Every score moment is a sum over the score's ``k`` columns. When the columns are the rows of a
random projection ``R W`` with i.i.d. rows and ``E[R^T R] = I``, each column's share is an
independent unbiased estimate of ``1/k`` of the total; :class:`PilotStatistics` keeps the shares
column by column so that :mod:`ustat_rl.pilot.uncertainty` can resample the projection too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..theory import PromptMoments, ScalingConstants, scaling_constants
from ..theory.gram import FactoredGram
from .rollouts import Rollouts

__all__ = ["PilotStatistics", "pilot_statistics", "estimate_moments", "rule_moments",
           "estimate_constants",
           "SCORE_MOMENTS", "group_moments", "reward_statistics", "check_finite_moments",
           "SCALE_ADVICE", "check_not_underflowing"]

#: The score moments of the contract, each a sum over score columns (docs/theory.md section 7).
SCORE_MOMENTS = ("score_sq", "score_sq_reward", "score_sq_reward_sq", "score_sq_centred",
                 "grad_sq", "score_sq_reward_var")


@dataclass(frozen=True)
class PilotStatistics:
    """Per-prompt, per-column shares of the unbiased moment estimates (docs/theory.md section 7).

    Attributes
    ----------
    prompt_ids : ndarray (P,)
        The distinct prompt ids, sorted.
    group_size : ndarray (P,)
        ``n_a``, samples per prompt.
    value, reward_var : ndarray (P,)
        Unbiased ``V(x)`` and ``Var(Z | x)`` (sample mean; Bessel-corrected variance).
    columns : dict of str to ndarray (P, k)
        For each name in :data:`SCORE_MOMENTS`, the share of each score column: the per-prompt
        estimate is the row sum.
    grad_mean : ndarray (P, k)
        ``g_hat_a = mean_i W_i Z_i``, whose inner products across distinct prompts are unbiased
        for ``<g(x_a), g(x_b)>``.
    prompt_prob : ndarray (P,) or None
        Fixed prompt weights ``f`` from ``Rollouts.prompt_weight``; ``None`` for i.i.d. prompts.
    sketched : bool
        Whether the columns are i.i.d. projection rows (so may be resampled).
    column_group : ndarray (k,) of int, optional
        The independent block of each column (``Rollouts.column_groups``); ``None``: every column
        its own block.
    """

    prompt_ids: np.ndarray
    group_size: np.ndarray
    value: np.ndarray
    reward_var: np.ndarray
    columns: dict
    grad_mean: np.ndarray
    prompt_prob: np.ndarray | None
    sketched: bool
    column_group: np.ndarray | None = None

    @property
    def n_prompts(self) -> int:
        """``P``."""
        return int(self.value.size)

    @property
    def n_columns(self) -> int:
        """``k``."""
        return int(self.grad_mean.shape[1])


def group_moments(reward, score) -> dict:
    """Unbiased moments of one prompt's group from power sums (docs/theory.md section 7).

    Parameters
    ----------
    reward : array_like (n,)
        ``Z_1..Z_n``, i.i.d. given the prompt, ``n >= 3``.
    score : array_like (n, k)
        ``W_1..W_n`` (or their projections).

    Returns
    -------
    dict
        ``value``, ``reward_var`` and each of :data:`SCORE_MOMENTS` as floats.

    Notes
    -----
    With ``s_i = ||W_i||^2``, ``S_q = sum Z_i^q``, ``A_q = sum s_i Z_i^q`` and ``u = sum W_i Z_i``,
    the averages over distinct ordered tuples of the section-7 kernels are

    * ``E||W||^2``: ``A_0/n``; ``E[||W||^2 Z]``: ``A_1/n``; ``E||WZ||^2``: ``A_2/n``;
    * ``||g(x)||^2`` (kernel ``<W_i Z_i, W_j Z_j>``): ``(||u||^2 - A_2)/(n(n-1))``;
    * ``E||W||^2 Var(Z|x)`` (kernel ``s_i (Z_j - Z_k)^2/2``):
      ``[(n-1)(S_2 A_0 - A_2) - (S_1^2 A_0 - 2 S_1 A_1 + A_2)]/(n(n-1)(n-2))``;
    * ``E||W(Z-V)||^2`` (kernel ``s_i (Z_i - Z_j)(Z_i - Z_k)``):
      ``[n(n-1) A_2 - 2(n-1) S_1 A_1 + (S_1^2 - S_2) A_0]/(n(n-1)(n-2))``.

    Examples
    --------
    >>> out = group_moments([0.0, 1.0, 1.0], [[1.0], [0.0], [-1.0]])
    >>> round(out["reward_var"], 6), round(out["score_sq_reward_var"], 6)
    (0.333333, 0.166667)
    """
    reward = np.asarray(reward, dtype=np.float64)
    score = np.asarray(score, dtype=np.float64)
    if reward.ndim != 1 or reward.size < 3:
        raise ValueError(f"`reward` must be 1-D with >= 3 samples, got shape {reward.shape}")
    if score.ndim != 2 or score.shape[0] != reward.size:
        raise ValueError(f"`score` must have shape ({reward.size}, k), got {score.shape}")
    stats = _statistics(np.zeros(reward.size, dtype=np.int64), 1, reward, score)
    out = {"value": float(stats["value"][0]), "reward_var": float(stats["reward_var"][0])}
    out.update({name: float(stats[name][0].sum()) for name in SCORE_MOMENTS})
    return out


#: The reward scale's refusal, shared by every route that squares rewards.
SCALE_ADVICE = ("divide the rewards by a constant: G*, the allocation and every verdict do not "
                "change with the reward scale, and the MSEs scale with its square")


def check_finite_moments(values, what: str, reward, score=None, name: str = "`rollouts`") -> None:
    """One ``ValueError`` when moments computed from ``reward`` (and ``score``) overflowed.

    ``values`` are the arrays computed under ``np.errstate(over="ignore", invalid="ignore")``;
    any that is not finite means the squared rewards (times squared scores) exceed float64's
    range, which the message says with the largest magnitudes, and no internal name.
    """
    if all(np.all(np.isfinite(v)) for v in values):
        return
    big = f"rewards as large as {np.max(np.abs(reward)):.3g}"
    if score is not None and np.size(score):
        big += f" and scores as large as {np.max(np.abs(score)):.3g}"
    raise ValueError(f"{name}: {big} overflow float64 in the {what} (their squares and "
                     f"products exceed 1.8e308); {SCALE_ADVICE}")


def reward_statistics(index: np.ndarray, P: int, z: np.ndarray, name: str = "`rollouts`") -> dict:
    """``n``, ``value`` and ``reward_var`` per group ``(P,)`` from rewards alone.

    ``index (n,)`` is each row's group in ``0..P-1``; ``value`` is the sample mean and
    ``reward_var`` the Bessel-corrected variance (unbiased; it needs two samples per group), with
    the power sums ``s1``, ``s2`` that the score moments reuse. Rewards whose squares overflow
    float64 raise one ``ValueError`` (:func:`check_finite_moments`).
    """
    n = np.bincount(index, minlength=P).astype(np.float64)  # (P,)
    with np.errstate(over="ignore", invalid="ignore"):
        s1 = np.bincount(index, z, P)
        s2 = np.bincount(index, z * z, P)
        out = {"n": n, "s1": s1, "s2": s2, "value": s1 / n,
               "reward_var": (s2 - s1 * s1 / n) / (n - 1.0)}
    check_finite_moments((s1, s2, out["reward_var"]), "reward statistics", z, name=name)
    check_not_underflowing(z, "rewards", name)
    return out


#: Below this, squares (and their products) of a quantity lose its digits to float64's
#: subnormal range (the smallest normal number is 2.2e-308 = (1.5e-154)^2).
UNDERFLOW_SCALE = 1e-150


def check_not_underflowing(values, what: str, name: str = "`rollouts`") -> None:
    """One ``ValueError`` when every nonzero entry of ``values`` is so small that its square
    underflows: the moments would come out 0 (or rounding noise), not small."""
    top = float(np.max(np.abs(values))) if np.size(values) else 0.0
    if 0.0 < top < UNDERFLOW_SCALE:
        raise ValueError(f"{name}: {what} no larger than {top:.3g} underflow float64 in the "
                         f"moments (their squares fall below 2.2e-308); multiply them by a "
                         f"constant: G*, the allocation and every verdict do not change with "
                         f"the scale")


def _statistics(index: np.ndarray, P: int, z: np.ndarray, w: np.ndarray) -> dict:
    """The power-sum core: per-prompt values and per-column shares of every estimate."""
    rewards = reward_statistics(index, P, z)
    n, s1, s2 = rewards["n"], rewards["s1"], rewards["s2"]

    order = np.argsort(index, kind="stable")
    starts = np.searchsorted(index[order], np.arange(P))

    def group_sum(values):  # (n, k) -> (P, k); every group is non-empty
        return np.add.reduceat(values[order], starts, axis=0)

    with np.errstate(over="ignore", invalid="ignore"):
        out = _score_statistics(group_sum, z, w, n, s1, s2, rewards)
    check_finite_moments(out.values(), "pilot's moments", z, w)
    check_not_underflowing(w, "scores")
    # the intervals square the moments (jackknife covariances), and the prompts' Gram matrix
    # multiplies the gradient estimates: each stays below float64's range when the largest
    # magnitude m satisfies m^2 P^2 k < 1.8e308
    gm = out["grad_mean"]  # (P, k)
    top = max(float(np.max(np.abs(v))) for v in out.values() if np.size(v))
    if top * top * gm.shape[0] * gm.size > np.finfo(np.float64).max:
        check_finite_moments([np.inf], "pilot's moments and their intervals", z, w)
    return out


def _score_statistics(group_sum, z, w, n, s1, s2, rewards) -> dict:
    sq = w * w  # (n, k) column shares of ||W_i||^2
    a0 = group_sum(sq)
    a1 = group_sum(sq * z[:, None])
    a2 = group_sum(sq * (z * z)[:, None])
    u = group_sum(w * z[:, None])  # (P, k)  sum_i W_i Z_i
    n_ = n[:, None]
    pairs, triples = n_ * (n_ - 1.0), n_ * (n_ - 1.0) * (n_ - 2.0)
    S1, S2 = s1[:, None], s2[:, None]
    return {
        "n": n,
        "value": rewards["value"],
        "reward_var": rewards["reward_var"],
        "score_sq": a0 / n_,
        "score_sq_reward": a1 / n_,
        "score_sq_reward_sq": a2 / n_,
        "grad_sq": (u * u - a2) / pairs,
        "score_sq_reward_var": ((n_ - 1.0) * (S2 * a0 - a2)
                                - (S1 * S1 * a0 - 2.0 * S1 * a1 + a2)) / triples,
        "score_sq_centred": ((n_ - 1.0) * (n_ * a2 - 2.0 * S1 * a1)
                             + (S1 * S1 - S2) * a0) / triples,
        "grad_mean": u / n_,
    }


def pilot_statistics(rollouts: Rollouts) -> PilotStatistics:
    """Per-prompt, per-column shares of every unbiased moment estimate, in O(n k).

    Parameters
    ----------
    rollouts : Rollouts

    Returns
    -------
    PilotStatistics
    """
    if not isinstance(rollouts, Rollouts):
        raise TypeError(f"`rollouts` must be a Rollouts, got {type(rollouts).__name__}")
    ids, index = rollouts.groups()
    stats = _statistics(index, ids.size, rollouts.reward, rollouts.score)
    return PilotStatistics(
        prompt_ids=ids, group_size=stats["n"].astype(np.int64), value=stats["value"],
        reward_var=stats["reward_var"], columns={name: stats[name] for name in SCORE_MOMENTS},
        grad_mean=stats["grad_mean"], prompt_prob=rollouts.group_weights(),
        sketched=rollouts.is_sketched, column_group=rollouts.column_groups())


def _cross_prompt_norm(grad_mean: np.ndarray, grad_sq: np.ndarray, prompt_prob) -> float:
    """Unbiased ``||g||^2``: pairs of distinct prompts (i.i.d.), or ``f``-weighted (fixed set)."""
    P = grad_mean.shape[0]
    total = grad_mean.sum(axis=0)
    if prompt_prob is None:
        return float((total @ total - np.sum(grad_mean * grad_mean)) / (P * (P - 1.0)))
    weighted = prompt_prob @ grad_mean
    return float(weighted @ weighted - (prompt_prob**2) @ np.sum(grad_mean * grad_mean, axis=1)
                 + (prompt_prob**2) @ grad_sq)


def estimate_moments(rollouts) -> PromptMoments:
    """The moments contract filled with unbiased estimates (``kind="estimated"``, section 7).

    Parameters
    ----------
    rollouts : Rollouts or PilotStatistics
        At least two prompts (the cross-prompt term needs a pair).

    Returns
    -------
    PromptMoments
        One entry per pilot prompt. ``prompt_prob`` is uniform for i.i.d. prompts (so averages
        over it estimate ``E_X``) or the given weights; ``grad_gram`` has the unbiased
        ``||g(x_a)||^2`` on its diagonal and ``<g_hat_a, g_hat_b>`` off it, held as a
        :class:`~ustat_rl.theory.gram.FactoredGram` (``O(P k)`` memory); ``grad_norm_sq`` is
        the unbiased cross-prompt estimate of ``||E_X g(X)||^2``: the mean of
        ``<g_hat_a, g_hat_b>`` over ordered pairs ``a != b`` for i.i.d. prompts, or
        ``sum_{a != b} f_a f_b <g_hat_a, g_hat_b> + sum_a f_a^2 ||g(x_a)||^2-hat`` for a fixed set.

    Notes
    -----
    Every score moment is linear in the kernels of docs/theory.md section 7, so it stays unbiased
    when ``W`` is replaced by a projection ``R W`` with ``E[R^T R] = I``, and so do the
    constants of :func:`ustat_rl.theory.scaling_constants` (C17) and every MSE of C5 and C6.
    ``G*`` is a nonlinear function of them: consistent, not unbiased.

    Examples
    --------
    >>> from ustat_rl.pilot.rollouts import Rollouts
    >>> r = Rollouts(prompt_id=[0, 0, 0, 1, 1, 1], reward=[0, 1, 1, 1, 0, 0],
    ...              score=[[1.0], [-0.5], [-0.5], [0.5], [-0.25], [-0.25]])
    >>> m = estimate_moments(r)
    >>> m.kind, [round(float(v), 4) for v in m.value]
    ('estimated', [0.6667, 0.3333])
    """
    stats = rollouts if isinstance(rollouts, PilotStatistics) else pilot_statistics(rollouts)
    if stats.n_prompts < 2:
        raise ValueError(f"`rollouts` must hold >= 2 prompts for the cross-prompt term, got "
                         f"{stats.n_prompts}")
    P = stats.n_prompts
    per = {name: stats.columns[name].sum(axis=1) for name in SCORE_MOMENTS}
    # <g_hat_a, g_hat_b> off the diagonal, held as its (P, k) factor: O(P k), not (P, P)
    gram = FactoredGram(stats.grad_mean, per["grad_sq"])
    prob = np.full(P, 1.0 / P) if stats.prompt_prob is None else stats.prompt_prob
    return PromptMoments(
        prompt_prob=prob, value=stats.value, reward_var=stats.reward_var,
        score_sq=per["score_sq"], score_sq_reward=per["score_sq_reward"],
        score_sq_reward_sq=per["score_sq_reward_sq"], score_sq_centred=per["score_sq_centred"],
        grad_sq=per["grad_sq"], grad_gram=gram, kind="estimated",
        score_sq_reward_var=per["score_sq_reward_var"],
        grad_norm_sq=_cross_prompt_norm(stats.grad_mean, per["grad_sq"], stats.prompt_prob))



def rule_moments(rollouts, estimator: str) -> PromptMoments:
    """:func:`estimate_moments`, projected onto binary rewards for a rule that scales its
    advantages (:func:`ustat_rl.theory.advantage.binary_projection`): that rule's exact MSE
    needs moments of binary rewards (section 7); an affine rule's takes them as they are."""
    from ..advantages import get_rule
    from ..theory.advantage import binary_projection

    moments = estimate_moments(rollouts)
    return moments if get_rule(estimator).is_affine else binary_projection(moments)


def estimate_constants(rollouts) -> ScalingConstants:
    """Unbiased ``c1``, ``c2``, ``c3'`` of the scaling law (Theorem 7, docs/theory.md C17, section 7).

    :func:`ustat_rl.theory.scaling_constants` on :func:`estimate_moments`; ``c1`` may come out
    negative (it is a difference of unbiased estimates), which gives ``G* = inf``.
    """
    return scaling_constants(estimate_moments(rollouts))
