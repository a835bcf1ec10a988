"""Algorithm 1 (plain SGD ascent, last iterate) for many independent runs at once (C14-C23).

``theta_{i+1} = theta_i + eta_{i+1} g_hat(theta_i)`` with ``eta_i = beta`` (constant) or
``eta_i = beta / i``. The ``R`` runs form one ``(R, d)`` array and advance together; each step
draws its randomness as uniforms from one generator *per run*, seeded by
``SeedSequence(seed, spawn_key=(run,))``, so a run's trajectory does not depend on how many runs
share the array, how they are split across workers (``run_offset``) or on the memory chunking
(exactly; an array of a single run may differ by rounding, ~1e-16, where numpy sums in
another order).

Problems implement ``draws_per_step(estimator, G, B)``, ``sample_gradient(theta (R, d), uniforms
(R, m), estimator, G, B) -> (R, d)`` and ``objective_many(theta (R, d)) -> (R,)``:
:class:`ustat_rl.policies.loglinear.LogLinearBandit` and :class:`NoisyQuadratic` here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri
from tqdm.auto import tqdm

from .._validation import as_finite_array, as_float, as_int
from ..seeding import child_rng

__all__ = ["NoisyQuadratic", "TrainingResult", "train", "run_generators", "learning_rates",
           "quadratic_expected_gap", "SCHEDULES"]

SCHEDULES = ("constant", "inverse")
_CHUNK_DOUBLES = 2_000_000  # uniforms held at once (16 MB); results do not depend on it


@dataclass(frozen=True)
class TrainingResult:
    """Iterates of ``R`` runs of Algorithm 1 at the requested checkpoints.

    Attributes
    ----------
    checkpoints : ndarray (C,)
        Iteration counts ``n`` (``0`` is the start).
    theta : ndarray (R, C, d)
        ``theta_n`` of every run at every checkpoint.
    objective : ndarray (R, C)
        ``J(theta_n)``.
    run_ids : ndarray (R,)
        Global run indices (their seeds' spawn keys).
    """

    checkpoints: np.ndarray
    theta: np.ndarray
    objective: np.ndarray
    run_ids: np.ndarray

    def gap(self, optimum_value: float) -> np.ndarray:
        """``Delta_n = J* - J(theta_n)``, shape ``(R, C)``."""
        return float(optimum_value) - self.objective


class NoisyQuadratic:
    """PL test objective ``J = J* - (theta - theta*)^T A (theta - theta*)/2`` with a null space.

    The gradient oracle returns ``g(theta) + xi`` with ``xi ~ N(0, Gamma)`` independent across
    steps, so ``M = sup MSE = tr Gamma`` (Lemma 6, docs/theory.md C14, C15). With ``A`` positive
    semi-definite, ``J`` is ``L``-smooth with ``L = lambda_max(A)`` and PL with
    ``mu = lambda_min^+(A)`` (C12, C13); the maximisers form ``theta* + null(A)``.

    Parameters
    ----------
    curvature : array_like (d, d)
        ``A``, symmetric positive semi-definite and not zero.
    optimum : array_like (d,)
        One maximiser ``theta*``.
    noise_cov : array_like (d, d)
        ``Gamma``, symmetric positive semi-definite.
    value : float
        ``J*``.

    Examples
    --------
    >>> q = NoisyQuadratic([[2.0, 0.0], [0.0, 0.0]], [0.0, 0.0], [[1.0, 0.0], [0.0, 0.0]])
    >>> q.smoothness, q.pl_constant, q.rank
    (2.0, 2.0, 1)
    """

    def __init__(self, curvature, optimum, noise_cov, value=0.0):
        a = as_finite_array(curvature, "curvature", ndim=(2,))
        d = a.shape[0]
        if a.shape != (d, d) or not np.allclose(a, a.T, atol=1e-12):
            raise ValueError(f"`curvature` must be a symmetric square matrix, got shape {a.shape}")
        eig, vec = np.linalg.eigh(a)
        tol = 1e-10 * max(1.0, abs(eig).max())
        if eig.min() < -tol or eig.max() <= tol:
            raise ValueError("`curvature` must be positive semi-definite and not zero")
        opt = as_finite_array(optimum, "optimum", ndim=(1,))
        gam = as_finite_array(noise_cov, "noise_cov", ndim=(2,))
        if opt.shape != (d,) or gam.shape != (d, d):
            raise ValueError(f"`optimum` must have shape ({d},) and `noise_cov` ({d}, {d})")
        geig, gvec = np.linalg.eigh((gam + gam.T) / 2)
        if geig.min() < -1e-10 * max(1.0, abs(geig).max()):
            raise ValueError("`noise_cov` must be positive semi-definite")
        self.curvature, self.optimum, self.noise_cov = a, opt, gam
        self.value = as_float(value, "value")
        self.dim = d
        keep = eig > tol
        self.identifiable_basis = vec[:, keep]  # (d, r)  Q
        self.null_basis = vec[:, ~keep]
        self.rank = int(keep.sum())
        self.smoothness = float(eig.max())
        self.pl_constant = float(eig[keep].min())
        self._noise_root = gvec * np.sqrt(np.clip(geig, 0.0, None))  # (d, d)  Gamma = R R^T

    def objective(self, theta) -> float:
        u = np.asarray(theta, dtype=np.float64) - self.optimum
        return float(self.value - 0.5 * u @ self.curvature @ u)

    def objective_many(self, theta) -> np.ndarray:
        u = np.asarray(theta, dtype=np.float64) - self.optimum  # (R, d)
        return self.value - 0.5 * np.einsum("rd,de,re->r", u, self.curvature, u)

    def grad(self, theta) -> np.ndarray:
        return -self.curvature @ (np.asarray(theta, dtype=np.float64) - self.optimum)

    def draws_per_step(self, estimator=None, group_size=None, batch_size=None) -> int:
        return self.dim

    def sample_gradient(self, theta, uniforms, estimator=None, group_size=None,
                        batch_size=None) -> np.ndarray:
        # 2^-54 floor: Generator.random can return exactly 0, where ndtri is -inf
        normal = ndtri(np.maximum(uniforms, 2.0**-54))  # (R, d)
        return -(theta - self.optimum) @ self.curvature + normal @ self._noise_root.T


# ---------------------------------------------------------------------- Algorithm 1
def run_generators(seed, n_runs: int, run_offset: int = 0) -> list[np.random.Generator]:
    """One generator per run: run ``j`` uses ``child_seed(seed, run_offset + j)``."""
    return [child_rng(seed, run_offset + j) for j in range(n_runs)]


def learning_rates(learning_rate: float, schedule: str, n_iter: int) -> np.ndarray:
    """``eta_1..eta_n``: ``beta`` (constant) or ``beta / i`` (inverse), shape ``(n,)``."""
    i = np.arange(1, n_iter + 1, dtype=np.float64)
    return np.full(n_iter, learning_rate) if schedule == "constant" else learning_rate / i


def train(problem, theta0, n_iter, *, learning_rate, schedule="inverse", n_runs=1, seed=0,
          estimator="grpo", group_size=8, batch_size=1, checkpoints=None, run_offset=0,
          progress=False, chunk_doubles=_CHUNK_DOUBLES) -> TrainingResult:
    """Run Algorithm 1 ``n_runs`` times in one vectorised array (docs/theory.md section 2).

    Parameters
    ----------
    problem : LogLinearBandit or NoisyQuadratic
    theta0 : array_like, shape (d,) or (R, d)
        Start, shared by all runs or one per run.
    n_iter : int
        Iterations ``n``.
    learning_rate : float
        ``beta > 0``.
    schedule : {"constant", "inverse"}
        ``eta_i = beta`` or ``eta_i = beta / i``.
    n_runs : int
        ``R``, independent runs.
    seed : int or SeedSequence
        Root of the per-run seeds.
    estimator : {"vanilla", "grpo", "oracle", "fullmean"}
    group_size, batch_size : int
        ``G`` and ``B``.
    checkpoints : sequence of int, optional
        Iterations at which to record ``theta`` (default: ``[0, n_iter]``).
    run_offset : int
        Global index of the first run (to split runs across workers).
    progress : bool
        Show a progress bar over iterations.
    chunk_doubles : int
        Memory bound for the uniforms drawn ahead; results do not depend on it.

    Returns
    -------
    TrainingResult

    Examples
    --------
    >>> q = NoisyQuadratic([[1.0]], [0.0], [[1.0]])
    >>> res = train(q, [3.0], 100, learning_rate=2.0, n_runs=4, seed=1)
    >>> res.theta.shape
    (4, 2, 1)
    """
    n_iter = as_int(n_iter, "n_iter", 1)
    n_runs = as_int(n_runs, "n_runs", 1)
    run_offset = as_int(run_offset, "run_offset", 0)
    learning_rate = as_float(learning_rate, "learning_rate", low=0.0)
    if learning_rate == 0.0:
        raise ValueError("`learning_rate` must be > 0")
    if schedule not in SCHEDULES:
        raise ValueError(f"`schedule` must be one of {SCHEDULES}, got {schedule!r}")
    minimum = 2 if estimator in ("grpo", "fullmean") else 1
    group_size = as_int(group_size, "group_size", minimum,
                        "for the leave-one-out baseline" if minimum == 2 else "")
    batch_size = as_int(batch_size, "batch_size", 1)
    theta = as_finite_array(theta0, "theta0", ndim=(1, 2))
    if theta.shape[-1] != problem.dim or (theta.ndim == 2 and theta.shape[0] != n_runs):
        raise ValueError(f"`theta0` must have shape ({problem.dim},) or ({n_runs}, {problem.dim}),"
                         f" got {theta.shape}")
    theta = np.array(np.broadcast_to(theta, (n_runs, problem.dim)), dtype=np.float64)
    marks = np.array(sorted({0, n_iter} if checkpoints is None else
                            {as_int(c, "checkpoints", 0) for c in checkpoints}), dtype=np.int64)
    if marks.size == 0 or marks[-1] > n_iter:
        raise ValueError(f"`checkpoints` must be non-empty integers in [0, {n_iter}]")

    rates = learning_rates(learning_rate, schedule, n_iter)
    draws = problem.draws_per_step(estimator, group_size, batch_size)
    gens = run_generators(seed, n_runs, run_offset)
    chunk = max(1, int(chunk_doubles) // (draws * n_runs))
    saved = np.empty((n_runs, marks.size, problem.dim))
    next_mark = 0
    if marks[0] == 0:
        saved[:, 0] = theta
        next_mark = 1
    bar = tqdm(total=n_iter, desc="Algorithm 1", unit="it", disable=not progress)
    with bar:
        for start in range(0, n_iter, chunk):
            steps = min(chunk, n_iter - start)
            uniforms = np.stack([g.random((steps, draws)) for g in gens], axis=1)  # (T, R, m)
            for t in range(steps):
                grad = problem.sample_gradient(theta, uniforms[t], estimator, group_size,
                                               batch_size)
                theta += rates[start + t] * grad
                if next_mark < marks.size and marks[next_mark] == start + t + 1:
                    saved[:, next_mark] = theta
                    next_mark += 1
            bar.update(steps)
    objective = np.stack([problem.objective_many(saved[:, c]) for c in range(marks.size)], axis=1)
    return TrainingResult(marks, saved, objective, np.arange(run_offset, run_offset + n_runs))


# ---------------------------------------------------------------------- exact quadratic theory
def quadratic_expected_gap(problem: NoisyQuadratic, theta0, n_iter, *, learning_rate,
                           schedule="inverse") -> tuple[np.ndarray, np.ndarray]:
    """Exact ``E Delta_n`` and ``Cov(theta_n)`` of Algorithm 1 on a :class:`NoisyQuadratic`.

    The iteration is linear with additive noise: ``u_{i+1} = (I - eta A) u_i + eta xi``, so the
    mean ``m`` and covariance ``S`` of ``u = theta - theta*`` follow
    ``m <- (I - eta A) m`` and ``S <- (I - eta A) S (I - eta A) + eta^2 Gamma``, and
    ``E Delta = tr(A (S + m m^T)) / 2``.

    Returns
    -------
    gap : ndarray (n + 1,)
        ``E Delta_0, ..., E Delta_n``.
    cov : ndarray (d, d)
        ``Cov(theta_n)``.
    """
    n_iter = as_int(n_iter, "n_iter", 0)
    # In the eigenbasis of A every step matrix I - eta A is diagonal: elementwise updates.
    lam, vec = np.linalg.eigh(problem.curvature)
    mean = vec.T @ (as_finite_array(theta0, "theta0", ndim=(1,)) - problem.optimum)  # (d,)
    gam = vec.T @ problem.noise_cov @ vec  # (d, d)
    cov = np.zeros_like(gam)
    gap = np.empty(n_iter + 1)
    gap[0] = 0.5 * lam @ mean**2
    for i, eta in enumerate(learning_rates(learning_rate, schedule, n_iter), start=1):
        step = 1.0 - eta * lam  # (d,)
        mean = step * mean
        cov = np.outer(step, step) * cov + eta**2 * gam
        gap[i] = 0.5 * (lam @ np.diag(cov) + lam @ mean**2)
    return gap, vec @ cov @ vec.T
