r"""Exact finite-G MSE of every group estimator, as functions of :class:`PromptMoments`.

Each formula of the paper's finite-G theory is stated here once (docs/theory.md C5-C10):
per-prompt MSE against ``g(x)`` (Theorem 2 and its exact form), the minibatch MSE against ``g``
(Proposition 3), prompt-only baselines (Corollary 5), the reversal condition (C10) and the
matrix forms of the same results (the noise covariance of Theorem 8).

An estimator is an advantage rule of :mod:`ustat_rl.advantages` (or its name). An affine rule
(no scaling) is, by :meth:`~ustat_rl.advantages.Centring.moment_coefficients`,

.. math::

    \hat g = a\,\hat g_{\text{oracle}} + b\,\hat g_{\text{GRPO}} + D\,\frac{1}{G}\sum_g W_g,
    \qquad D = a V - w r,

so its mean is ``(a + b) g(x)`` and its MSE a quadratic form in the oracle, GRPO and score
moments; the paper's rules are the cases ``(a, b, D) = (1, 0, V)`` (vanilla), ``(0, 1, 0)``
(GRPO), ``(1, 0, 0)`` (oracle) and ``(0, (G - 1)/G, 0)`` (full mean). A scaled group rule has the
exact binary-reward MSE of :mod:`ustat_rl.theory.advantage`, which these functions use when the
moments describe binary rewards.
"""

from __future__ import annotations

import numpy as np

from .._validation import as_finite_array, as_int
from ..advantages.registry import ESTIMATOR_NAMES, get_rule
from .advantage import minibatch_advantage_mse, per_prompt_advantage_mse
from .affine import affine_covariance, affine_variance
from .moments import PromptMoments

__all__ = [
    "ESTIMATOR_NAMES",
    "shrink_factor",
    "per_prompt_mse",
    "prompt_averaged_mse",
    "minibatch_mse",
    "prompt_heterogeneity",
    "optimal_constant_baseline",
    "score_reward_covariance",
    "assumption2_baseline_mse",
    "grpo_vanilla_margin",
    "reversal_condition",
    "per_prompt_covariance",
    "between_prompt_covariance",
    "minibatch_covariance",
]



def _check_moments(moments) -> PromptMoments:
    if not isinstance(moments, PromptMoments):
        raise TypeError(f"`moments` must be a PromptMoments, got {type(moments).__name__}")
    return moments


def _check_sizes(rule, group_size) -> np.ndarray:
    """``group_size`` as a float array (0-d or 1-d), validated for ``rule``."""
    minimum, reason = rule.min_group_size, rule.min_group_reason
    raw = np.asarray(group_size)
    if raw.ndim > 1:
        raise ValueError(f"`group_size` must be an integer or a 1-D array of integers, got shape "
                         f"{raw.shape}")
    if raw.size == 0:
        raise ValueError("`group_size` must hold at least one group size, got an empty array")
    sizes = [as_int(v.item() if hasattr(v, "item") else v, "group_size", minimum, reason)
             for v in np.atleast_1d(raw)]
    return np.array(sizes, dtype=np.float64).reshape(raw.shape)


def _check_estimator(estimator, baseline, n_prompts: int):
    rule = get_rule(estimator, "estimator")
    if rule.centring.reference_source == "baseline":
        if baseline is None:
            raise ValueError(f"`baseline` is required when `estimator` is {rule.name!r}")
        baseline = as_finite_array(baseline, "baseline", ndim=(0, 1))
        if baseline.ndim == 1 and baseline.shape != (n_prompts,):
            raise ValueError(f"`baseline` must be a scalar or shape ({n_prompts},), got "
                             f"{baseline.shape}")
        return rule, np.broadcast_to(baseline, (n_prompts,))
    if baseline is not None:
        raise ValueError("`baseline` is only used with `estimator='baseline'`")
    return rule, None


