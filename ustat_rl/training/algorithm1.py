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
:class:`ustat_rl.policies.loglinear.LogLinearBandit` and
:class:`ustat_rl.policies.quadratic.NoisyQuadratic` (re-exported here).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from .._validation import as_finite_array, as_float, as_int
from ..advantages.registry import get_rule
from ..policies.quadratic import NoisyQuadratic
from ..seeding import child_rng

__all__ = ["Algorithm1Config", "NoisyQuadratic", "TrainingResult", "train", "run_generators", "learning_rates",
           "quadratic_expected_gap", "SCHEDULES"]

SCHEDULES = ("constant", "inverse")
_CHUNK_DOUBLES = 2_000_000  # uniforms held at once (16 MB); results do not depend on it


@dataclass(frozen=True)
class Algorithm1Config:
    """The settings of one run of Algorithm 1 (docs/theory.md section 2), validated.

    Attributes
    ----------
    n_iter : int
        Iterations ``n``.
    learning_rate : float
        ``beta > 0``.
    schedule : {"constant", "inverse"}
        ``eta_i = beta`` or ``eta_i = beta / i``.
    estimator : str, AdvantageRule or None
        The gradient estimator (a registered advantage rule); None for a problem that ignores it.
    group_size, batch_size : int
        ``G`` and ``B``.
    checkpoints : sequence of int, optional
        Iterations at which to record ``theta`` (default: ``[0, n_iter]``); stored as the
        sorted tuple of distinct iterations.
    """

    n_iter: int
    learning_rate: float
    schedule: str = "inverse"
    estimator: object = "grpo"
    group_size: int = 8
    batch_size: int = 1
    checkpoints: tuple[int, ...] | None = None

    def __post_init__(self):
        n_iter = as_int(self.n_iter, "n_iter", 1)
        learning_rate = as_float(self.learning_rate, "learning_rate", low=0.0)
        if learning_rate == 0.0:
            raise ValueError("`learning_rate` must be > 0")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"`schedule` must be one of {SCHEDULES}, got {self.schedule!r}")
        rule = None if self.estimator is None else get_rule(self.estimator, "estimator")
        group_size = as_int(self.group_size, "group_size", rule.min_group_size if rule else 1,
                            rule.min_group_reason if rule else "")
        marks = tuple(sorted({0, n_iter} if self.checkpoints is None else
                             {as_int(c, "checkpoints", 0) for c in self.checkpoints}))
        if not marks or marks[-1] > n_iter:
            raise ValueError(f"`checkpoints` must be non-empty integers in [0, {n_iter}]")
        for name, value in (("n_iter", n_iter), ("learning_rate", learning_rate),
                            ("group_size", group_size),
                            ("batch_size", as_int(self.batch_size, "batch_size", 1)),
                            ("checkpoints", marks)):
            object.__setattr__(self, name, value)


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


def run_generators(seed, n_runs: int, run_offset: int = 0) -> list[np.random.Generator]:
    """One generator per run: run ``j`` uses ``child_seed(seed, run_offset + j)``."""
    return [child_rng(seed, run_offset + j) for j in range(n_runs)]


def learning_rates(learning_rate: float, schedule: str, n_iter: int) -> np.ndarray:
    """``eta_1..eta_n``: ``beta`` (constant) or ``beta / i`` (inverse), shape ``(n,)``."""
    i = np.arange(1, n_iter + 1, dtype=np.float64)
    return np.full(n_iter, learning_rate) if schedule == "constant" else learning_rate / i


def train(problem, theta0, config: Algorithm1Config, *, n_runs=1, seed=0, run_offset=0,
          progress=False, chunk_doubles=_CHUNK_DOUBLES) -> TrainingResult:
    """Run Algorithm 1 ``n_runs`` times in one vectorised array (docs/theory.md section 2).

    Parameters
    ----------
    problem : LogLinearBandit or NoisyQuadratic
    theta0 : array_like, shape (d,) or (R, d)
        Start, shared by all runs or one per run.
    config : Algorithm1Config
        Iterations, step sizes, estimator, ``G``, ``B`` and checkpoints.
    n_runs : int
        ``R``, independent runs.
    seed : int or SeedSequence
        Root of the per-run seeds.
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
    >>> res = train(q, [3.0], Algorithm1Config(100, learning_rate=2.0), n_runs=4, seed=1)
    >>> res.theta.shape
    (4, 2, 1)
    """
    if not isinstance(config, Algorithm1Config):
        raise TypeError(f"`config` must be an Algorithm1Config, got {type(config).__name__}")
    n_runs = as_int(n_runs, "n_runs", 1)
    run_offset = as_int(run_offset, "run_offset", 0)
    n_iter, estimator = config.n_iter, config.estimator
    group_size, batch_size = config.group_size, config.batch_size
    theta = as_finite_array(theta0, "theta0", ndim=(1, 2))
    if theta.shape[-1] != problem.dim or (theta.ndim == 2 and theta.shape[0] != n_runs):
        raise ValueError(f"`theta0` must have shape ({problem.dim},) or ({n_runs}, {problem.dim}),"
                         f" got {theta.shape}")
    theta = np.array(np.broadcast_to(theta, (n_runs, problem.dim)), dtype=np.float64)
    marks = np.array(config.checkpoints, dtype=np.int64)

    rates = learning_rates(config.learning_rate, config.schedule, n_iter)
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
