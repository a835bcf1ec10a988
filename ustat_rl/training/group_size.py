"""Fixed-budget training sweeps over the group size: Theorem 7 after training (docs/theory.md C17, C18).

At a fixed budget ``N = B G`` per iteration, Algorithm 1 is run for each ``G`` (``B = N / G``)
and the expected final gap ``E Delta_n`` is estimated over independent runs. The predictions:

- ``G* = 1 + sqrt(c3'/c1)`` from the exact constants at ``theta_0``, at ``theta*``, averaged
  along the deterministic path, and the paper's sup form ``sqrt(sup c3 / sup c1)``;
- the linearised stationary gap at ``theta*`` for a constant rate ``beta``:
  ``E Delta ~ (beta/2) sum_k Gamma~_kk / (2 - beta lambda_k)`` (``Gamma~`` the noise covariance
  in the eigenbasis of ``-H*``), whose argmin over the grid includes every effect of ``G`` on
  the noise, the finite prompt set included.

Near stationarity the last iterate's expected gap equals the mean gap over the final iterations,
so the sweep also records that *tail mean* (lower variance, same expectation).

This module measures what training does; what the theory answers about ``G`` (``G*``, the grid,
the fixed-budget curves, the argmin over sizes, which the bootstrap here calls) is
:mod:`ustat_rl.theory.group_size`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_float, as_int
from ..stats.intervals import percentile_interval
from ..theory import ScalingConstants
from ..theory.group_size import best_on_grid
from .algorithm1 import Algorithm1Config, train

__all__ = ["GroupSizePredictions", "predicted_group_sizes", "linearised_gap", "SweepCell", "sweep_cell",
           "bootstrap_argmin", "common_argmin", "CommonArgmin", "CellResult"]


@dataclass(frozen=True)
class GroupSizePredictions:
    """Predicted optimal group sizes (Theorem 7, docs/theory.md C17).

    Attributes
    ----------
    at_start, at_optimum, path_average : float
        ``1 + sqrt(c3'/c1)`` with the constants at ``theta_0``, at ``theta*``, and averaged over
        the deterministic gradient-ascent path of ``n_iter`` steps.
    sup_form : float
        The paper's ``sqrt(sup c3 / sup c1)`` over that path.
    """

    at_start: float
    at_optimum: float
    path_average: float
    sup_form: float


def predicted_group_sizes(bandit, optimum, theta0, learning_rate, n_iter) -> GroupSizePredictions:
    """``G*`` from exact constants at the start, the optimum, along the path and in sup form."""
    theta = np.asarray(theta0, dtype=np.float64).copy()
    c1s, c2s, c3s = [], [], []
    for _ in range(as_int(n_iter, "n_iter", 1)):
        c = bandit.scaling_constants(theta)
        c1s.append(c.c1)
        c2s.append(c.c2)
        c3s.append(c.c3)
        theta = theta + learning_rate * bandit.grad(theta)
    start = bandit.scaling_constants(theta0).optimal_group_size()
    opt = bandit.scaling_constants(optimum.theta).optimal_group_size()
    average = ScalingConstants(float(np.mean(c1s)), float(np.mean(c2s)), float(np.mean(c3s)))
    sup = ScalingConstants(max(c1s), max(c2s), max(c3s))
    return GroupSizePredictions(start, opt, average.optimal_group_size(),
                                sup.optimal_group_size(exact=False))


def linearised_gap(bandit, optimum, learning_rate, group_size, batch_size,
                   estimator="grpo") -> float:
    """Stationary ``E Delta`` of constant-rate SGD linearised at ``theta*``.

    For ``u = Q^T(theta - theta*)``, ``u <- (I - beta Lambda) u + beta xi`` has stationary
    covariance ``S_kl = beta Gamma~_kl / (lambda_k + lambda_l - beta lambda_k lambda_l)`` in the
    eigenbasis, so ``E Delta = tr(Lambda S)/2 = (beta/2) sum_k Gamma~_kk / (2 - beta lambda_k)``.
    """
    lam, vec = np.linalg.eigh(-optimum.hessian)
    gam = bandit.noise_covariance(optimum.theta, estimator, group_size, batch_size)
    rot = optimum.basis @ vec  # (d, r)
    diag = np.einsum("dk,de,ek->k", rot, gam, rot)
    return float(0.5 * learning_rate * np.sum(diag / (2.0 - learning_rate * lam)))


@dataclass(frozen=True)
class CellResult:
    """Per-run gaps of one (budget, group size) cell.

    Attributes
    ----------
    n_iters : ndarray (m,)
        Iteration counts ``n`` at which the gap is reported.
    last : ndarray (R, m)
        ``Delta_n`` of the last iterate.
    tail : ndarray (R, m)
        Mean of ``Delta_i`` over ``i`` in ``(n - n tail_frac, n]``.
    """

    n_iters: np.ndarray
    last: np.ndarray
    tail: np.ndarray


@dataclass(frozen=True)
class SweepCell:
    """One cell of the fixed-budget group-size sweep, validated.

    Attributes
    ----------
    budget, group_size : int
        ``N = B G`` and ``G`` (``G`` divides ``N``, both >= 2); ``B = N / G``.
    n_iters : sequence of int
        The run lengths ``n`` read; stored sorted and distinct.
    learning_rate : float
        ``beta``.
    schedule : {"constant", "inverse"}
    estimator : str
        The gradient estimator (a registered advantage rule).
    tail_frac : float in (0, 1]
        The share of the last iterations averaged for the tail gap.
    """

    budget: int
    group_size: int
    n_iters: tuple[int, ...]
    learning_rate: float
    schedule: str = "constant"
    estimator: str = "grpo"
    tail_frac: float = 0.25

    def __post_init__(self):
        budget, group_size = as_int(self.budget, "budget", 2), as_int(self.group_size,
                                                                       "group_size", 2)
        if budget % group_size:
            raise ValueError(f"`group_size` {group_size} must divide `budget` {budget}")
        n_iters = tuple(sorted({as_int(n, "n_iters", 1) for n in self.n_iters}))
        if not n_iters:
            raise ValueError("`n_iters` must hold at least one run length")
        tail_frac = as_float(self.tail_frac, "tail_frac", low=0.0, high=1.0)
        if tail_frac == 0.0:
            raise ValueError("`tail_frac` must be > 0")
        for name, value in (("budget", budget), ("group_size", group_size),
                            ("n_iters", n_iters), ("tail_frac", tail_frac)):
            object.__setattr__(self, name, value)

    @property
    def batch_size(self) -> int:
        return self.budget // self.group_size


def sweep_cell(bandit, optimum, cell: SweepCell, n_runs, seed, *, theta0=None,
               progress=False) -> CellResult:
    """Run Algorithm 1 at ``G = cell.group_size``, ``B = budget / G`` and collect final gaps."""
    if not isinstance(cell, SweepCell):
        raise TypeError(f"`cell` must be a SweepCell, got {type(cell).__name__}")
    n_iters = np.array(cell.n_iters)
    windows = [np.arange(n - max(1, int(n * cell.tail_frac)) + 1, n + 1) for n in n_iters]
    marks = np.unique(np.concatenate(windows))
    start = bandit.ref_theta if theta0 is None else theta0
    setting = Algorithm1Config(int(n_iters[-1]), learning_rate=cell.learning_rate,
                               schedule=cell.schedule, estimator=cell.estimator,
                               group_size=cell.group_size, batch_size=cell.batch_size,
                               checkpoints=marks)
    res = train(bandit, start, setting, n_runs=n_runs, seed=seed, progress=progress)
    gap = res.gap(optimum.value)  # (R, C)
    pos = {int(m): j for j, m in enumerate(marks)}
    last = np.stack([gap[:, pos[int(n)]] for n in n_iters], axis=1)
    tail = np.stack([gap[:, [pos[int(i)] for i in w]].mean(axis=1) for w in windows], axis=1)
    return CellResult(n_iters, last, tail)


def bootstrap_argmin(group_sizes, samples, n_boot, rng, level=0.95):
    """Bootstrap distribution of ``argmin_G mean(samples[G])``, runs resampled within each G.

    Parameters
    ----------
    group_sizes : sequence of int
    samples : list of ndarray
        Per-run values for each group size (independent runs across group sizes).

    Returns
    -------
    argmin : int
        Group size with the smallest sample mean.
    interval : tuple of int
        The ``(1 - level)/2`` and ``(1 + level)/2`` quantiles of the bootstrap argmins.
    frequency : ndarray
        Share of bootstrap replicates choosing each group size.
    """
    sizes = np.asarray(group_sizes)
    means = np.array([np.mean(s) for s in samples])
    boot = np.empty((n_boot, sizes.size))
    for j, s in enumerate(samples):
        idx = rng.integers(0, len(s), size=(n_boot, len(s)))
        boot[:, j] = np.asarray(s)[idx].mean(axis=1)
    choice = best_on_grid(sizes, boot)  # (n_boot,) one argmin per replicate
    lo, hi = percentile_interval(choice, level)
    freq = np.array([np.mean(choice == g) for g in sizes])
    return int(best_on_grid(sizes, means)), (int(lo), int(hi)), freq


@dataclass(frozen=True)
class CommonArgmin:
    """Simultaneous bootstrap intervals for the argmin of several cells (C18, docs/theory.md).

    Attributes
    ----------
    argmins : tuple of int
        Each cell's point argmin (the group size with the smallest sample mean).
    intervals : tuple of (int, int)
        Each cell's bootstrap interval for its argmin at level ``cell_level``.
    common : tuple of int
        The group sizes that lie inside every cell's interval (empty when none does).
    level : float
        Simultaneous level of the family of intervals.
    cell_level : float
        Bonferroni level of each interval, ``1 - (1 - level) / K`` for ``K`` cells.
    """

    argmins: tuple
    intervals: tuple
    common: tuple
    level: float
    cell_level: float


def common_argmin(cells, n_boot, rng, level=0.95) -> CommonArgmin:
    """Is one group size inside every cell's simultaneous bootstrap interval for the argmin?

    Parameters
    ----------
    cells : sequence of (group_sizes, samples)
        One entry per cell (a budget ``N`` and a horizon ``n``), in the form
        :func:`bootstrap_argmin` takes; the grids may differ between cells.
    n_boot : int
        Bootstrap replicates per cell.
    rng : numpy.random.Generator
    level : float
        Simultaneous level: each of the ``K`` intervals is taken at ``1 - (1 - level) / K``
        (Bonferroni), so when one group size is the true argmin of every cell it lies in all
        ``K`` intervals with probability at least ``level`` (up to the bootstrap's
        approximation of each interval's coverage).

    Returns
    -------
    CommonArgmin

    Notes
    -----
    The decision "the argmin is universal" is ``common`` non-empty. Its false-failure rate is
    at most ``1 - level`` when a common argmin exists; when the cells' argmins are well
    separated the intervals are disjoint and the rule rejects (tests/training/test_limit_law.py holds
    both controls).
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"`level` must lie in (0, 1), got {level}")
    cells = list(cells)
    if not cells:
        raise ValueError("`cells` must hold at least one (group_sizes, samples) pair")
    cell_level = 1.0 - (1.0 - level) / len(cells)
    argmins, intervals = [], []
    for group_sizes, samples in cells:
        arg, interval, _ = bootstrap_argmin(group_sizes, samples, n_boot, rng, cell_level)
        argmins.append(arg)
        intervals.append(interval)
    candidates = sorted({int(g) for group_sizes, _ in cells for g in group_sizes})
    common = tuple(g for g in candidates if all(lo <= g <= hi for lo, hi in intervals))
    return CommonArgmin(tuple(argmins), tuple(intervals), common, level, cell_level)