def _reference(m: PromptMoments, rule, b):
    """``r(x)``, shape ``(P,)``: the value, the baseline, or zeros."""
    return b if rule.centring.reference_source == "baseline" else m.value


def shrink_factor(group_size):
    r"""``c = (G - 1)/G``: the full-mean estimator is ``c`` times leave-one-out GRPO (C2).

    .. math::

        c = \frac{G - 1}{G}
    """
    G = np.asarray(group_size, dtype=np.float64)
    return (G - 1.0) / G


def per_prompt_mse(moments: PromptMoments, estimator: str, group_size,
                   baseline=None) -> np.ndarray:
    r"""Exact MSE of the per-prompt estimator against ``g(x)`` (Theorem 2, docs/theory.md C5).

    .. math::

        \mathrm{MSE}_{\mathrm{GRPO}}(x) = \frac{\operatorname{tr}\Sigma(x)}{G} + \frac{E\|W\|^2 \operatorname{Var}(Z \mid x) + \|g(x)\|^2}{G(G - 1)}

    Parameters
    ----------
    moments : PromptMoments
    estimator : {"vanilla", "grpo", "oracle", "fullmean", "baseline"}
    group_size : int or 1-D array of int
        ``G``; at least 2 for ``"grpo"`` and ``"fullmean"``.
    baseline : float or ndarray (P,), optional
        The prompt-only baseline ``b(x)`` for ``estimator="baseline"`` (Corollary 5, C8).

    Returns
    -------
    ndarray
        ``(P,)`` for a scalar ``group_size``, ``(P, n_G)`` for an array.

    Notes
    -----
    With ``S = E||W||^2``, ``tr Sigma = E||W(Z - V)||^2 - ||g||^2`` (all given ``x``):

    * oracle: ``tr Sigma / G``;
    * baseline ``b``: ``(E||W(Z - b)||^2 - ||g||^2)/G`` (vanilla: ``b = 0``);
    * GRPO: ``tr Sigma / G + (S Var(Z|x) + ||g||^2)/(G(G - 1))``, exact for every ``G >= 2``;
    * full-mean: ``c^2 MSE_GRPO + (1 - c)^2 ||g||^2`` with ``c = (G - 1)/G``, its bias included.

    Examples
    --------
    >>> from ustat_rl.policies.softmax import SoftmaxBandit
    >>> m = SoftmaxBandit([[0.0, 0.0]], [[1.0, 0.0]]).moments()
    >>> [round(float(v), 6) for v in per_prompt_mse(m, "grpo", [2, 4])[0]]
    [0.125, 0.020833]
    """
    m = _check_moments(moments)
    rule, b = _check_estimator(estimator, baseline, m.n_prompts)
    G = _check_sizes(rule, group_size)
    return _per_prompt_mse(m, rule, G, b)


def _per_prompt_mse(m: PromptMoments, rule, G: np.ndarray, b) -> np.ndarray:
    """Per-prompt MSE ``(P,)`` or ``(P, n_G)``: the affine closed form, or the binary-reward
    sums of :mod:`.advantage` for a scaled group rule."""
    sizes = np.atleast_1d(G)
    if rule.is_affine:
        ref = _reference(m, rule, b)
        cols = []
        for g in sizes:
            var, k = affine_variance(m, rule, float(g), ref)
            cols.append(var + (k - 1.0) ** 2 * m.grad_sq if k != 1 else var)
    else:
        cols = [per_prompt_advantage_mse(m, rule, int(g)) for g in sizes]
    out = np.stack(cols, axis=1)
    return out if G.ndim == 1 else out[:, 0]


def prompt_averaged_mse(moments: PromptMoments, estimator: str, group_size, baseline=None):
    r"""``E_X MSE(X)``: the per-prompt MSE averaged over ``f``, without prompt variance (C5).

    .. math::

        E_X\,\mathrm{MSE}(X) = \sum_x f(x)\,\mathrm{MSE}(x)

    A float for a scalar ``group_size``, an ``(n_G,)`` array for an array of sizes.
    """
    per = per_prompt_mse(moments, estimator, group_size, baseline)
    out = moments.prompt_prob @ per
    return float(out) if np.ndim(out) == 0 else out


