r"""Exact finite-G moments of multi-reward rules for binary channels (docs/theory.md C52).

With ``K`` binary reward channels a draw's rewards are one of ``O = 2^K`` joint outcomes ``o``.
A group of ``G`` draws at prompt ``x`` is summarised by its counts ``n = (n_o)``, multinomial
with probabilities ``q_o(x)``; a group rule gives a draw of outcome ``o`` the advantage
``a(o, n)`` (read off one representative group per ``n``). Given the outcomes, the actions are
independent with ``E[W | x, o] = mu_o``, so with ``nu_o = E[W 1{O = o} | x] = q_o mu_o`` and
``t_o = E[||W||^2 1{O = o} | x]``, for ``g_hat(x) = (1/G) sum_g a(O_g, n) W_g``

.. math::

    E\hat g(x) = \sum_o \alpha_o \nu_o, \quad
    \alpha_o = \sum_n P(n) \frac{n_o a(o, n)}{G q_o}

    E\|\hat g(x)\|^2 = \frac{1}{G^2} \sum_n P(n) \Big[\sum_o \frac{n_o a_o^2}{q_o} t_o
        + \sum_{o, o'} \frac{(n_o n_{o'} - \delta_{oo'} n_o) a_o a_{o'}}{q_o q_{o'}}
          \langle \nu_o, \nu_{o'} \rangle\Big],

a sum over the ``C(G + O - 1, O - 1)`` compositions of ``G``: exact for every ``G``. The target
is the gradient of the weighted objective ``E[sum_k w_k Z_k]``,
``t(x) = sum_k w_k g_k(x) = sum_o r_w(o) nu_o`` with ``r_w(o) = sum_k w_k o_k``.

A rule whose last stage divides by a statistic of the whole batch (TRL's ``normalize_then_sum``,
verl's and NeMo-RL's ``gdpo``, TRL's ``scale_rewards="batch"``) couples the groups. As the batch
grows its batch mean and std converge to population values over prompts and groups, computed
here exactly from the same sums; the rule with those constants is a group rule, and its moments
are the large-batch limit (``MultiChannelMoments.limit``). At finite ``B`` the batch rule is
measured by Monte Carlo (:mod:`ustat_rl.montecarlo.multichannel`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from .._validation import as_int
from .moments import PromptMoments, batch_mean_terms

__all__ = ["ChannelMoments", "MultiChannelMoments", "binary_outcomes", "compositions",
           "composition_pmf", "outcome_table", "limit_constants", "multichannel_moments",
           "scale_free_mse"]

#: Largest number of compositions a table is built for.
MAX_COMPOSITIONS = 2_000_000


def binary_outcomes(n_channels: int) -> np.ndarray:
    """The ``2^K`` joint outcomes of ``K`` binary channels, ``(2^K, K)``, channel 0 the fastest
    bit: row ``o`` has ``o_k = (o >> k) & 1``."""
    K = as_int(n_channels, "n_channels", 1)
    return ((np.arange(2**K)[:, None] >> np.arange(K)[None, :]) & 1).astype(np.float64)


@dataclass(frozen=True)
class ChannelMoments:
    """What the exact multi-channel theory needs of a policy with binary channels.

    Attributes
    ----------
    prompt_prob : ndarray (P,)
        ``f(x)``.
    outcome_prob : ndarray (P, O)
        ``q_o(x) = P(O = o | x)`` over the outcomes of :func:`binary_outcomes`.
    score_sq : ndarray (P, O)
        ``t_o(x) = E[||W||^2 1{O = o} | x]``.
    mean_gram : ndarray (P, O, P, O)
        ``<nu_o(x), nu_o'(x')>`` with ``nu_o(x) = E[W 1{O = o} | x]``.
    kind : {"exact", "estimated"}
    """

    prompt_prob: np.ndarray
    outcome_prob: np.ndarray
    score_sq: np.ndarray
    mean_gram: np.ndarray
    kind: str = "exact"

    def __post_init__(self):
        P, O = np.shape(self.outcome_prob)
        K = int(round(np.log2(O)))
        if O != 2**K or O < 2:
            raise ValueError(f"`outcome_prob` must have 2^K columns, got {O}")
        for name, shape in (("prompt_prob", (P,)), ("score_sq", (P, O)),
                            ("mean_gram", (P, O, P, O))):
            if np.shape(getattr(self, name)) != shape:
                raise ValueError(f"`{name}` must have shape {shape}, got "
                                 f"{np.shape(getattr(self, name))}")
            if not np.all(np.isfinite(getattr(self, name))):
                raise ValueError(f"`{name}` must be finite")
        q = np.asarray(self.outcome_prob, dtype=np.float64)
        if np.any(q < 0) or not np.allclose(q.sum(axis=1), 1.0, atol=1e-9):
            raise ValueError("`outcome_prob` rows must be probabilities summing to 1")
        if self.kind not in ("exact", "estimated"):
            raise ValueError(f"`kind` must be 'exact' or 'estimated', got {self.kind!r}")

    @property
    def n_prompts(self) -> int:
        return int(np.shape(self.outcome_prob)[0])

    @property
    def n_outcomes(self) -> int:
        return int(np.shape(self.outcome_prob)[1])

    @property
    def n_channels(self) -> int:
        return int(round(np.log2(self.n_outcomes)))

    @property
    def outcomes(self) -> np.ndarray:
        """``(O, K)``: :func:`binary_outcomes` of this many channels."""
        return binary_outcomes(self.n_channels)

    def channel(self, k: int) -> PromptMoments:
        """The single-reward :class:`~ustat_rl.theory.moments.PromptMoments` of channel ``k``
        alone (``Z = Z_k``), for the theory of docs/theory.md section 7."""
        k = as_int(k, "k", 0)
        if k >= self.n_channels:
            raise ValueError(f"`k` must be in [0, {self.n_channels - 1}], got {k}")
        z = self.outcomes[:, k]  # (O,)
        q, t = np.asarray(self.outcome_prob), np.asarray(self.score_sq)
        V = q @ z
        gram = np.einsum("o,xoyp,p->xy", z, self.mean_gram, z)  # (P, P) <g_k(x), g_k(y)>
        return PromptMoments(self.prompt_prob, V, V * (1 - V), t.sum(axis=1), t @ z, t @ z,
                             np.sum(t * (z[None, :] - V[:, None]) ** 2, axis=1), np.diag(gram),
                             gram, kind=self.kind)


def compositions(group_size: int, n_outcomes: int) -> tuple[np.ndarray, np.ndarray]:
    """Every way ``G`` draws fall on ``O`` outcomes: ``(counts (C, O), members (C, G))``, the
    members of composition ``c`` sorted, so ``members[c]`` is one representative group."""
    G, O = as_int(group_size, "group_size", 1), as_int(n_outcomes, "n_outcomes", 1)
    total = int(round(np.exp(gammaln(G + O) - gammaln(O) - gammaln(G + 1))))
    if total > MAX_COMPOSITIONS:
        raise ValueError(f"`group_size` {G} with {O} outcomes has {total} compositions; at most "
                         f"{MAX_COMPOSITIONS} are enumerated")
    members = np.array(list(itertools.combinations_with_replacement(range(O), G)),
                       dtype=np.int64).reshape(-1, G)
    counts = np.stack([np.bincount(row, minlength=O) for row in members])
    return counts, members


def composition_pmf(counts, outcome_prob) -> np.ndarray:
    """``P(n | x)``, ``(P, C)``: the multinomial pmf of every composition at every prompt."""
    counts = np.asarray(counts, dtype=np.float64)  # (C, O)
    q = np.asarray(outcome_prob, dtype=np.float64)  # (P, O)
    G = counts[0].sum()
    logq = np.log(np.where(q > 0, q, 1.0))  # (P, O); outcomes of probability 0 masked below
    log_pmf = gammaln(G + 1) - gammaln(counts + 1).sum(axis=1)[None] + logq @ counts.T
    impossible = (q[:, None, :] == 0) & (counts[None] > 0)  # (P, C, O)
    return np.where(impossible.any(axis=2), 0.0, np.exp(log_pmf))


def _first(members, n_outcomes):
    """``(C, O)`` position of each outcome's first draw in a representative group (0 if none)."""
    return np.argmax(members[:, :, None] == np.arange(n_outcomes)[None, None, :], axis=1)


