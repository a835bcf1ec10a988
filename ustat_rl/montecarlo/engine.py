"""Monte Carlo engine: streaming means and covariances with reproducible, chunk-free seeding.

Randomness is fixed per *block* of ``block_size`` replicates: block ``j`` draws from
``SeedSequence(seed, spawn_key=(j,))``. Blocks are merged in block order with Chan's pairwise
update, so the result is the same whatever the number of worker threads, and memory stays at one
block per worker. The softmax bandit's statistics are in :mod:`.bandit` (numba) and :mod:`.torch_backend`.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from tqdm.auto import tqdm

from .._validation import as_instance, as_int
from ..seeding import child_seed

__all__ = ["BACKENDS", "Backend", "Execution", "MonteCarloEstimate", "Statistic",
           "run_monte_carlo", "stratified_estimate", "block_seed", "run_blocks",
           "estimate_from_moments"]

Statistic = Callable[[np.random.Generator, int], np.ndarray]

#: The kernels that draw a bandit's replicates.
BACKENDS = ("numba", "torch")


@dataclass(frozen=True)
class Backend:
    """Which kernel draws the replicates: numba's compiled CPU kernel, or torch on a device.

    ``name`` is one of :data:`BACKENDS`; ``device`` is torch's (``"cpu"``, ``"cuda"``,
    ``"cuda:N"``, or None: CUDA when available) and must be None or ``"cpu"`` for numba. The
    functions that take a backend also take its name alone (``backend="torch"``).
    """

    name: str = "numba"
    device: object = None

    def __post_init__(self):
        if self.name not in BACKENDS:
            raise ValueError(f"`backend` must be one of {BACKENDS}, got {self.name!r}")
        if self.name == "numba" and self.device is not None and str(self.device) != "cpu":
            raise ValueError(f"`device` must be None or 'cpu' for the numba backend (a CPU "
                             f"kernel), got {self.device!r}; use backend='torch' for CUDA")

    @classmethod
    def of(cls, backend) -> Backend:
        """``backend`` itself, or the :class:`Backend` of a name of :data:`BACKENDS`."""
        return backend if isinstance(backend, Backend) else cls(backend)


@dataclass(frozen=True)
class Execution:
    """How a run is carried out, which its result does not depend on.

    ``n_jobs`` worker threads (at least 1) and ``progress``, whether to show a progress bar.
    The settings that fix the draws (``n_reps``, ``seed``, ``block_size``, the
    :class:`Backend`) are not here: changing one of them changes the estimate.
    """

    n_jobs: int = 1
    progress: bool = False

    def __post_init__(self):
        object.__setattr__(self, "n_jobs", as_int(self.n_jobs, "n_jobs", 1))
        if not isinstance(self.progress, bool):
            raise ValueError(f"`progress` must be True or False, got {self.progress!r}")

    @classmethod
    def of(cls, execution) -> Execution:
        """``execution`` itself, or ``Execution()`` for ``None``; anything else a TypeError."""
        return as_instance(execution, cls, "execution", none_is_default=True)


@dataclass(frozen=True)
class MonteCarloEstimate:
    """Mean of ``m`` per-replicate statistics with their joint sampling covariance.

    Attributes
    ----------
    mean : ndarray (m,)
        Sample means.
    std_error : ndarray (m,)
        Standard errors of the means, ``sqrt(diag(cov))``.
    cov : ndarray (m, m)
        Covariance matrix of the means (sample covariance / ``n_reps``); off-diagonal terms are
        non-zero under common random numbers and make paired differences precise.
    n_reps : int
        Number of replicates.
    labels : tuple
        One label per statistic.
    """

    mean: np.ndarray
    std_error: np.ndarray
    cov: np.ndarray
    n_reps: int
    labels: tuple

    def index(self, label) -> int:
        """Position of ``label`` among the statistics."""
        try:
            return self.labels.index(label)
        except ValueError:
            raise KeyError(f"no statistic labelled {label!r}; have {self.labels}") from None

    def get(self, label) -> tuple[float, float]:
        """``(mean, std_error)`` of one statistic."""
        i = self.index(label)
        return float(self.mean[i]), float(self.std_error[i])

    def contrast(self, weights) -> tuple[float, float]:
        """``(value, std_error)`` of a linear combination ``sum_i weights[i] * mean[i]``.

        ``weights`` is an array of length ``m`` or a dict ``{label: weight}``.
        """
        if isinstance(weights, dict):
            vec = np.zeros(len(self.labels))
            for label, w in weights.items():
                vec[self.index(label)] = w
        else:
            vec = np.asarray(weights, dtype=np.float64)
        value = float(vec @ self.mean)
        var = float(vec @ self.cov @ vec)
        return value, math.sqrt(max(var, 0.0))

    def subset(self, labels: Sequence) -> "MonteCarloEstimate":
        """The estimate restricted to ``labels`` (in that order)."""
        idx = [self.index(lab) for lab in labels]
        cov = self.cov[np.ix_(idx, idx)]
        return MonteCarloEstimate(self.mean[idx], self.std_error[idx], cov, self.n_reps, tuple(labels))


def _block_moments(values: np.ndarray):
    mean = values.mean(axis=0)
    centred = values - mean
    return values.shape[0], mean, centred.T @ centred


def _merge(a, b):
    # Chan et al. pairwise update of (count, mean, sum of centred outer products)
    na, ma, sa = a
    nb, mb, sb = b
    n = na + nb
    delta = mb - ma
    return n, ma + delta * (nb / n), sa + sb + np.outer(delta, delta) * (na * nb / n)


def block_seed(seed, block: int) -> np.random.SeedSequence:
    """The seed of block ``block`` under root ``seed``: ``child_seed(seed, block)``."""
    return child_seed(seed, block)


def run_blocks(run_block, n_blocks: int, *, n_jobs: int = 1, progress: bool = False,
               desc: str = "Monte Carlo"):
    """The block loop: ``run_block(j) -> (n_j, mean_j, m2_j)`` for ``j = 0..n_blocks-1`` on
    ``n_jobs`` threads, merged in block order (Chan's update), so the result does not depend on
    ``n_jobs``. Returns the merged ``(n, mean, m2)``."""
    total = None
    bar = tqdm(total=n_blocks, desc=desc, disable=not progress, leave=False)
    with ThreadPoolExecutor(max_workers=n_jobs) if n_jobs > 1 else _Serial() as pool:
        for moments in pool.map(run_block, range(n_blocks)):  # map keeps block order
            total = moments if total is None else _merge(total, moments)
            bar.update(1)
    bar.close()
    return total


def estimate_from_moments(total, labels=None) -> MonteCarloEstimate:
    """The :class:`MonteCarloEstimate` of merged block moments ``(n, mean, m2)``."""
    n, mean, m2 = total
    cov = m2 / (n - 1) / n
    labels = tuple(range(mean.shape[0])) if labels is None else tuple(labels)
    if len(labels) != mean.shape[0]:
        raise ValueError(f"`labels` has {len(labels)} entries for {mean.shape[0]} statistics")
    return MonteCarloEstimate(mean, np.sqrt(np.diag(cov)), cov, int(n), labels)


def run_monte_carlo(statistic: Statistic, n_reps, seed, *, block_size=4096, n_jobs=1,
                    progress: bool = False, labels=None, desc: str = "Monte Carlo"
                    ) -> MonteCarloEstimate:
    """Estimate the means of ``statistic`` by ``n_reps`` independent replicates.

    Parameters
    ----------
    statistic : callable
        ``statistic(rng, n) -> ndarray (n, m)``: ``n`` independent replicates of ``m`` values.
        A statistic with a ``sub_block_size`` attribute (the torch backend's) fixes its own
        randomness per sub-block and is run by its ``monte_carlo`` method; ``block_size`` then
        has no effect.
    n_reps : int
        Number of replicates (at least 2).
    seed : int or numpy.random.SeedSequence
        Root of the per-block seeds.
    block_size : int
        Replicates per block: the unit of randomness and of memory.
    n_jobs : int
        Worker threads; the result does not depend on it.
    progress : bool
        Show a progress bar over blocks.
    labels : sequence, optional
        Names of the ``m`` statistics.

    Returns
    -------
    MonteCarloEstimate

    Examples
    --------
    >>> est = run_monte_carlo(lambda rng, n: rng.normal(size=(n, 1)), 10_000, seed=1)
    >>> bool(abs(est.mean[0]) < 4 * est.std_error[0])
    True
    """
    n_reps = as_int(n_reps, "n_reps", 2)
    block_size = as_int(block_size, "block_size", 1)
    n_jobs = as_int(n_jobs, "n_jobs", 1)
    if hasattr(statistic, "sub_block_size"):  # seeds itself per sub-block (torch backend)
        return statistic.monte_carlo(n_reps, seed, n_jobs=n_jobs, progress=progress,
                                     labels=labels, desc=desc)
    n_blocks = -(-n_reps // block_size)
    sizes = [min(block_size, n_reps - j * block_size) for j in range(n_blocks)]

    def run_block(j: int):
        rng = np.random.default_rng(block_seed(seed, j))
        values = np.asarray(statistic(rng, sizes[j]), dtype=np.float64)
        if values.ndim == 1:
            values = values[:, None]
        if values.shape[0] != sizes[j]:
            raise ValueError(f"`statistic` returned {values.shape[0]} rows for a block of {sizes[j]}")
        if not np.all(np.isfinite(values)):
            raise FloatingPointError("`statistic` returned non-finite values")
        return _block_moments(values)

    total = run_blocks(run_block, n_blocks, n_jobs=n_jobs, progress=progress, desc=desc)
    return estimate_from_moments(total, labels)


def stratified_estimate(estimates: Sequence[MonteCarloEstimate], weights) -> MonteCarloEstimate:
    """Combine independent per-stratum estimates with fixed weights (stratified Monte Carlo).

    For strata ``x`` (e.g. prompts) simulated independently with weights ``f(x)``:
    ``mean = sum_x f(x) mean_x`` and ``cov = sum_x f(x)^2 cov_x``. Every estimate must carry the
    same labels; ``n_reps`` of the result is the total over strata.
    """
    estimates = list(estimates)
    weights = np.asarray(weights, dtype=np.float64)
    if not estimates or weights.shape != (len(estimates),):
        raise ValueError(f"`weights` must have one entry per estimate ({len(estimates)}), got "
                         f"shape {weights.shape}")
    labels = estimates[0].labels
    if any(est.labels != labels for est in estimates):
        raise ValueError("every estimate must carry the same `labels`")
    mean = cov = None
    for w, est in zip(weights, estimates):
        mean = w * est.mean if mean is None else mean + w * est.mean
        cov = w**2 * est.cov if cov is None else cov + w**2 * est.cov
    return MonteCarloEstimate(mean, np.sqrt(np.diag(cov)), cov,
                              sum(est.n_reps for est in estimates), tuple(labels))


class _Serial:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    @staticmethod
    def map(func, items):
        return map(func, items)