def prompt_heterogeneity(moments: PromptMoments, prompt_prob=None) -> float:
    r"""``c1 = E_X||g(X) - g||^2 = E_X||g(X)||^2 - ||g||^2`` (Proposition 3, C6).

    .. math::

        c_1 = E_X\|g(X) - g\|^2 = E_X\|g(X)\|^2 - \|g\|^2

    With ``prompt_prob`` (``(P,)``, non-negative, summing to one), ``c1`` under those prompt
    weights, ``||g||^2 = f^T grad_gram f`` recomputed from the Gram matrix: the value of
    ``moments.reweight(prompt_prob)`` without building (and re-validating) new moments, for
    resampling loops such as a bootstrap over prompts.
    """
    m = _check_moments(moments)
    if prompt_prob is None:
        return float(m.prompt_prob @ m.grad_sq) - float(m.grad_norm_sq)
    f = check_prompt_prob(prompt_prob, m.n_prompts)
    return float(f @ m.grad_sq) - float(f @ m.grad_gram @ f)


def check_prompt_prob(prompt_prob, n_prompts: int) -> np.ndarray:
    r"""``prompt_prob`` as a float array ``(P,)`` of weights summing to one, or ``ValueError``.

    .. math::

        f \ge 0, \qquad \sum_x f(x) = 1
    """
    f = as_finite_array(prompt_prob, "prompt_prob", ndim=(1,))
    if f.shape != (n_prompts,) or np.any(f < 0) or abs(f.sum() - 1.0) > 1e-9:
        raise ValueError(f"`prompt_prob` must be {n_prompts} non-negative weights summing to 1")
    return f


def minibatch_mse(moments: PromptMoments, estimator: str, group_size, batch_size=1,
                  baseline=None, prompt_variance_factor=None):
    r"""Exact MSE of the minibatch estimator against ``g`` (Proposition 3, docs/theory.md C6).

    .. math::

        E\|\hat g_B - g\|^2 = k\,c_1 + \frac{E_X\,\mathrm{MSE}(X)}{B}, \qquad k = \frac{1}{B}

    For the unbiased estimators ``E||g_hat - g||^2 = k c1 + E_X MSE(X) / B`` with ``k = 1/B``
    for ``B`` i.i.d. prompts (``prompt_variance_factor`` overrides ``k``, e.g. for a finite
    prompt set sampled without replacement). The full-mean estimator is ``c = (G-1)/G`` times
    GRPO's, so its MSE is ``c^2 MSE_GRPO + (1 - c)^2 ||g||^2``.

    Returns a float for a scalar ``group_size``, an ``(n_G,)`` array otherwise.
    """
    m = _check_moments(moments)
    batch_size = as_int(batch_size, "batch_size", 1)
    rule, b = _check_estimator(estimator, baseline, m.n_prompts)
    G = _check_sizes(rule, group_size)
    if not rule.is_affine:
        if prompt_variance_factor is not None:
            raise ValueError(f"`prompt_variance_factor` needs an affine rule; {rule.name!r} "
                             "scales its advantages")
        mse = np.array([minibatch_advantage_mse(m, rule, int(g), batch_size)
                        for g in np.atleast_1d(G)])
        return float(mse[0]) if G.ndim == 0 else mse
    factor = 1.0 / batch_size if prompt_variance_factor is None else float(prompt_variance_factor)
    ref = _reference(m, rule, b)
    c1 = prompt_heterogeneity(m)
    out = []
    for g in np.atleast_1d(G):
        var, k = affine_variance(m, rule, float(g), ref)
        value = (k * k if k != 1 else 1.0) * c1 * factor + (m.prompt_prob @ var) / batch_size
        out.append(value + (k - 1.0) ** 2 * float(m.grad_norm_sq) if k != 1 else value)
    mse = np.array(out) if G.ndim == 1 else out[0]
    return float(mse) if np.ndim(mse) == 0 else mse


