r"""Group policy-gradient estimators (Algorithm 1 and Table 1 of the paper; docs/theory.md section 2).

All estimators share one form: for one prompt with ``G`` samples ``(W_g, Z_g)``,

.. math::

    \hat g(x) = \frac{1}{G} \sum_g W_g c_g,

and differ only in the advantage rule that gives ``c_g`` (:mod:`ustat_rl.advantages.registry`);
:func:`rule_gradient` builds the estimate of any registered rule. A minibatch estimate averages
``B`` prompts.

Shapes: ``score`` is ``(G, d)`` for one prompt or ``(B, G, d)`` for a minibatch, ``reward`` is
``(G,)`` or ``(B, G)``. By default a minibatch is reduced to its mean ``(d,)``; pass
``per_prompt=True`` to keep ``(B, d)``.
"""

from __future__ import annotations

import numpy as np

from .._validation import as_finite_array
from .registry import ESTIMATORS, get_rule

__all__ = [
    "ESTIMATORS",
    "vanilla_gradient",
    "grpo_gradient",
    "oracle_gradient",
    "fullmean_gradient",
    "baseline_gradient",
    "grpo_kernel",
    "grpo_gradient_pairwise",
    "leave_one_out_baseline",
    "rule_gradient",
]


def _check_group(score, reward, rule=None):
    score = as_finite_array(score, "score", ndim=(2, 3))
    reward = as_finite_array(reward, "reward", ndim=(1, 2))
    if score.shape[:-1] != reward.shape:
        raise ValueError(
            f"`score` of shape {score.shape} needs `reward` of shape {score.shape[:-1]}, "
            f"got {reward.shape}"
        )
    group_size = reward.shape[-1]
    if rule is not None and group_size < rule.min_group_size:
        raise ValueError(f"`group_size` must be an integer >= {rule.min_group_size} "
                         f"{rule.min_group_reason}, got {group_size}")
    return score, reward


def _reduce(per_prompt_grad: np.ndarray, per_prompt: bool) -> np.ndarray:
    # (B, d) -> (d,) minibatch mean unless the caller keeps prompts apart
    if per_prompt_grad.ndim == 1 or per_prompt:
        return per_prompt_grad
    return per_prompt_grad.mean(axis=0)


def _weighted_score_mean(score: np.ndarray, weight: np.ndarray) -> np.ndarray:
    # (..., G, d) x (..., G) -> (..., d): (1/G) sum_g W_g c_g
    return np.einsum("...gd,...g->...d", score, weight) / weight.shape[-1]


def leave_one_out_baseline(reward) -> np.ndarray:
    r"""Leave-one-out mean of the other rewards, Z_bar_{-g} (docs/theory.md section 2).

    .. math::

        \bar Z_{-g} = \frac{1}{G - 1} \sum_{k \ne g} Z_k

    The paper's Eq. (4) prints ``Z^{(b,g)}`` inside the sum; the intended baseline, used here,
    sums ``Z^{(b,k)}`` over ``k != g``.
    """
    reward = as_finite_array(reward, "reward", ndim=(1, 2))
    rule = get_rule("grpo")
    if reward.shape[-1] < rule.min_group_size:
        raise ValueError(f"`group_size` must be an integer >= {rule.min_group_size} "
                         f"{rule.min_group_reason}, got {reward.shape[-1]}")
    flat = reward.reshape(-1, reward.shape[-1])
    return (flat - rule.grouped(flat)).reshape(reward.shape)


def rule_gradient(estimator, score, reward, reference=None, *,
                  per_prompt: bool = False) -> np.ndarray:
    r"""The estimate ``(1/G) sum_g W_g c_g`` of any registered advantage rule.

    Parameters
    ----------
    estimator : str or AdvantageRule
        A name of :func:`ustat_rl.advantages.rule_names` whose statistics are per group.
    score : array_like, shape (G, d) or (B, G, d)
    reward : array_like, shape (G,) or (B, G)
    reference : float or array_like (B,), optional
        ``r(x)`` for rules that subtract the value or a prompt-only baseline.
    per_prompt : bool
        Keep the ``B`` prompt estimates apart instead of averaging them.

    Returns
    -------
    ndarray, shape (d,) or (B, d)

    Notes
    -----
    .. math::

        \hat g(x) = \frac{1}{G} \sum_{g=1}^G W_g c_g

    Examples
    --------
    >>> import numpy as np
    >>> rule_gradient("grpo", np.array([[1.0], [-1.0]]), np.array([1.0, 0.0]))
    array([1.])
    """
    estimator = get_rule(estimator)
    if estimator.statistics != "group":
        raise ValueError(f"`estimator` {estimator.name!r} uses batch statistics; a per-prompt "
                         "gradient "
                         "needs a rule of the group alone")
    score, reward = _check_group(score, reward, estimator)
    flat = reward.reshape(-1, reward.shape[-1])
    if estimator.centring.reference_source is not None:
        if reference is None:
            raise ValueError(f"`reference` is required: rule {estimator.name!r} subtracts "
                             f"{estimator.centring.reference_source} r(x)")
        reference = as_finite_array(reference, "reference", ndim=(0, 1))
        if reference.ndim == 1 and reference.shape != reward.shape[:-1]:
            raise ValueError(f"`reference` must be a scalar or have shape {reward.shape[:-1]}, "
                             f"got {reference.shape}")
        reference = np.broadcast_to(reference, reward.shape[:-1]).reshape(-1)
    weight = estimator.grouped(flat, reference).reshape(reward.shape)
    return _reduce(_weighted_score_mean(score, weight), per_prompt)