def outcome_table(values, counts, members) -> np.ndarray:
    """``values (C, G)`` of the representative groups as ``(C, O)`` per outcome (0 where the
    outcome is absent): the value of a draw depends on its outcome and its group's counts."""
    O = counts.shape[1]
    table = np.take_along_axis(values, _first(members, O), axis=1)
    return np.where(counts > 0, table, 0.0)


def _stage_tables(rule, group_size, weights, n_channels):
    from ..advantages.multichannel import get_multichannel_rule

    rule = get_multichannel_rule(rule)
    G = as_int(group_size, "group_size", rule.min_group_size)
    w = rule.check_weights(weights, n_channels)
    counts, members = compositions(G, 2**n_channels)
    rows = binary_outcomes(n_channels)[members]  # (C, G, K)
    return rule, G, w, counts, members, rows


def limit_constants(moments: ChannelMoments, estimator, group_size, weights=None):
    """``(centre, spread)``: the large-batch limits of a batch final stage's statistics.

    For a final stage dividing by the batch std of its input (``spread_of == "input"``) the
    spread is the population std of the weighted sums ``x`` over prompts ``f`` and groups, and
    nothing is re-centred (``centre = 0``); for whitening (``"numerator"``) centre and spread are
    the population mean and std of the final numerator ``c``:
    ``E[c] = sum_x f(x) sum_n P(n | x) (1/G) sum_o n_o c(o, n)``.
    """
    estimator, G, w, counts, members, rows = _stage_tables(estimator, group_size, weights,
                                                      moments.n_channels)
    if estimator.spread_of == "":
        raise ValueError(f"rule {estimator.name!r} has no batch statistic")
    x = estimator.combined_grouped(rows, w)  # (C, G)
    values = x if estimator.spread_of == "input" else estimator.final_numerator.grouped(x)
    table = outcome_table(values, counts, members)  # (C, O)
    pmf = composition_pmf(counts, moments.outcome_prob)  # (P, C)
    per_draw = moments.prompt_prob @ pmf / G  # (C,): weight of each composition's draws
    first = float(per_draw @ np.sum(counts * table, axis=1))
    second = float(per_draw @ np.sum(counts * table**2, axis=1))
    centre = first if estimator.spread_of == "numerator" else 0.0
    return centre, float(np.sqrt(max(second - first**2, 0.0)))


