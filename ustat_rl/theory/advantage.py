"""Exact finite-G moments of any group-relative advantage, for binary rewards.

docs/theory.md section 7: when ``Z`` is in ``{0, 1}`` and the advantage of a draw is
``A_g = a(Z_g, M)``, a function of its own reward and of the group's success count
``M ~ Binomial(G, V)``, the mean and second moment of ``g_hat = (1/G) sum_g A_g W_g`` are sums of
``G + 1`` terms. Everything they need is in the moments contract: with ``gamma = ||g(x)||^2``,

    mu_1 = g / V,  mu_0 = -g / (1 - V),  s_1 = E[||W||^2 Z] / V,  s_0 = (E||W||^2 - E[||W||^2 Z]) / (1 - V),

so ``||mu_1||^2 = gamma/V^2``, ``||mu_0||^2 = gamma/(1-V)^2`` and ``<mu_1, mu_0> = -gamma/(V(1-V))``.
The mean is a multiple of the gradient, ``E g_hat(x) = c(x) g(x)``, which is what makes the
minibatch MSE a quadratic form in the Gram matrix of the ``g(x)``.

Two targets are supported: the policy gradient ``g(x)`` and the gradient of the arcsin objective
of Proposition 13 (docs/theory.md C26), ``g(x) / sqrt(V(1 - V))`` (0 where ``V`` is 0 or 1, where
``g(x) = 0`` too).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy.stats import binom

from .._validation import as_int
from .moments import PromptMoments, batch_mean_terms

__all__ = ["AdvantageTable", "as_advantage_table", "AdvantageMoments", "TARGETS", "advantage_table",
           "advantage_moments", "per_prompt_advantage_mse", "minibatch_advantage_mse",
           "dynamic_sampling_mse", "all_equal_probability", "arcsin_weight", "binary_projection"]

#: What an estimator's MSE is measured against.
TARGETS = ("grad", "arcsin")

#: Largest ``(G + 1) * G`` array of representative groups built for a named convention.
_MAX_TABLE_ENTRIES = 20_000_000

#: Relative slack allowed when checking that moments describe binary rewards.
BINARY_RTOL = 1e-8


@dataclass(frozen=True)
class AdvantageTable:
    """``a(z, m)`` for one group size: the advantage of a draw with reward ``z`` in a group with
    ``m`` successes (docs/theory.md section 7).

    Attributes
    ----------
    group_size : int
        ``G``.
    success : ndarray (G + 1,)
        ``a(1, m)``; entry ``m = 0`` is never used.
    failure : ndarray (G + 1,)
        ``a(0, m)``; entry ``m = G`` is never used.
    """

    group_size: int
    success: np.ndarray
    failure: np.ndarray


@dataclass(frozen=True)
class AdvantageMoments:
    """Exact per-prompt moments of ``g_hat(x) = (1/G) sum_g a(Z_g, M) W_g`` (section 7).

    Attributes
    ----------
    mean_factor : ndarray (P,)
        ``c(x)`` with ``E g_hat(x) = c(x) g(x)``; 1 for an unbiased estimator.
    second_moment : ndarray (P,)
        ``E||g_hat(x)||^2``.
    mse_grad : ndarray (P,)
        ``E||g_hat(x) - g(x)||^2``.
    mse_arcsin : ndarray (P,)
        ``E||g_hat(x) - g(x)/sqrt(V(1-V))||^2``, the MSE against the arcsin objective's gradient.
    """

    mean_factor: np.ndarray
    second_moment: np.ndarray
    mse_grad: np.ndarray
    mse_arcsin: np.ndarray


def advantage_table(estimator, group_size) -> AdvantageTable:
    r"""``a(z, m)`` of a group convention, read off one representative group per ``m``.

    .. math::

        a(z, m) = \text{the advantage of a draw with reward } z \text{ in a group with } m \text{ successes}

    Parameters
    ----------
    estimator : str, AdvantageRule or callable
        A registered rule (:func:`ustat_rl.advantages.rule_names`) whose statistics are per
        group, or a function ``(z, m, G) -> a`` of arrays ``z``, ``m`` and the int ``G``.
    group_size : int
        ``G >= 1`` (at least the convention's smallest group).

    Notes
    -----
    A group convention's advantage depends on a draw's reward and on the multiset of its group's
    rewards; for binary rewards that multiset is fixed by ``m``, so evaluating the convention on
    the group ``[1]*m + [0]*(G - m)`` gives ``a(1, m)`` and ``a(0, m)`` exactly.

    Examples
    --------
    >>> t = advantage_table("grpo", 3)
    >>> [round(float(v), 4) for v in t.success[1:]], [round(float(v), 4) for v in t.failure[:-1]]
    ([1.0, 0.5, 0.0], [0.0, -0.5, -1.0])
    """
    G = as_int(group_size, "group_size", 1)
    m = np.arange(G + 1)
    if callable(estimator) and not hasattr(estimator, "statistics"):
        success = np.asarray(estimator(np.ones(G + 1), m, G), dtype=np.float64)
        failure = np.asarray(estimator(np.zeros(G + 1), m, G), dtype=np.float64)
        if success.shape != (G + 1,) or failure.shape != (G + 1,):
            raise ValueError(f"`estimator` must return shape ({G + 1},) for m = 0..G")
        success, failure = success.copy(), failure.copy()
        success[0], failure[G] = 0.0, 0.0  # a(1, 0) and a(0, G) never occur
        return AdvantageTable(G, success, failure)
    from ..advantages.registry import get_rule

    rule = get_rule(estimator)
    if rule.statistics != "group":
        raise ValueError(f"convention {rule.name!r} uses batch statistics, so groups are not "
                         f"independent and the per-group formula does not apply; use Monte Carlo")
    if rule.scaling.kind == "group statistic" and (G + 1) * G > _MAX_TABLE_ENTRIES:
        raise ValueError(f"`group_size` {G} needs a ({G + 1}, {G}) array of representative groups; "
                         f"pass the rule as a function a(z, m, G) for groups this large")
    if G < rule.min_group_size:
        raise ValueError(f"`group_size` must be an integer >= {rule.min_group_size} for "
                         f"convention {rule.name!r}, got {G}")
    success, failure = rule.binary_table(G)
    return AdvantageTable(G, success, failure)


def _binary_moments(moments: PromptMoments) -> PromptMoments:
    if not isinstance(moments, PromptMoments):
        raise TypeError(f"`moments` must be a PromptMoments, got {type(moments).__name__}")
    V = moments.value
    scale = np.maximum(1.0, np.abs(moments.score_sq))
    binary = (np.all((V >= -BINARY_RTOL) & (V <= 1 + BINARY_RTOL))
              and np.allclose(moments.reward_var, V * (1 - V), rtol=BINARY_RTOL, atol=BINARY_RTOL)
              and np.allclose(moments.score_sq_reward_sq, moments.score_sq_reward,
                              rtol=BINARY_RTOL, atol=BINARY_RTOL * scale.max()))
    if not binary:
        raise ValueError("`moments` must describe binary rewards Z in {0, 1} (Var Z = V(1-V) and "
                         "E||WZ||^2 = E[||W||^2 Z]); the exact advantage moments need them")
    return moments


def binary_projection(moments: PromptMoments) -> PromptMoments:
    r"""``moments`` with the identities of binary rewards imposed: ``Var(Z|x) = V(1 - V)`` and
    ``E||W Z||^2 = E[||W||^2 Z]`` (``Z^2 = Z``).

    .. math::

        \operatorname{Var}(Z \mid x) = V(1 - V), \qquad E\|W Z\|^2 = E[\|W\|^2 Z]

    Estimated moments of binary rewards satisfy these in expectation but not draw by draw
    (each side has its own estimator), so the exact advantage moments, which need them, are
    evaluated on this projection; exact binary moments are returned unchanged in value.
    """
    if not isinstance(moments, PromptMoments):
        raise TypeError(f"`moments` must be a PromptMoments, got {type(moments).__name__}")
    V = moments.value
    if np.any((V < -BINARY_RTOL) | (V > 1 + BINARY_RTOL)):
        raise ValueError("`moments` has values V(x) outside [0, 1]: not binary rewards")
    return replace(moments, reward_var=V * (1.0 - V), score_sq_reward_sq=moments.score_sq_reward)


def arcsin_weight(value) -> np.ndarray:
    r"""``1/sqrt(V(1-V))``, the derivative of ``2 arcsin sqrt V`` (C26); 0 where ``V`` is 0 or 1.

    .. math::

        w(V) = \frac{1}{\sqrt{V (1 - V)}}
    """
    V = np.asarray(value, dtype=np.float64)
    inner = V * (1.0 - V)
    return np.where(inner > 0, 1.0 / np.sqrt(np.where(inner > 0, inner, 1.0)), 0.0)


def all_equal_probability(value, group_size) -> np.ndarray:
    r"""``P(all G rewards equal) = V^G + (1 - V)^G`` for binary rewards (docs/theory.md C24).

    .. math::

        P(\text{all equal}) = V^G + (1 - V)^G
    """
    G = as_int(group_size, "group_size", 1)
    V = np.asarray(value, dtype=np.float64)
    return V**G + (1.0 - V) ** G


def count_terms(V, k, a1, a0, G):
    """The summands of section 7 at ``M = k`` (broadcast over arrays), before ``P(M = k)``:
    ``(mean, w1, w0, wg)`` with ``E[g_hat | M = k] = mean g(x) / G`` and
    ``E[||g_hat||^2 | M = k] = (w1 E[||W||^2 Z] + w0 E[||W||^2 (1 - Z)] + wg ||g(x)||^2) / G^2``,
    for the advantages ``a1 = a(1, k)`` and ``a0 = a(0, k)``."""
    has1, has0 = V > 0, V < 1
    inv1 = np.where(has1, 1.0 / np.where(has1, V, 1.0), 0.0)  # 1/V where V > 0
    inv0 = np.where(has0, 1.0 / np.where(has0, 1.0 - V, 1.0), 0.0)
    mean = k * a1 * inv1 - (G - k) * a0 * inv0
    wg = (k * (k - 1) * a1**2 * inv1**2 + (G - k) * (G - k - 1) * a0**2 * inv0**2
          - 2.0 * k * (G - k) * a1 * a0 * inv1 * inv0)
    return mean, k * a1**2 * inv1, (G - k) * a0**2 * inv0, wg


def _moment_terms(m: PromptMoments, table: AdvantageTable):
    """``(c(x), E||g_hat(x)||^2)`` for every prompt: the O(G) sums of section 7."""
    G = table.group_size
    # every sum over k is a fixed combination of E[||W||^2 Z], E[||W||^2 (1 - Z)] and
    # ||g(x)||^2 whose weights depend on V alone, and a pilot's V takes few values (multiples
    # of 1/n): the weights are summed once per distinct V, in O(u G), not O(P G)
    distinct, index = np.unique(np.clip(m.value, 0.0, 1.0), return_inverse=True)
    index = index.ravel()
    V = distinct[:, None]  # (u, 1)
    k = np.arange(G + 1)[None, :]  # (1, G+1)
    pmf = binom.pmf(k, G, V)  # (u, G+1)
    terms = count_terms(V, k, table.success[None, :], table.failure[None, :], G)
    mean_factor, w1, w0, wg = (np.sum(pmf * t, axis=1) for t in terms)
    second = (w1[index] * m.score_sq_reward + w0[index] * (m.score_sq - m.score_sq_reward)
              + wg[index] * m.grad_sq)
    return mean_factor[index] / G, second / G**2


def as_advantage_table(estimator, group_size) -> AdvantageTable:
    r"""``estimator`` as an :class:`AdvantageTable` (a table is checked against ``group_size``).

    .. math::

        a(z, m), \quad z \in \{0, 1\},\ m = 0, \dots, G
    """
    if isinstance(estimator, AdvantageTable):
        if group_size is not None and as_int(group_size, "group_size", 1) != estimator.group_size:
            raise ValueError(f"`group_size` {group_size} differs from the table's "
                             f"{estimator.group_size}")
        return estimator
    if group_size is None:
        raise ValueError("`group_size` is required unless `estimator` is an AdvantageTable")
    return advantage_table(estimator, group_size)


def advantage_moments(moments: PromptMoments, estimator, group_size=None) -> AdvantageMoments:
    r"""Exact mean factor, second moment and MSEs of a group-relative estimator (section 7).

    .. math::

        E\hat g(x) = c(x)\, g(x), \qquad c = \sum_m P(m)\,\frac{m a_1 / V - (G - m) a_0 / (1 - V)}{G}

    Parameters
    ----------
    moments : PromptMoments
        Exact moments of a policy with binary rewards.
    estimator : str, ConventionSpec, callable or AdvantageTable
        The advantage rule (see :func:`advantage_table`).
    group_size : int, optional
        ``G``; not needed with an :class:`AdvantageTable`.

    Returns
    -------
    AdvantageMoments

    Notes
    -----
    With ``P(M = m)`` the Binomial(G, V) pmf and ``a_1 = a(1, m)``, ``a_0 = a(0, m)``:
    ``c = sum_m P(m) [m a_1 / V - (G - m) a_0 / (1 - V)] / G`` and
    ``E||g_hat||^2 = sum_m P(m) [m a_1^2 s_1 + (G-m) a_0^2 s_0 + m(m-1) a_1^2 gamma/V^2
    + (G-m)(G-m-1) a_0^2 gamma/(1-V)^2 - 2 m (G-m) a_1 a_0 gamma/(V(1-V))] / G^2``;
    ``MSE = E||g_hat||^2 - 2 c <g, t> + ||t||^2`` for the target ``t``. Prompts with ``V`` in
    ``{0, 1}`` keep only their ``m = 0`` or ``m = G`` term. Cost: ``O(P G)``.

    Examples
    --------
    The leave-one-out convention is unbiased and has Theorem 2's exact MSE:

    >>> from ustat_rl.policies.softmax import SoftmaxBandit
    >>> m = SoftmaxBandit([[0.0, 0.0]], [[1.0, 0.0]]).moments()
    >>> out = advantage_moments(m, "grpo", 4)
    >>> round(float(out.mean_factor[0]), 12), round(float(out.mse_grad[0]), 6)
    (1.0, 0.020833)
    """
    m = _binary_moments(moments)
    table = as_advantage_table(estimator, group_size)
    factor, second = _moment_terms(m, table)
    w = arcsin_weight(m.value)
    gamma = m.grad_sq
    mse_grad = second - 2.0 * factor * gamma + gamma
    mse_arcsin = second - 2.0 * factor * w * gamma + w**2 * gamma
    return AdvantageMoments(factor, second, mse_grad, mse_arcsin)


def _check_target(target: str) -> str:
    if target not in TARGETS:
        raise ValueError(f"`target` must be one of {TARGETS}, got {target!r}")
    return target


def per_prompt_advantage_mse(moments: PromptMoments, estimator, group_size=None,
                             target: str = "grad") -> np.ndarray:
    r"""Exact per-prompt MSE, shape ``(P,)``, against ``g(x)`` or the arcsin gradient (section 7).

    .. math::

        \mathrm{MSE}(x) = E\|\hat g(x)\|^2 - 2 c(x) \langle g(x), t(x)\rangle + \|t(x)\|^2

    ``target="grad"`` compares with ``g(x)`` (Theorem 2's target; docs/theory.md C5),
    ``target="arcsin"`` with ``g(x)/sqrt(V(1-V))``, the gradient of Proposition 13's objective
    (docs/theory.md C26).
    """
    out = advantage_moments(moments, estimator, group_size)
    return out.mse_grad if _check_target(target) == "grad" else out.mse_arcsin


def minibatch_advantage_mse(moments: PromptMoments, estimator, group_size=None, batch_size=1,
                            target: str = "grad") -> float:
    r"""Exact MSE of ``(1/B) sum_b g_hat(X_b)`` over ``B`` i.i.d. prompts (Proposition 3, C6).

    .. math::

        E\|\hat g_B - t\|^2 = \frac{E_X E\|\hat g(X)\|^2}{B} + \Big(1 - \frac{1}{B}\Big)\alpha^\top \Gamma \alpha - 2 \alpha^\top \Gamma \beta + \beta^\top \Gamma \beta

    Notes
    -----
    With ``alpha = f c`` and ``beta = f`` (``target="grad"``) or ``beta = f w``,
    ``w = 1/sqrt(V(1-V))`` (``target="arcsin"``), and ``Gamma`` the Gram matrix of the ``g(x)``:
    ``E||g_hat - t||^2 = E_X E||g_hat(X)||^2 / B + (1 - 1/B) alpha' Gamma alpha
    - 2 alpha' Gamma beta + beta' Gamma beta``. For ``target="grad"`` the last term is the
    contract's ``grad_norm_sq``.
    """
    m = _binary_moments(moments)
    B = as_int(batch_size, "batch_size", 1)
    _check_target(target)
    table = as_advantage_table(estimator, group_size)
    factor, second = _moment_terms(m, table)
    f, gram = m.prompt_prob, m.grad_gram
    alpha = f * factor
    beta = f if target == "grad" else f * arcsin_weight(m.value)
    target_sq = float(m.grad_norm_sq) if target == "grad" else float(beta @ gram @ beta)
    second_b, projection, _ = batch_mean_terms(f @ second, alpha, gram, beta, B)
    return second_b - 2.0 * projection + target_sq


def dynamic_sampling_mse(moments: PromptMoments, estimator, group_size=None,
                         batch_size=1) -> tuple[float, float]:
    r"""Exact ``(scale, MSE)`` of a batch refilled until no group is all-equal (DAPO, section 7).

    .. math::

        f'(x) = \frac{f(x)(1 - q(x))}{1 - Q}, \qquad q(x) = V^G + (1 - V)^G

    DAPO's dynamic sampling discards groups whose ``G`` rewards are all equal and draws again
    until the batch holds ``B`` groups that are not. Each kept group is then an i.i.d. draw of
    ``(X, group)`` conditioned on ``0 < M < G``: prompts follow
    ``f'(x) = f(x) (1 - q(x)) / (1 - Q)``, with ``q(x) = V^G + (1 - V)^G`` and
    ``Q = sum_x f(x) q(x)``. For a convention that gives all-equal groups zero advantage,
    ``E[g_hat(x) | kept] = c(x) g(x)/(1 - q(x))`` and ``E[||g_hat(x)||^2 | kept] =
    E||g_hat(x)||^2/(1 - q(x))``, so the batch mean is ``sum_x f c(x) g(x) / (1 - Q)``: the
    zeroing estimator's mean times ``scale = 1/(1 - Q)``.

    Returns
    -------
    scale : float
        ``1/(1 - Q)``.
    mse : float
        ``E||g_hat_B - g||^2`` with ``alpha = f c/(1 - Q)``:
        ``sum_x f E||g_hat(x)||^2 / ((1 - Q) B) + (1 - 1/B) alpha' Gamma alpha
        - 2 alpha' Gamma f + ||g||^2``.
    """
    m = _binary_moments(moments)
    B = as_int(batch_size, "batch_size", 1)
    table = as_advantage_table(estimator, group_size)
    if table.success[table.group_size] != 0.0 or table.failure[0] != 0.0:
        raise ValueError("the advantage must give all-equal groups zero (a(1, G) = a(0, 0) = 0) "
                         "for dropping them to leave the other groups' moments unchanged")
    factor, second = _moment_terms(m, table)
    f, gram = m.prompt_prob, m.grad_gram
    keep = 1.0 - float(f @ all_equal_probability(m.value, table.group_size))
    if keep <= 0.0:
        raise ValueError("every group is all-equal with probability 1: nothing can be kept")
    alpha = f * factor / keep
    second_b, projection, _ = batch_mean_terms(float(f @ second) / keep, alpha, gram, f, B)
    return 1.0 / keep, second_b - 2.0 * projection + float(m.grad_norm_sq)