def vanilla_gradient(score, reward, *, per_prompt: bool = False) -> np.ndarray:
    r"""REINFORCE estimator, baseline 0 (Table 1, docs/theory.md section 2).

    .. math::

        \hat g(x) = \frac{1}{G}\sum_g W_g Z_g

    Parameters
    ----------
    score : array_like, shape (G, d) or (B, G, d)
        Scores ``W_g = grad log pi(Y_g | x)``.
    reward : array_like, shape (G,) or (B, G)
        Rewards ``Z_g``.
    per_prompt : bool
        Keep the ``B`` prompt estimates apart instead of averaging them.

    Returns
    -------
    ndarray, shape (d,) or (B, d)

    Examples
    --------
    >>> import numpy as np
    >>> vanilla_gradient(np.array([[1.0], [-1.0]]), np.array([1.0, 0.0]))
    array([0.5])
    """
    return rule_gradient("vanilla", score, reward, per_prompt=per_prompt)


def grpo_gradient(score, reward, *, per_prompt: bool = False) -> np.ndarray:
    r"""Leave-one-out GRPO estimator, baseline Z_bar_{-g} (Lemma 1, docs/theory.md C1).

    .. math::

        \hat g(x) = \frac{1}{G}\sum_g W_g (Z_g - \bar Z_{-g})

    Computed in O(G d). Equal to the order-2 U-statistic with kernel
    ``h_ij = (W_i - W_j)(Z_i - Z_j)/2`` (see :func:`grpo_gradient_pairwise`).

    Notes
    -----
    Since ``Z_g - Z_bar_{-g} = (G Z_g - sum_k Z_k)/(G - 1)``, the estimate is
    ``(1/(G-1)) sum_g W_g (Z_g - Z_bar)``.

    Examples
    --------
    >>> import numpy as np
    >>> grpo_gradient(np.array([[1.0], [-1.0]]), np.array([1.0, 0.0]))
    array([1.])
    """
    return rule_gradient("grpo", score, reward, per_prompt=per_prompt)


def oracle_gradient(score, reward, value, *, per_prompt: bool = False) -> np.ndarray:
    r"""Oracle estimator with the true value V(x) as baseline (Table 1, docs/theory.md C4).

    .. math::

        \hat g(x) = \frac{1}{G}\sum_g W_g (Z_g - V(x))

    ``value`` is a scalar for one prompt, or shape ``(B,)`` for a minibatch.
    Not implementable in practice; it is the first-order Hoeffding part of GRPO plus g.
    """
    return rule_gradient("oracle", score, reward, value, per_prompt=per_prompt)


def baseline_gradient(score, reward, baseline, *, per_prompt: bool = False) -> np.ndarray:
    r"""Estimator with a prompt-only baseline b(x) (Corollary 5, docs/theory.md C8, C9).

    .. math::

        \hat g(x) = \frac{1}{G}\sum_g W_g (Z_g - b(x))

    ``baseline`` is a scalar, or shape ``(B,)`` with one value per prompt.
    """
    score, reward = _check_group(score, reward)
    baseline = as_finite_array(baseline, "baseline", ndim=(0, 1))
    expected = reward.shape[:-1]
    if baseline.ndim == 1 and baseline.shape != expected:
        raise ValueError(f"`baseline` must be a scalar or have shape {expected}, got {baseline.shape}")
    return rule_gradient("baseline", score, reward, baseline, per_prompt=per_prompt)


def fullmean_gradient(score, reward, *, per_prompt: bool = False) -> np.ndarray:
    r"""Full-mean baseline Z_bar, the TRL/verl/OpenRLHF convention without std (docs/theory.md C2).

    .. math::

        \hat g(x) = \frac{1}{G}\sum_g W_g (Z_g - \bar Z) = \frac{G - 1}{G}\,\hat g_{\mathrm{GRPO}}(x)

    Equals ``(G-1)/G`` times the leave-one-out estimator exactly, so it is biased towards zero
    by the factor ``(G-1)/G``.
    """
    return rule_gradient("fullmean", score, reward, per_prompt=per_prompt)


def grpo_kernel(score_i, reward_i, score_j, reward_j) -> np.ndarray:
    r"""Pairwise GRPO kernel h((w, z), (w', z')) = (w - w')(z - z')/2 (Lemma 1, docs/theory.md C1).

    .. math::

        h((w, z), (w', z')) = \frac{(w - w')(z - z')}{2}

    Symmetric in its two arguments. Broadcasts over leading axes.
    """
    score_i = np.asarray(score_i, dtype=np.float64)
    score_j = np.asarray(score_j, dtype=np.float64)
    reward_i = np.asarray(reward_i, dtype=np.float64)
    reward_j = np.asarray(reward_j, dtype=np.float64)
    return 0.5 * (score_i - score_j) * (reward_i - reward_j)[..., None]


def grpo_gradient_pairwise(score, reward, *, per_prompt: bool = False) -> np.ndarray:
    r"""GRPO estimate as the O(G^2) U-statistic C(G,2)^{-1} sum_{i<j} h_ij (Lemma 1, C1).

    .. math::

        \hat g(x) = \binom{G}{2}^{-1} \sum_{i < j} h_{ij}

    The slow, literal route; :func:`grpo_gradient` is the fast one. They agree to rounding.
    """
    score, reward = _check_group(score, reward, get_rule("grpo"))
    group_size = reward.shape[-1]
    # (..., G, G, d) pairwise kernel; the diagonal is zero because z_i - z_i = 0
    pairs = grpo_kernel(score[..., :, None, :], reward[..., :, None],
                        score[..., None, :, :], reward[..., None, :])
    upper = np.triu(np.ones((group_size, group_size), dtype=bool), k=1)
    total = pairs[..., upper, :].sum(axis=-2)
    n_pairs = group_size * (group_size - 1) / 2
    return _reduce(total / n_pairs, per_prompt)