def _group_advantages(rule, moments, G, w, counts, members, rows):
    """``(table (C, O), centre, spread)``: the advantage of each outcome in each composition,
    of the rule or, for a batch rule, of its large-batch limit."""
    if rule.statistics == "group":
        return outcome_table(rule.grouped(rows, w), counts, members), 0.0, float("nan")
    centre, spread = limit_constants(moments, rule, G, w)
    numerator = rule.final_numerator.grouped(rule.combined_grouped(rows, w)) - centre
    scaling = rule.final.scaling
    if spread > 0 or scaling.all_equal == "divide":
        adv = numerator / scaling.divisor(spread)
    else:  # the batch spread is 0: the stage keeps the numerator or gives 0
        adv = numerator if scaling.all_equal == "keep numerator" else 0.0 * numerator
    return outcome_table(adv, counts, members), centre, spread


@dataclass(frozen=True)
class MultiChannelMoments:
    """Exact moments of ``g_hat_B = (1/B) sum_b g_hat(X_b)`` for one rule, ``G``, ``B``, weights.

    Attributes
    ----------
    group_size, batch_size : int
    limit : bool
        Whether these are the large-batch limit's (a rule with batch statistics).
    centre, spread : float
        The limit's batch mean and std (0 and NaN for a group rule).
    mean_coefficients : ndarray (P, O)
        ``alpha_o(x)``: ``E g_hat(x) = sum_o alpha_o(x) nu_o(x)``.
    second_per_prompt, mse_per_prompt : ndarray (P,)
        ``E||g_hat(x)||^2`` and ``E||g_hat(x) - t(x)||^2``.
    second_moment : float
        ``E||g_hat_B||^2``.
    mean_projection, mean_norm_sq, target_norm_sq : float
        ``<E g_hat_B, t>``, ``||E g_hat_B||^2`` and ``||t||^2``, ``t = sum_x f(x) t(x)``.
    mse : float
        ``E||g_hat_B - t||^2``.
    """

    group_size: int
    batch_size: int
    limit: bool
    centre: float
    spread: float
    mean_coefficients: np.ndarray
    second_per_prompt: np.ndarray
    mse_per_prompt: np.ndarray
    second_moment: float
    mean_projection: float
    mean_norm_sq: float
    target_norm_sq: float
    mse: float

    @property
    def mean_factor(self) -> float:
        """``<E g_hat_B, t>/||t||^2``: the mean's component along the target (1: unbiased along
        it)."""
        return self.mean_projection / self.target_norm_sq

    @property
    def mean_cosine(self) -> float:
        """Cosine between ``E g_hat_B`` and ``t``: the bias direction (1: no bias in direction)."""
        return self.mean_projection / np.sqrt(self.mean_norm_sq * self.target_norm_sq)

    @property
    def scale_free_mse(self) -> float:
        r"""The MSE at the best step size, comparable between rules that scale differently:
        ``min_c E||c g_hat_B - t||^2 / ||t||^2 = 1 - <E g_hat_B, t>^2/(E||g_hat_B||^2 ||t||^2)``.
        """
        return scale_free_mse(self.mean_projection, self.second_moment, self.target_norm_sq)


