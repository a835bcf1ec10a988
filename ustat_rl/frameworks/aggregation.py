"""Loss aggregations over tokens and the clamped K3 penalty, as frameworks run them.

Two practical departures from the paper's estimator (docs/theory.md section 2; C25, C27):

* **Loss aggregation.** The paper's ``g_hat = (1/G) sum_g A_g W_g`` uses the sequence score
  ``W = sum_t grad log pi(y_t | ...)``. Frameworks form a per-token loss ``A_g log pi_t`` and
  reduce it over tokens and sequences in one of four ways (verl's ``loss_agg_mode`` names;
  docs/conventions.md maps them to TRL's ``loss_type``). With the advantage constant over a
  response's tokens, each reduction is ``sum_i c_i A_i W_i`` with a per-sample weight ``c_i``
  that depends on the lengths ``T_i``:

  ======================== ====================================== ============================
  mode                     reduction of the per-token loss        weight ``c_i``
  ======================== ====================================== ============================
  seq-mean-token-sum       mean over sequences of token sums      ``1/N``
  token-mean               mean over all tokens of the batch      ``1/sum_j T_j``
  seq-mean-token-mean      mean over sequences of token means     ``1/(N T_i)``
  seq-mean-token-sum-norm  sum over sequences of token sums / L   ``1/L`` (``L`` the horizon)
  ======================== ====================================== ============================

  The last row sums over sequences; verl 0.9.1's ``agg_loss`` takes the mean over sequences
  before dividing by ``L``, a weight ``1/(N L)``, ``N`` times smaller: a common factor, which the
  verl adapter (:mod:`ustat_rl.frameworks.verl_monitor`, tested against 0.9.1's own loss) applies.

  SkyRL's ``prompt_mean`` reduction (:func:`prompt_mean_weights`) is a fifth, outside the
  table because its weight needs the groups: the token mean within each prompt's group, then
  the mean over the ``P`` prompts, ``c_i = 1/(P S_p)`` with ``S_p`` the tokens of sample ``i``'s
  group. Each prompt's part is then the ``token-mean`` of a batch of that one group, so its
  exact mean is the average over prompts of :func:`exact_aggregation_mean` in ``token-mean``
  mode, where the batch ``token-mean`` weighs each prompt by its share of the batch's tokens.

  Only ``seq-mean-token-sum`` is the paper's estimator. :func:`exact_aggregation_mean` gives
  the exact mean of each at one prompt for binary rewards and a group convention, by summing
  over the outputs of an enumerable policy (docs/theory.md section 7 with ``W`` replaced by the
  length-weighted score).

* **The clamped K3 penalty.** verl's ``low_var_kl`` clamps ``log r = log pi_ref - log pi`` to
  ``[-20, 20]`` and ``K3 = r - log r - 1`` to ``[-10, 10]``; where a clamp binds, its gradient
  is zero. :func:`k3_clamped` and :func:`k3_clamped_gradient_factor` implement it;
  :func:`softmax_k3_expected_gradient` gives the exact expected per-sample gradient on a softmax
  bandit, to set against the unclamped ``grad KL(pi_ref || pi_theta) = pi - pi_ref`` (C27).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import binom

from .._validation import as_int

__all__ = [
    "AGGREGATIONS",
    "K3_LOG_RATIO_CLIP",
    "K3_VALUE_CLIP",
    "aggregation_weights",
    "aggregate_token_gradients",
    "aggregate_scores",
    "exact_aggregation_mean",
    "k3_clamped",
    "k3_clamped_gradient_factor",
    "prompt_mean_weights",
    "softmax_k3_expected_gradient",
]

#: verl's ``loss_agg_mode`` values, in the order of the module table.
AGGREGATIONS = ("seq-mean-token-sum", "token-mean", "seq-mean-token-mean",
                "seq-mean-token-sum-norm")

#: verl ``low_var_kl``: ``log(pi_ref/pi)`` is clamped to ``[-20, 20]`` before ``exp``.
K3_LOG_RATIO_CLIP = 20.0

#: verl ``low_var_kl`` (and some OpenRLHF releases' ``k3``): the K3 value is clamped to ``[-10, 10]``.
K3_VALUE_CLIP = 10.0


def _check_mode(mode: str, horizon) -> None:
    if mode not in AGGREGATIONS:
        raise ValueError(f"`mode` must be one of {AGGREGATIONS}, got {mode!r}")
    if mode == "seq-mean-token-sum-norm" and (horizon is None or horizon <= 0):
        raise ValueError("`horizon` (the constant L, e.g. the maximum response length) must be "
                         f"positive for mode {mode!r}, got {horizon!r}")


def aggregation_weights(lengths, mode: str, horizon=None, *, total_tokens=None) -> np.ndarray:
    """Per-sample weights ``c_i`` with ``g_hat = sum_i c_i A_i W_i`` for a loss aggregation.

    The one home of these weights: each TRL ``loss_type`` is one of these reductions, and
    :func:`ustat_rl.frameworks.trainer_units.completion_weights` reads its weights from here.

    Parameters
    ----------
    lengths : array_like (..., N)
        Response lengths ``T_i >= 1`` in tokens (the response mask's row sums); the last axis is
        the batch, so a stack of batches gets its weights in one call.
    mode : str
        One of :data:`AGGREGATIONS`.
    horizon : float, optional
        ``L`` of ``seq-mean-token-sum-norm`` (verl divides by the mask's width; Dr. GRPO by the
        maximum generation length).
    total_tokens : float, optional
        The token count ``token-mean`` divides by (default ``sum_j T_j`` over the last axis; a
        trainer may count tokens the lengths no longer show, e.g. truncated completions).

    Returns
    -------
    ndarray, the shape of ``lengths``

    Examples
    --------
    >>> aggregation_weights([1, 3], "token-mean").tolist()
    [0.25, 0.25]
    >>> aggregation_weights([1, 3], "seq-mean-token-mean").round(4).tolist()
    [0.5, 0.1667]
    """
    _check_mode(mode, horizon)
    T = np.asarray(lengths, dtype=np.float64)
    if T.ndim < 1 or T.size == 0 or np.any(T < 1):
        raise ValueError("`lengths` must be a non-empty array of lengths >= 1")
    n = T.shape[-1]
    if mode == "seq-mean-token-sum":
        return np.full(T.shape, 1.0 / n)
    if mode == "token-mean":
        total = T.sum(axis=-1, keepdims=True) if total_tokens is None else float(total_tokens)
        if np.any(~(np.asarray(total) > 0)):
            raise ValueError(f"`total_tokens` must be positive, got {total_tokens!r}")
        return np.broadcast_to(1.0 / total, T.shape).copy()
    if mode == "seq-mean-token-mean":
        return 1.0 / (n * T)
    return np.full(T.shape, 1.0 / float(horizon))


def prompt_mean_weights(lengths, group_ids) -> np.ndarray:
    """Per-sample weights ``c_i = 1/(P S_p)`` of SkyRL's ``prompt_mean`` loss reduction.

    SkyRL (``trainer.algorithm.loss_reduction="prompt_mean"``; NovaSky-AI/SkyRL at a9564572,
    ``skyrl/backends/skyrl_train/utils/ppo_utils.py``,
    ``apply_loss_reduction_to_advantages_minibatch``) scales each token's advantage by
    ``1/(P S_p)``: ``P`` the prompts of the mini-batch, ``S_p`` the loss tokens of all the
    answers to sample ``i``'s prompt (at least 1). Summing the per-token loss then gives the
    mean over prompts of each prompt's token mean, so ``g_hat = sum_i c_i A_i W_i``; every
    prompt counts equally, however many tokens its answers hold (``token-mean`` weighs it by
    its share of the batch's tokens). For a SkyRL run, pass them as ``loss_weights`` to
    :meth:`ustat_rl.frameworks.WindowMonitor.step` (the window then scores the gradient SkyRL
    takes; a common factor does not move G*); the exact mean is the average over prompts of
    :func:`exact_aggregation_mean` in ``token-mean`` mode (module docstring).

    Parameters
    ----------
    lengths : array_like (N,)
        Loss tokens per answer, ``T_i >= 0`` (an answer with no loss token adds nothing).
    group_ids : array_like (N,)
        The prompt of each answer, in any order.

    Returns
    -------
    ndarray (N,)

    Examples
    --------
    >>> prompt_mean_weights([1, 3, 2, 2], [0, 0, 1, 1]).tolist()
    [0.125, 0.125, 0.125, 0.125]
    >>> prompt_mean_weights([1, 3, 4], [0, 0, 1]).tolist()
    [0.125, 0.125, 0.125]
    """
    T = np.asarray(lengths, dtype=np.float64)
    ids = np.asarray(group_ids)
    if T.ndim != 1 or T.size == 0 or np.any(~(T >= 0)):
        raise ValueError("`lengths` must be a non-empty 1-D array of token counts >= 0")
    if ids.shape != T.shape:
        raise ValueError(f"`group_ids` must have the shape of `lengths` {T.shape}, got "
                         f"{ids.shape}")
    _, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    tokens = np.maximum(np.bincount(inverse, weights=T, minlength=counts.size), 1.0)
    return 1.0 / (counts.size * tokens[inverse])


def aggregate_token_gradients(advantages, token_scores, mask, mode: str, horizon=None):
    """Gradient of the aggregated per-token loss ``A_i log pi(y_it)`` (docs/theory.md section 2).

    Parameters
    ----------
    advantages : array_like (N,)
        One advantage per response, shared by its tokens.
    token_scores : array_like (N, T, d)
        ``grad log pi(y_it | x, y_i,<t)`` per token (anything at masked positions).
    mask : array_like (N, T)
        1 on response tokens, 0 on padding.
    mode, horizon
        As in :func:`aggregation_weights`.

    Returns
    -------
    ndarray (d,)
        The reduction written out token by token, as a framework's ``agg_loss`` does it:
        ``token-mean`` divides the masked sum by the number of tokens, the ``seq-mean`` modes
        average per-sequence sums or means, and ``seq-mean-token-sum-norm`` sums them and
        divides by ``L``.
    """
    _check_mode(mode, horizon)
    A = np.asarray(advantages, dtype=np.float64)
    S = np.asarray(token_scores, dtype=np.float64)
    M = np.asarray(mask, dtype=np.float64)
    if S.ndim != 3 or M.shape != S.shape[:2] or A.shape != S.shape[:1]:
        raise ValueError("expected `advantages` (N,), `token_scores` (N, T, d), `mask` (N, T)")
    per_token = A[:, None, None] * S * M[:, :, None]  # (N, T, d)
    seq_sum = per_token.sum(axis=1)  # (N, d)
    if mode == "token-mean":
        return seq_sum.sum(axis=0) / M.sum()
    if mode == "seq-mean-token-sum":
        return seq_sum.mean(axis=0)
    if mode == "seq-mean-token-mean":
        return (seq_sum / M.sum(axis=1)[:, None]).mean(axis=0)
    return seq_sum.sum(axis=0) / float(horizon)


def aggregate_scores(advantages, scores, lengths, mode: str, horizon=None) -> np.ndarray:
    """The same gradient from sequence scores ``W_i`` and lengths: ``sum_i c_i A_i W_i``.

    Equal to :func:`aggregate_token_gradients` because ``W_i`` is the sum of the token scores
    and the advantage is shared by a response's tokens. ``scores`` is ``(N, d)``.
    """
    c = aggregation_weights(lengths, mode, horizon)  # (N,)
    A = np.asarray(advantages, dtype=np.float64)
    W = np.asarray(scores, dtype=np.float64)
    if W.ndim != 2 or A.shape != (W.shape[0],) or c.shape != A.shape:
        raise ValueError("expected `advantages` (N,), `scores` (N, d), `lengths` (N,)")
    return (c * A) @ W


def _sum_pmf(pmf: np.ndarray, count: int) -> np.ndarray:
    """pmf of the sum of ``count`` i.i.d. lengths with pmf ``pmf`` over ``0..T``."""
    out = np.array([1.0])
    for _ in range(count):
        out = np.convolve(out, pmf)
    return out


def exact_aggregation_mean(prob, reward, lengths, scores, estimator, group_size: int,
                           mode: str, horizon=None) -> np.ndarray:
    """Exact ``E g_hat(x)`` of one group of ``G`` under a loss aggregation (binary rewards).

    Parameters
    ----------
    prob : array_like (K,)
        ``pi(y | x)`` over every output ``y`` (sums to one).
    reward : array_like (K,)
        ``Z(y)`` in ``{0, 1}``.
    lengths : array_like (K,)
        Integer lengths ``T(y) >= 1``.
    scores : array_like (K, k)
        ``W(y)``, or any fixed linear projection of it (the mean is linear in ``W``).
    estimator : str, callable or AdvantageTable
        A group convention (see :func:`ustat_rl.theory.advantage.advantage_table`).
    group_size : int
        ``G``; the batch is the one group, so ``N = G``.
    mode, horizon
        As in :func:`aggregation_weights`.

    Returns
    -------
    ndarray (k,)

    Notes
    -----
    Given the rewards, the ``G`` draws are independent with ``Y ~ pi(. | x, Z)``
    (docs/theory.md section 7), and ``A_g = a(Z_g, M)``. For weights that depend on a draw's own
    length only, ``c(T) = w(T)/G``,
    ``E g_hat = sum_m P(M = m) [m a(1, m) nu_1 + (G - m) a(0, m) nu_0] / G`` with
    ``nu_z = E[w(T) W | Z = z]``. For ``token-mean`` the weight ``1/(T_g + S)`` couples the
    draw with the others' total length ``S``, which given ``M = m`` is independent of it and
    has the pmf of a sum of ``m - 1`` (or ``m``) success lengths and ``G - m`` (or
    ``G - m - 1``) failure lengths; so ``nu`` becomes
    ``sum_t E[W 1{T = t} | Z = z] E[1/(t + S)]`` with that pmf. Cost: ``O(K k + G^3 T)``.
    """
    from ..theory.advantage import as_advantage_table

    _check_mode(mode, horizon)
    G = as_int(group_size, "group_size", 1)
    p = np.asarray(prob, dtype=np.float64)
    z = np.asarray(reward, dtype=np.float64)
    T = np.asarray(lengths)
    W = np.asarray(scores, dtype=np.float64)
    if not (p.ndim == 1 and z.shape == p.shape and T.shape == p.shape and W.ndim == 2
            and W.shape[0] == p.size):
        raise ValueError("expected `prob`, `reward`, `lengths` (K,) and `scores` (K, k)")
    if not np.all((z == 0) | (z == 1)):
        raise ValueError("`reward` must be binary (0 or 1)")
    if np.any(T < 1) or not np.all(T == np.round(T)):
        raise ValueError("`lengths` must be integers >= 1")
    T = T.astype(int)
    table = as_advantage_table(estimator, G)
    V = float(p @ z)
    m = np.arange(G + 1)
    pm = binom.pmf(m, G, V)  # (G+1,)
    t_max = int(T.max())
    # (2, t_max+1, k): E[W 1{T = t}, Z = z] (joint, not yet divided by P(Z = z))
    joint = np.zeros((2, t_max + 1, W.shape[1]))
    length_pmf = np.zeros((2, t_max + 1))  # P(T = t, Z = z)
    for cls in (0, 1):
        sel = z == cls
        np.add.at(joint[cls], T[sel], p[sel, None] * W[sel])
        np.add.at(length_pmf[cls], T[sel], p[sel])
    mass = np.array([1.0 - V, V])
    t = np.arange(t_max + 1, dtype=np.float64)
    total = np.zeros(W.shape[1])
    for k in range(G + 1):
        if pm[k] == 0.0:
            continue
        for cls, a, count in ((1, table.success[k], k), (0, table.failure[k], G - k)):
            if count == 0 or a == 0.0 or mass[cls] == 0.0:
                continue
            if mode == "token-mean":
                q1 = length_pmf[1] / mass[1] if mass[1] > 0 else np.zeros(t_max + 1)
                q0 = length_pmf[0] / mass[0] if mass[0] > 0 else np.zeros(t_max + 1)
                others = np.convolve(_sum_pmf(q1, k - (cls == 1)),
                                     _sum_pmf(q0, G - k - (cls == 0)))  # pmf of S
                s = np.arange(others.size, dtype=np.float64)
                with np.errstate(divide="ignore"):
                    weight = G * np.array([others @ (1.0 / (tt + s)) if tt > 0 else 0.0
                                           for tt in t])  # G E[1/(t + S)]
            elif mode == "seq-mean-token-sum":
                weight = np.ones(t_max + 1)
            elif mode == "seq-mean-token-mean":
                weight = np.where(t > 0, 1.0 / np.maximum(t, 1.0), 0.0)
            else:
                weight = np.full(t_max + 1, G / float(horizon))
            nu = (weight @ joint[cls]) / mass[cls]  # (k,) E[w(T) W | Z = cls]
            total += pm[k] * count * a * nu / G
    return total


def k3_clamped(log_prob, ref_log_prob, log_ratio_clip: float = K3_LOG_RATIO_CLIP,
               value_clip: float = K3_VALUE_CLIP) -> np.ndarray:
    """verl's ``low_var_kl`` K3 value: ``clip(r - log r - 1, -10, 10)``, ``log r`` clipped at +-20.

    ``log r = ref_log_prob - log_prob`` (docs/theory.md C27). Pass ``np.inf`` for either clip to
    drop it (TRL's GRPO penalty clamps neither).

    Examples
    --------
    >>> k3_clamped(np.log([0.5, 0.01]), np.log([0.5, 0.3])).round(4).tolist()
    [0.0, 10.0]
    """
    lr = np.clip(np.asarray(ref_log_prob, dtype=np.float64)
                 - np.asarray(log_prob, dtype=np.float64), -log_ratio_clip, log_ratio_clip)
    return np.clip(np.exp(lr) - lr - 1.0, -value_clip, value_clip)


def k3_clamped_gradient_factor(log_prob, ref_log_prob, log_ratio_clip: float = K3_LOG_RATIO_CLIP,
                               value_clip: float = K3_VALUE_CLIP) -> np.ndarray:
    """``d K3_clamped / d log pi``: ``(1 - pi_ref/pi)`` where no clamp binds, else 0 (C27).

    The per-sample gradient of the clamped penalty is this factor times ``grad log pi``. A clamp
    passes no gradient where it binds (``torch.clamp``), so the factor is zero when
    ``|log r| > log_ratio_clip`` or ``K3 > value_clip``. Since ``K3 >= 0`` the lower value clamp
    never binds, and ``K3 > 10`` already for ``log r > 2.53`` or ``log r < -11.0``, so with
    verl's constants only the value clamp matters for the gradient.
    """
    lr_raw = np.asarray(ref_log_prob, dtype=np.float64) - np.asarray(log_prob, dtype=np.float64)
    lr = np.clip(lr_raw, -log_ratio_clip, log_ratio_clip)
    k3 = np.exp(lr) - lr - 1.0
    active = (np.abs(lr_raw) <= log_ratio_clip) & (k3 <= value_clip) & (k3 >= -value_clip)
    return np.where(active, 1.0 - np.exp(lr), 0.0)


def softmax_k3_expected_gradient(logits, ref_logits, log_ratio_clip: float = K3_LOG_RATIO_CLIP,
                                 value_clip: float = K3_VALUE_CLIP) -> np.ndarray:
    """Exact ``E_{y ~ pi}[grad_theta K3_clamped(y)]`` for a softmax over logits ``theta`` (C27).

    ``grad log pi(y) = e_y - pi``, so the expectation is
    ``sum_y pi(y) f(y) (e_y - pi)`` with ``f`` from :func:`k3_clamped_gradient_factor`. With no
    clamp binding it is ``pi - pi_ref = grad KL(pi_ref || pi_theta)``.

    Examples
    --------
    >>> pi = np.log([0.4, 0.6]); ref = np.log([0.5, 0.5])
    >>> softmax_k3_expected_gradient(pi, ref).round(6).tolist()
    [-0.1, 0.1]
    """
    logits = np.asarray(logits, dtype=np.float64)
    ref_logits = np.asarray(ref_logits, dtype=np.float64)
    log_pi = logits - np.logaddexp.reduce(logits)
    log_ref = ref_logits - np.logaddexp.reduce(ref_logits)
    pi = np.exp(log_pi)
    f = k3_clamped_gradient_factor(log_pi, log_ref, log_ratio_clip, value_clip)  # (K,)
    return pi * f - pi * float(pi @ f)