# ---------------------------------------------------------------------- baselines (C8-C10)
def optimal_constant_baseline(moments: PromptMoments) -> np.ndarray:
    r"""MSE-optimal prompt-only baseline ``b*(x) = E[||W||^2 Z] / E||W||^2`` (docs/theory.md C9).

    .. math::

        b^*(x) = \frac{E[\|W\|^2 Z \mid x]}{E[\|W\|^2 \mid x]}

    ``inf``-free: prompts with ``E||W||^2 = 0`` (a deterministic policy) have no score noise,
    every baseline is optimal there, and ``b* = V(x)`` is returned for them.
    """
    m = _check_moments(moments)
    safe = np.where(m.score_sq > 0, m.score_sq, 1.0)
    return np.where(m.score_sq > 0, m.score_sq_reward / safe, m.value)


def score_reward_covariance(moments: PromptMoments) -> np.ndarray:
    r"""``Cov(||W||^2, Z | x)``; zero for every prompt iff Assumption 2 holds (C8).

    .. math::

        \operatorname{Cov}(\|W\|^2, Z \mid x) = E[\|W\|^2 Z] - E\|W\|^2\,V(x)
    """
    m = _check_moments(moments)
    return m.score_sq_reward - m.score_sq * m.value


def assumption2_baseline_mse(moments: PromptMoments, baseline, group_size) -> np.ndarray:
    r"""Corollary 5's form ``(tr Sigma + E||W||^2 (V - b)^2)/G``, shape ``(P,)`` (C8).

    .. math::

        \frac{\operatorname{tr}\Sigma(x) + E\|W\|^2 (V(x) - b(x))^2}{G}

    Equal to :func:`per_prompt_mse` with ``estimator="baseline"`` exactly when Assumption 2
    (``Cov(||W||^2, Z | x) = 0``) holds; the difference is ``2 (V - b) Cov(||W||^2, Z)/G``.
    """
    m = _check_moments(moments)
    _, b = _check_estimator("baseline", baseline, m.n_prompts)
    G = as_int(group_size, "group_size", 1)
    return (m.trace_sigma_oracle + m.score_sq * (m.value - b) ** 2) / G


def grpo_vanilla_margin(moments: PromptMoments, group_size) -> np.ndarray:
    r"""``MSE_vanilla(x) - MSE_GRPO(x)``: positive where GRPO wins (C10), ``(P,)`` or ``(P, n_G)``.

    .. math::

        \mathrm{MSE}_{\mathrm{vanilla}}(x) - \mathrm{MSE}_{\mathrm{GRPO}}(x)
    """
    return (per_prompt_mse(moments, "vanilla", group_size)
            - per_prompt_mse(moments, "grpo", group_size))


def reversal_condition(moments: PromptMoments, group_size) -> np.ndarray:
    r"""C10's closed form: GRPO beats vanilla iff ``(S Var Z + ||g||^2)/(G-1) < S V^2``.

    .. math::

        \frac{E\|W\|^2 \operatorname{Var} Z + \|g(x)\|^2}{G - 1} < E\|W\|^2\, V(x)^2

    Exact under Assumption 2, when ``E||WZ||^2 - E||W(Z-V)||^2 = E||W||^2 V^2``; returns a
    boolean array ``(P,)`` or ``(P, n_G)``.
    """
    m = _check_moments(moments)
    G = _check_sizes(get_rule("grpo"), group_size)
    col = (slice(None), None) if G.ndim == 1 else (slice(None),)
    return ((m.score_sq_reward_var + m.grad_sq)[col] / (G - 1.0)
            < (m.score_sq * m.value**2)[col])