def scale_free_mse(projection, second_moment, target_norm_sq):
    """``1 - <E g_hat, t>^2/(E||g_hat||^2 ||t||^2)``, the MSE at the best step size relative to
    ``||t||^2`` (:attr:`MultiChannelMoments.scale_free_mse`), from its three moments (exact ones
    or Monte Carlo means)."""
    return 1.0 - projection**2 / (second_moment * target_norm_sq)


def multichannel_moments(moments: ChannelMoments, estimator, group_size, weights=None,
                         batch_size=1) -> MultiChannelMoments:
    r"""Exact moments of a multi-channel rule at group size ``G`` and batch size ``B``.

    .. math::

        E\|\hat g_B - t\|^2 = \frac{E_X E\|\hat g(X)\|^2}{B}
            + \Big(1 - \frac{1}{B}\Big) a^\top \Gamma a - 2 a^\top \Gamma \tau
            + \tau^\top \Gamma \tau

    with ``a = f(x) alpha_o(x)``, ``tau = f(x) r_w(o)`` and ``Gamma`` the Gram matrix
    ``<nu_o(x), nu_o'(x')>``. A rule with batch statistics gets its large-batch limit
    (:func:`limit_constants`; ``limit=True`` in the result).

    Parameters
    ----------
    moments : ChannelMoments
    estimator : str or MultiChannelRule
        A name of :func:`ustat_rl.advantages.multichannel.multichannel_rule_names`.
    group_size, batch_size : int
    weights : array_like (K,), optional
        Channel weights ``w`` (ones by default); the target is ``sum_k w_k g_k``.

    Returns
    -------
    MultiChannelMoments

    Examples
    --------
    With one channel, summing then normalising is the single-reward rule:

    >>> from ustat_rl.policies.multichannel import MultiChannelBandit
    >>> bandit = MultiChannelBandit([[0.0, 1.0]], [[[0.7, 0.3], [0.2, 0.8]]])
    >>> out = multichannel_moments(bandit.channel_moments(), "trl_sum_then_normalize_none", 4)
    >>> round(out.mean_factor, 12)
    0.75
    """
    if not isinstance(moments, ChannelMoments):
        raise TypeError(f"`moments` must be a ChannelMoments, got {type(moments).__name__}")
    B = as_int(batch_size, "batch_size", 1)
    estimator, G, w, counts, members, rows = _stage_tables(estimator, group_size, weights,
                                                      moments.n_channels)
    table, centre, spread = _group_advantages(estimator, moments, G, w, counts, members, rows)
    q = np.asarray(moments.outcome_prob)  # (P, O)
    P, O = q.shape
    pmf = composition_pmf(counts, q)  # (P, C)
    inv_q = np.where(q > 0, 1.0 / np.where(q > 0, q, 1.0), 0.0)  # (P, O)
    n, a = counts.astype(np.float64), table  # (C, O) each
    alpha = (pmf @ (n * a)) * inv_q / G  # (P, O)
    diag = (pmf @ (n * a**2)) * inv_q  # (P, O)
    pair = n[:, :, None] * n[:, None, :] - np.eye(O)[None] * n[:, :, None]  # (C, O, O)
    cross = np.einsum("pc,cab->pab", pmf, pair * a[:, :, None] * a[:, None, :])
    cross = cross * inv_q[:, :, None] * inv_q[:, None, :]  # (P, O, O)
    gram = np.asarray(moments.mean_gram)
    within = gram[np.arange(P), :, np.arange(P), :]  # (P, O, O)
    second = (np.sum(diag * moments.score_sq, axis=1)
              + np.einsum("pab,pab->p", cross, within)) / G**2
    reward = binary_outcomes(moments.n_channels) @ w  # (O,) r_w(o)
    own = np.einsum("pa,pab,b->p", alpha, within, reward)
    mse_prompt = second - 2 * own + np.einsum("a,pab,b->p", reward, within, reward)
    f = np.asarray(moments.prompt_prob)
    full = gram.reshape(P * O, P * O)
    a_vec, t_vec = (f[:, None] * alpha).ravel(), (f[:, None] * reward[None, :]).ravel()
    second_b, proj, mean_sq = batch_mean_terms(f @ second, a_vec, full, t_vec, B)
    target_sq = float(t_vec @ full @ t_vec)
    return MultiChannelMoments(G, B, estimator.statistics == "batch", centre, spread, alpha, second,
                               mse_prompt, second_b, proj, mean_sq, target_sq,
                               second_b - 2 * proj + target_sq)
