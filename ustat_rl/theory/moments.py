"""The moments contract: what the finite-G theory needs to know about a policy.

Every exact result of the paper's finite-G theory (Theorem 2, Proposition 3, Corollaries 4-5,
Theorem 7, and the matrix forms behind Theorem 8) depends on a policy only through a handful of
per-prompt moments of the score ``W`` and the reward ``Z``. :class:`PromptMoments` holds them
for a finite prompt set with weights ``f(x)``; a policy class supplies them (exactly, by
enumeration or closed form) and :mod:`ustat_rl.theory` turns them into MSEs, Hoeffding
components, scaling constants and ``G*``. Moments estimated from rollouts fill the same contract
(``kind="estimated"``), so the same functions apply to them (docs/theory.md section 7).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from .._validation import as_int
from .gram import FactoredGram

__all__ = ["PromptMoments", "MOMENT_KINDS", "batch_mean_terms"]

#: ``"exact"``: moments of a known policy, which must satisfy every moment inequality;
#: ``"estimated"``: unbiased estimates, which may break them by sampling noise.
MOMENT_KINDS = ("exact", "estimated")

#: Relative slack for the moment inequalities of exact moments (double-precision rounding of
#: sums of up to millions of terms stays far below it).
INEQUALITY_RTOL = 1e-8

_VECTOR_FIELDS = ("value", "reward_var", "score_sq", "score_sq_reward", "score_sq_reward_sq",
                  "score_sq_centred", "grad_sq", "score_sq_reward_var")
_MATRIX_FIELDS = ("score_outer", "score_outer_reward", "score_outer_reward_sq")


@dataclass(frozen=True)
class PromptMoments:
    """Per-prompt moments of a policy over a finite prompt set (docs/theory.md section 1).

    All expectations are conditional on the prompt ``x``; ``W`` is the score, ``Z`` the reward,
    ``V(x) = E[Z | x]`` and ``g(x) = E[W Z | x]``. ``P`` is the number of prompts, ``d`` the
    parameter dimension.

    Attributes
    ----------
    prompt_prob : ndarray (P,)
        ``f(x)``, non-negative, summing to one.
    value : ndarray (P,)
        ``V(x)``.
    reward_var : ndarray (P,)
        ``Var(Z | x)``.
    score_sq : ndarray (P,)
        ``E||W||^2``.
    score_sq_reward : ndarray (P,)
        ``E[||W||^2 Z]``.
    score_sq_reward_sq : ndarray (P,)
        ``E||W Z||^2 = E[||W||^2 Z^2]``.
    score_sq_centred : ndarray (P,)
        ``E||W (Z - V)||^2``; ``tr Sigma_oracle(x)`` is this minus ``||g(x)||^2``.
    grad_sq : ndarray (P,)
        ``||g(x)||^2``.
    grad_gram : ndarray (P, P) or FactoredGram
        ``<g(x_i), g(x_j)>``; its diagonal is ``grad_sq``. Estimated moments hold it as a
        :class:`~ustat_rl.theory.gram.FactoredGram` (``O(P k)`` memory; products with vectors
        without the ``(P, P)`` array, which any other use gets).
    kind : {"exact", "estimated"}
        Exact moments are checked against the moment inequalities; estimates are not.
    score_sq_reward_var : ndarray (P,), optional
        ``E||W||^2 Var(Z | x)``, the numerator of GRPO's excess MSE; the product of the two
        fields by default (an unbiased *estimate* of the product is not the product of estimates,
        so estimated moments supply it).
    grad_norm_sq : float, optional
        ``||g||^2`` with ``g = sum_x f(x) g(x)``; ``f^T grad_gram f`` by default (estimated moments
        supply the unbiased cross-prompt estimate instead).
    grad_per_prompt : ndarray (P, d), optional
        The vectors ``g(x)``, for the matrix forms.
    score_outer, score_outer_reward, score_outer_reward_sq : ndarray (P, d, d), optional
        ``E[W W^T]``, ``E[W W^T Z]`` and ``E[W W^T Z^2]``: the matrix forms of Theorem 2 and the
        noise covariance of Theorem 8. Given together with ``grad_per_prompt`` or not at all.
    """

    prompt_prob: np.ndarray
    value: np.ndarray
    reward_var: np.ndarray
    score_sq: np.ndarray
    score_sq_reward: np.ndarray
    score_sq_reward_sq: np.ndarray
    score_sq_centred: np.ndarray
    grad_sq: np.ndarray
    grad_gram: np.ndarray
    kind: str = "exact"
    score_sq_reward_var: np.ndarray | None = None
    grad_norm_sq: float | None = None
    grad_per_prompt: np.ndarray | None = None
    score_outer: np.ndarray | None = None
    score_outer_reward: np.ndarray | None = None
    score_outer_reward_sq: np.ndarray | None = None

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("kind", "grad_norm_sq") or value is None \
                    or isinstance(value, FactoredGram):
                continue
            array = np.asarray(value, dtype=np.float64)
            if array is value:
                array = array.copy()
            array.setflags(write=False)
            object.__setattr__(self, f.name, array)
        if self.score_sq_reward_var is None:
            derived = self.score_sq * self.reward_var
            derived.setflags(write=False)
            object.__setattr__(self, "score_sq_reward_var", derived)
        if self.grad_norm_sq is None and self.grad_gram.ndim == 2 and self.prompt_prob.ndim == 1:
            norm = float(self.prompt_prob @ self.grad_gram @ self.prompt_prob) \
                if self.grad_gram.shape == (self.prompt_prob.size,) * 2 else float("nan")
            object.__setattr__(self, "grad_norm_sq", norm)
        validate_moments(self)

    @property
    def n_prompts(self) -> int:
        """``P``."""
        return int(self.value.shape[0])

    @property
    def has_matrices(self) -> bool:
        """Whether the matrix forms (``grad_per_prompt`` and the ``score_outer*`` fields) exist."""
        return self.score_outer is not None

    @property
    def trace_sigma_oracle(self) -> np.ndarray:
        """``tr Sigma_oracle(x) = E||W(Z - V)||^2 - ||g(x)||^2``, shape ``(P,)`` (Theorem 2)."""
        return self.score_sq_centred - self.grad_sq

    def restrict(self, index) -> "PromptMoments":
        """The moments of a subset of prompts (``index`` into ``0..P-1``), reweighted to sum to 1.

        ``grad_norm_sq`` is recomputed from the Gram matrix, so use it on exact moments (or when
        the subset's own cross-prompt term is wanted).
        """
        index = np.asarray(index, dtype=np.int64)
        if index.ndim != 1 or index.size == 0:
            raise ValueError("`index` must be a non-empty 1-D array of prompt indices")
        if np.any(index < 0) or np.any(index >= self.n_prompts):
            raise ValueError(f"`index` must lie in [0, {self.n_prompts - 1}]")
        weight = self.prompt_prob[index]
        if weight.sum() <= 0:
            raise ValueError("the selected prompts have zero total weight")
        kwargs = {name: getattr(self, name)[index] for name in _VECTOR_FIELDS}
        gram = self.grad_gram
        kwargs["grad_gram"] = (gram.restrict(index) if isinstance(gram, FactoredGram)
                               else gram[np.ix_(index, index)])
        if self.has_matrices:
            kwargs["grad_per_prompt"] = self.grad_per_prompt[index]
            kwargs.update({name: getattr(self, name)[index] for name in _MATRIX_FIELDS})
        return PromptMoments(prompt_prob=weight / weight.sum(), kind=self.kind, **kwargs)

    def reweight(self, prompt_prob) -> "PromptMoments":
        """The same per-prompt moments under other prompt weights (``grad_norm_sq`` recomputed)."""
        kwargs = {f.name: getattr(self, f.name) for f in fields(self)}
        kwargs["prompt_prob"] = prompt_prob
        kwargs["grad_norm_sq"] = None
        return PromptMoments(**kwargs)


def _fail(name: str, message: str):
    raise ValueError(f"PromptMoments field `{name}` {message}")


def validate_moments(m: PromptMoments) -> None:
    """Check shapes, finiteness and (for exact moments) the moment inequalities.

    Raises ``ValueError`` naming the field at fault. The inequalities, each up to a relative
    :data:`INEQUALITY_RTOL`, for every prompt:

    * ``Var(Z) >= 0``, ``E||W||^2 >= 0``, ``||g||^2 >= 0``, ``E||WZ||^2 >= 0``;
    * ``||g(x)||^2 <= E||W(Z - V)||^2`` (Jensen, as ``g = E[W(Z - V)]``): ``tr Sigma_oracle >= 0``;
    * ``||g(x)||^2 <= E||W Z||^2`` (Jensen): vanilla's MSE is non-negative;
    * ``E[||W||^2 Z]^2 <= E||W||^2 E[||W||^2 Z^2]`` (Cauchy-Schwarz);
    * the Gram matrix is positive semi-definite and ``f^T grad_gram f <= sum f ||g(x)||^2``.
    """
    if m.kind not in MOMENT_KINDS:
        _fail("kind", f"must be one of {MOMENT_KINDS}, got {m.kind!r}")
    f = m.prompt_prob
    if f.ndim != 1 or f.size == 0:
        _fail("prompt_prob", f"must be a non-empty 1-D array, got shape {f.shape}")
    P = f.size
    for name in ("prompt_prob",) + _VECTOR_FIELDS:
        array = getattr(m, name)
        if array.shape != (P,):
            _fail(name, f"must have shape ({P},), got {array.shape}")
        if not np.all(np.isfinite(array)):
            _fail(name, "must be finite (no NaN or inf)")
    if np.any(f < 0):
        _fail("prompt_prob", "must be non-negative")
    if abs(f.sum() - 1.0) > 1e-9:
        _fail("prompt_prob", f"must sum to 1, got {f.sum()!r}")
    if m.grad_gram.shape != (P, P):
        _fail("grad_gram", f"must have shape ({P}, {P}), got {m.grad_gram.shape}")
    if isinstance(m.grad_gram, FactoredGram):
        _check_factored_gram(m)
    else:
        _check_dense_gram(m)
    if m.grad_norm_sq is None or not np.isfinite(m.grad_norm_sq):
        _fail("grad_norm_sq", f"must be a finite float, got {m.grad_norm_sq!r}")
    _validate_matrices(m, P)
    if m.kind == "exact":
        _check_inequalities(m)


def _check_factored_gram(m: PromptMoments) -> None:
    """A factored Gram matrix is symmetric by construction: its factor and diagonal must be
    finite and the diagonal ``grad_sq``."""
    gram = m.grad_gram
    if not gram.is_finite():
        _fail("grad_gram", "must be finite (no NaN or inf)")
    scale = max(1.0, float(np.max(np.abs(gram.diagonal), initial=0.0)))
    if not np.allclose(gram.diagonal, m.grad_sq, rtol=1e-8, atol=1e-12 * scale):
        _fail("grad_gram", "must have `grad_sq` on its diagonal")


def _check_dense_gram(m: PromptMoments) -> None:
    if not np.all(np.isfinite(m.grad_gram)):
        _fail("grad_gram", "must be finite (no NaN or inf)")
    scale = max(1.0, float(np.max(np.abs(m.grad_gram))))
    if not np.allclose(m.grad_gram, m.grad_gram.T, rtol=0.0, atol=1e-10 * scale):
        _fail("grad_gram", "must be symmetric")
    if not np.allclose(np.diag(m.grad_gram), m.grad_sq, rtol=1e-8, atol=1e-12 * scale):
        _fail("grad_gram", "must have `grad_sq` on its diagonal")


def _validate_matrices(m: PromptMoments, P: int) -> None:
    given = [name for name in ("grad_per_prompt",) + _MATRIX_FIELDS if getattr(m, name) is not None]
    if not given:
        return
    if len(given) != 1 + len(_MATRIX_FIELDS):
        missing = sorted(set(("grad_per_prompt",) + _MATRIX_FIELDS) - set(given))
        _fail(missing[0], "must be given together with " + ", ".join(given))
    g = m.grad_per_prompt
    if g.ndim != 2 or g.shape[0] != P:
        _fail("grad_per_prompt", f"must have shape ({P}, d), got {g.shape}")
    d = g.shape[1]
    for name in ("grad_per_prompt",) + _MATRIX_FIELDS:
        array = getattr(m, name)
        if name != "grad_per_prompt" and array.shape != (P, d, d):
            _fail(name, f"must have shape ({P}, {d}, {d}), got {array.shape}")
        if not np.all(np.isfinite(array)):
            _fail(name, "must be finite (no NaN or inf)")
    scale = max(1.0, float(np.max(np.abs(m.grad_sq))))
    if not np.allclose(np.einsum("pk,pk->p", g, g), m.grad_sq, rtol=1e-8, atol=1e-12 * scale):
        _fail("grad_per_prompt", "must have squared norms equal to `grad_sq`")
    if not np.allclose(np.einsum("pkk->p", m.score_outer), m.score_sq, rtol=1e-8,
                       atol=1e-12 * max(1.0, float(np.max(m.score_sq)))):
        _fail("score_outer", "must have traces equal to `score_sq`")


def _check_inequalities(m: PromptMoments) -> None:
    tol = INEQUALITY_RTOL

    def at_least(name, lhs, rhs, what):
        slack = tol * np.maximum(1.0, np.maximum(np.abs(lhs), np.abs(rhs)))
        bad = np.flatnonzero(np.asarray(lhs) < np.asarray(rhs) - slack)
        if bad.size:
            i = int(bad[0])
            _fail(name, f"breaks {what} at prompt {i} "
                        f"({float(np.ravel(lhs)[i]):.6g} < {float(np.ravel(rhs)[i]):.6g})")

    zero = np.zeros(m.n_prompts)
    at_least("reward_var", m.reward_var, zero, "Var(Z|x) >= 0")
    at_least("score_sq", m.score_sq, zero, "E||W||^2 >= 0")
    at_least("grad_sq", m.grad_sq, zero, "||g(x)||^2 >= 0")
    at_least("score_sq_reward_sq", m.score_sq_reward_sq, zero, "E||WZ||^2 >= 0")
    at_least("score_sq_centred", m.score_sq_centred, m.grad_sq, "||g(x)||^2 <= E||W(Z-V)||^2")
    at_least("score_sq_reward_sq", m.score_sq_reward_sq, m.grad_sq, "||g(x)||^2 <= E||WZ||^2")
    at_least("score_sq_reward_sq", m.score_sq * m.score_sq_reward_sq, m.score_sq_reward ** 2,
             "E[||W||^2 Z]^2 <= E||W||^2 E||WZ||^2")
    eig = np.linalg.eigvalsh(np.asarray(m.grad_gram))
    if eig.size and eig[0] < -tol * max(1.0, float(eig[-1])):
        _fail("grad_gram", f"must be positive semi-definite (smallest eigenvalue {eig[0]:.3g})")
    mean_sq = float(m.prompt_prob @ m.grad_sq)
    if m.grad_norm_sq > mean_sq + tol * max(1.0, mean_sq):
        _fail("grad_norm_sq", f"must not exceed E_X||g(X)||^2 = {mean_sq:.6g}, got "
                              f"{m.grad_norm_sq:.6g}")


def batch_mean_terms(mean_second, alpha, gram, beta, batch_size) -> tuple[float, float, float]:
    r"""``(E||g_B||^2, <E g_B, t>, ||E g_B||^2)`` for the mean ``g_B`` of ``B`` i.i.d. draws of
    an estimate whose mean is ``sum_i alpha_i v_i``, against a target ``t = sum_i beta_i v_i``.

    .. math::

        E\|\hat g_B\|^2 = \frac{m_2}{B} + \Big(1 - \frac1B\Big) \alpha^\top \Gamma \alpha,
        \qquad E\|\hat g_B - t\|^2 = E\|\hat g_B\|^2 - 2 \alpha^\top \Gamma \beta + \|t\|^2,

    ``Gamma`` the Gram matrix of the vectors ``v_i`` and ``m_2`` one draw's ``E||g_hat||^2``
    (averaged over prompts): the one batch decomposition the exact MSEs of a group rule
    (:mod:`ustat_rl.theory.advantage`), of a filtered batch and of a multi-reward rule
    (:mod:`ustat_rl.theory.multichannel`) are written with.
    """
    B = as_int(batch_size, "batch_size", 1)
    mean_sq = float(alpha @ gram @ alpha)
    return (float(mean_second) / B + (1.0 - 1.0 / B) * mean_sq, float(alpha @ gram @ beta),
            mean_sq)