# ---------------------------------------------------------------------- matrix forms
def _require_matrices(m: PromptMoments) -> None:
    if not m.has_matrices:
        raise ValueError("these `moments` carry no matrix forms (grad_per_prompt, score_outer*); "
                         "ask the policy for moments with matrices")


def per_prompt_covariance(moments: PromptMoments, estimator: str, group_size,
                          baseline=None) -> np.ndarray:
    r"""``Cov(g_hat(x) | x)``, shape ``(P, d, d)``: the matrix form of Theorem 2 (C5, C22, C23).

    .. math::

        \operatorname{Cov}(\hat g_{\mathrm{GRPO}}(x) \mid x) = \frac{\Sigma}{G} + \frac{S(1) \operatorname{Var}(Z \mid x) + g g^\top}{G(G - 1)}

    Notes
    -----
    With ``S(q) = E[W W^T q(Z) | x]`` and ``Sigma = S((Z - V)^2) - g g^T``: baseline ``b``:
    ``(S((Z - b)^2) - g g^T)/G`` (vanilla ``b = 0``, oracle ``b = V``); GRPO:
    ``Sigma/G + (S(1) Var(Z|x) + g g^T)/(G(G-1))``; full-mean ``((G-1)/G)^2`` times GRPO. The
    traces are :func:`per_prompt_mse` (plus the full-mean bias, which a covariance omits).
    """
    m = _check_moments(moments)
    _require_matrices(m)
    rule, b = _check_affine(estimator, baseline, m.n_prompts)
    G = float(as_int(group_size, "group_size", rule.min_group_size, rule.min_group_reason))
    return affine_covariance(m, rule, G, _reference(m, rule, b))[0]


def _check_affine(estimator, baseline, n_prompts):
    rule, b = _check_estimator(estimator, baseline, n_prompts)
    if not rule.is_affine:
        raise ValueError(f"`estimator` {rule.name!r} scales its advantages; the matrix forms "
                         "cover affine rules")
    return rule, b


def between_prompt_covariance(moments: PromptMoments) -> np.ndarray:
    r"""``Cov_X g(X) = sum_x f(x) g(x) g(x)^T - g g^T``, shape ``(d, d)`` (Proposition 3).

    .. math::

        \operatorname{Cov}_X g(X) = \sum_x f(x)\, g(x) g(x)^\top - g g^\top
    """
    m = _check_moments(moments)
    _require_matrices(m)
    f, gx = m.prompt_prob, m.grad_per_prompt
    mean = f @ gx
    return np.einsum("p,pk,pl->kl", f, gx, gx) - np.outer(mean, mean)


def minibatch_covariance(moments: PromptMoments, estimator: str, group_size, batch_size=1,
                         baseline=None, prompt_variance_factor=None) -> np.ndarray:
    r"""Covariance ``Gamma`` of the minibatch estimator, ``(d, d)`` (Proposition 3, Theorem 8).

    .. math::

        \Gamma = k \operatorname{Cov}_X g(X) + \frac{E_X \operatorname{Cov}(\hat g(X) \mid X)}{B}

    ``k Cov_X g(X) + E_X Cov(g_hat(X) | X) / B`` with ``k = 1/B`` for i.i.d. prompts
    (``prompt_variance_factor`` overrides it); the full-mean estimator's is ``((G-1)/G)^2``
    times GRPO's, prompt term included.
    """
    m = _check_moments(moments)
    batch_size = as_int(batch_size, "batch_size", 1)
    factor = 1.0 / batch_size if prompt_variance_factor is None else float(prompt_variance_factor)
    rule, b = _check_affine(estimator, baseline, m.n_prompts)
    G = float(as_int(group_size, "group_size", rule.min_group_size, rule.min_group_reason))
    _require_matrices(m)
    cov, k = affine_covariance(m, rule, G, _reference(m, rule, b))
    within = np.einsum("p,pkl->kl", m.prompt_prob, cov)
    return (k * k if k != 1 else 1.0) * between_prompt_covariance(m) * factor + within / batch_size
