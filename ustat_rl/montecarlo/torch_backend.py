"""Torch backend of the bandit Monte Carlo: the law of the numba kernel, vectorised over groups.

:func:`ustat_rl.montecarlo.bandit_statistics` with ``backend="torch"`` returns a
:class:`TorchBanditStatistic`. It samples every group through its sufficient statistics, exactly
as the numba kernel does (per-action counts ``N ~ Multinomial(G, pi(x))`` and successes
``S_a ~ Binomial(N_a, r[x, a])``; docs/theory.md sections 1-2), nests the group sizes (common
random numbers across ``G``), and returns the same columns under the same labels, but it draws
a whole sub-block of groups at once with tensor operations, so the same code runs on CPU and CUDA.

Randomness and reproducibility
------------------------------
The unit of randomness is a *sub-block* of ``sub_block_size = max(1, SUB_BLOCK_GROUPS // B)``
replicates (``B`` the batch size), fixed by the statistic, not by the caller. Sub-block ``s``
draws from one ``torch.Generator`` seeded from ``SeedSequence(seed, spawn_key=(..., s))``; its
first two moments are computed on the device and merged in sub-block order. Hence, for a given
``seed`` and ``n_reps``, the result (mean and covariance) is:

* bitwise identical for every ``block_size`` and ``n_jobs`` of
  :func:`~ustat_rl.montecarlo.run_monte_carlo` (``block_size`` has no effect on this backend);
* on CPU, made of bitwise the same replicates whatever torch's intra-op thread count (its random
  kernels are serial), while the moments' reductions may round differently (about 1e-16
  relative) for another thread count, as numpy's do for the numba backend;
* bitwise identical between runs on the same device type with the same torch version (on CUDA:
  the same GPU model too, as torch's CUDA random kernels size their launch grid, and hence their
  Philox offsets, from the device; not measured: no GPU was available when this was written);
* **not** identical between CPU and CUDA: the CPU generator is MT19937 and the CUDA one
  Philox4x32, and ``torch.binomial`` differs between them; the two agree in law, so their
  estimates agree within standard errors, not bitwise;
* not identical to the numba backend (another generator), with which it agrees in law;
* not promised across torch versions (torch does not fix its random streams across releases).

The CPU generator is given a full 624-word MT19937 state from the ``SeedSequence``: its
``manual_seed`` keeps only 32 bits, and 32-bit seeds collide between sub-blocks with probability
about ``m^2 / 2^33`` for ``m`` sub-blocks. The CUDA generator takes a 64-bit seed.

Precision
---------
Everything is float64. The counts are integers below ``2^24`` for ``G <= 1024``, so float32
would hold them exactly; float32 is not safe for the selection probabilities (it would perturb
the law at about ``6e-8``), for the estimator arithmetic, or for the squared errors, whose
mean (``~1e-3`` to ``1e-6`` for large ``G``) is a small difference of ``||g||^2``-sized terms and
whose sums over ``10^6+`` replicates lose the digits that the standard errors resolve.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import torch

from ..seeding import child_seed
from .engine import MonteCarloEstimate, block_seed, estimate_from_moments, run_blocks

__all__ = ["SUB_BLOCK_GROUPS", "CATEGORICAL_PER_ACTION", "TorchBanditStatistic",
           "resolve_device"]

#: Groups per sub-block (the unit of randomness and of device memory); results depend on it, so
#: it is a constant. 2^16 groups keep a GPU busy between kernel launches and need about 50 MiB.
SUB_BLOCK_GROUPS = 2**16

#: Group-size increments of at most ``CATEGORICAL_PER_ACTION * K`` samples are drawn sample by
#: sample (one uniform and a search over the 2K (action, reward) cells per sample); larger ones
#: through K - 1 conditional binomials and one binomial per action for the successes, whose cost
#: does not grow with G. Both are exact in law; on CPU the two cost the same near 2K samples
#: (K = 10, torch 2.13). The switch is a constant so that the stream is fixed.
CATEGORICAL_PER_ACTION = 2

_MT_WORDS = 624
_MT_OFFSET = 24  # bytes before MT19937's key in torch's CPU generator state


def resolve_device(device) -> torch.device:
    """The torch device for ``device``: ``None`` (CUDA when available, else CPU), ``"cpu"``,
    ``"cuda"``, ``"cuda:N"`` or a :class:`torch.device` of those types."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if not isinstance(device, (str, torch.device)):
        raise ValueError(f"`device` must be 'cpu', 'cuda', 'cuda:N' or None, got {device!r}")
    try:
        resolved = torch.device(device)
    except (RuntimeError, ValueError):
        raise ValueError(f"`device` must be 'cpu', 'cuda', 'cuda:N' or None, got {device!r}") from None
    if resolved.type not in ("cpu", "cuda"):
        raise ValueError(f"`device` must be 'cpu', 'cuda', 'cuda:N' or None, got {device!r}")
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"`device`={device!r} needs CUDA, but torch.cuda.is_available() is "
                             f"False (torch {torch.__version__}); use device='cpu' or None")
        if resolved.index is not None and resolved.index >= torch.cuda.device_count():
            raise ValueError(f"`device`={device!r}: only {torch.cuda.device_count()} CUDA "
                             "device(s) are visible")
    return resolved


@functools.lru_cache(maxsize=1)
def _mt_state_template():
    # torch's CPU generator state stores MT19937's key as 624 uint64 words at byte 24; check the
    # layout against the reference initialisation of seed 5489 before relying on it.
    gen = torch.Generator().manual_seed(5489)
    state = gen.get_state().numpy().copy()
    key = [5489]
    for i in range(1, _MT_WORDS):
        key.append((1812433253 * (key[-1] ^ (key[-1] >> 30)) + i) & 0xFFFFFFFF)
    end = _MT_OFFSET + 8 * _MT_WORDS
    if state.size >= end and np.array_equal(state[_MT_OFFSET:end].view(np.uint64),
                                            np.array(key, dtype=np.uint64)):
        return state
    warnings.warn("unrecognised torch CPU generator state; seeding sub-blocks with 32-bit seeds "
                  "(distinct sub-blocks may then share a stream with probability ~m^2/2^33)",
                  RuntimeWarning, stacklevel=3)
    return None


def _generator(seed_seq: np.random.SeedSequence, device: torch.device) -> torch.Generator:
    """A generator for ``device`` whose whole state comes from ``seed_seq``."""
    if device.type == "cuda":
        gen = torch.Generator(device=device)
        gen.manual_seed(int(seed_seq.generate_state(1, dtype=np.uint64)[0]))
        return gen
    gen = torch.Generator()
    template = _mt_state_template()
    if template is None:
        gen.manual_seed(int(seed_seq.generate_state(1, dtype=np.uint32)[0]))
        return gen
    state = template.copy()
    words = seed_seq.generate_state(_MT_WORDS, dtype=np.uint32).astype(np.uint64)
    state[_MT_OFFSET:_MT_OFFSET + 8 * _MT_WORDS] = words.view(np.uint8)
    gen.set_state(torch.from_numpy(state))
    return gen


class TorchBanditStatistic:
    """Per-replicate statistics of :func:`ustat_rl.montecarlo.bandit_statistics`, drawn with torch.

    Built by ``bandit_statistics(..., backend="torch")``; the arguments are the validated ones
    of that function. Calling ``statistic(rng, n)`` returns ``n`` replicates as an ndarray
    ``(n, m)`` (seeded from ``rng``); :func:`~ustat_rl.montecarlo.run_monte_carlo` instead calls
    :meth:`monte_carlo`, which seeds per sub-block so that the result does not depend on the
    block size or the number of workers (module docstring).

    Parameters
    ----------
    bandit : SoftmaxBandit
    tables : (ndarray, ndarray)
        The rules' kernel data from :func:`ustat_rl.montecarlo.bandit.kernel_tables`:
        ``table (n_est, n_G, 2, G_max + 1)`` and ``reference (n_est, n_G)``.
    group_sizes : ndarray of int
        Sorted, nested group sizes.
    batch_size : int
        ``B``, groups (prompts) per replicate.
    prompt : int
        Fixed prompt, or -1 for prompts drawn from ``f``.
    measured : tuple (target, direction, degenerate_pair)
        The statistic's columns: ``target`` (ndarray (P*K,)) is what the squared errors are
        measured against, ``direction`` (ndarray (P*K,) or None) the projection direction,
        ``degenerate_pair`` (tuple of int or None) the positions of ``grpo`` and ``oracle``
        among the estimators for the degenerate column.
    device : torch.device
    sub_block_groups : int
        Groups per sub-block; the default :data:`SUB_BLOCK_GROUPS` fixes the random stream.
    """

    def __init__(self, bandit, tables, group_sizes, batch_size, prompt, measured, device,
                 sub_block_groups=SUB_BLOCK_GROUPS):
        self.device = device
        table, reference = tables
        target, direction, degenerate_pair = measured
        self.n_estimators = int(table.shape[0])
        self.group_sizes = tuple(int(g) for g in group_sizes)
        self.batch_size = int(batch_size)
        self.prompt = int(prompt)
        self.sub_block_size = max(1, int(sub_block_groups) // self.batch_size)
        self.use_direction = direction is not None
        self.degenerate_pair = degenerate_pair
        n_cols = self.n_estimators * len(self.group_sizes)
        self.n_columns = (n_cols * (2 if self.use_direction else 1)
                          + (len(self.group_sizes) if degenerate_pair is not None else 0))

        pi = bandit.policy  # (P, K)
        r = bandit.reward_prob
        lo, hi = bandit.reward_values
        k = bandit.n_actions
        tail = np.cumsum(pi[:, ::-1], axis=1)[:, ::-1]  # (P, K) sum_{a' >= a} pi[x, a']
        conditional = np.clip(pi[:, :-1] / tail[:, :-1], 0.0, 1.0)  # (P, K-1) chain binomials
        cells = np.stack([pi * (1.0 - r), pi * r], axis=2).reshape(pi.shape[0], 2 * k)
        as_t = functools.partial(torch.as_tensor, dtype=torch.float64, device=device)
        self._pi = as_t(pi)
        self._r = as_t(r)
        self._conditional = as_t(conditional.T.copy())  # (K-1, P)
        self._cells_cum = as_t(np.cumsum(cells, axis=1))  # (P, 2K) (a, fail), (a, success)
        self._prompt_cum = as_t(np.cumsum(bandit.prompt_prob))
        self._value = as_t(bandit.value)
        self._lo, self._hi = float(lo), float(hi)
        self._target = as_t(target).reshape(bandit.n_prompts, k)  # (P, K)
        self._target_sq = float(np.sum(np.asarray(target) ** 2))
        self._direction = as_t(direction).reshape(bandit.n_prompts, k) if self.use_direction else None
        self._n_prompts, self._k = bandit.n_prompts, k
        self._table = as_t(table)  # (n_est, n_G, 2, G_max + 1)
        self._reference = reference.tolist()  # (n_est, n_G) weights of -w V(x)

    # ----------------------------------------------------------------- sampling
    def _increment(self, gen, x, inc: int):
        """Counts and successes ``(N, K)`` of ``inc`` new samples per group at prompts ``x``."""
        n_groups, k = x.shape[0], self._k
        if inc <= CATEGORICAL_PER_ACTION * k:
            u = torch.rand((n_groups, inc), generator=gen, dtype=torch.float64, device=self.device)
            cell = torch.searchsorted(self._cells_cum[x], u, right=True)  # (N, inc)
            cell.clamp_(max=2 * k - 1)  # a cumulative sum a rounding below 1
            cells = torch.zeros((n_groups, 2 * k), dtype=torch.float64, device=self.device)
            cells.scatter_add_(1, cell, torch.ones_like(u))  # exact: small integers
            cells = cells.view(n_groups, k, 2)
            return cells[:, :, 0] + cells[:, :, 1], cells[:, :, 1]
        # Multinomial(inc, pi(x)) as a chain of binomials: N_a ~ Bin(rest, pi_a / sum_{a'>=a} pi_a')
        conditional = self._conditional[:, x]  # (K-1, N)
        counts = torch.empty((n_groups, k), dtype=torch.float64, device=self.device)
        remaining = torch.full((n_groups,), float(inc), dtype=torch.float64, device=self.device)
        for a in range(k - 1):
            n_a = torch.binomial(remaining, conditional[a], generator=gen)
            counts[:, a] = n_a
            remaining = remaining - n_a
        counts[:, k - 1] = remaining
        successes = torch.binomial(counts, self._r[x], generator=gen)
        return counts, successes

    def _prompts(self, gen, n_groups: int):
        if self.prompt >= 0:
            return torch.full((n_groups,), self.prompt, dtype=torch.long, device=self.device)
        u = torch.rand(n_groups, generator=gen, dtype=torch.float64, device=self.device)
        # the first x with u < F(x), as the numba kernel draws prompts
        return torch.searchsorted(self._prompt_cum, u, right=True).clamp_(max=self._n_prompts - 1)

    # ----------------------------------------------------------------- statistics
    def _values(self, gen, n: int) -> torch.Tensor:
        """``(n, m)`` statistics of ``n`` replicates from ``gen``."""
        b, k = self.batch_size, self._k
        n_groups = n * b
        x = self._prompts(gen, n_groups)  # (N,)
        pi_x = self._pi[x]  # (N, K)
        value_x = self._value[x][:, None]  # (N, 1)
        # Squared error per replicate: the estimate lives only on the blocks of the drawn
        # prompts, so ||est - target||^2 = (||target||^2 - sum_b ||t_b||^2 / n_b)
        # + sum_{b, b'} [x_b = x_b'] <u_b, u_b'> with u_b = v_b - t_{x_b} / n_b, n_b the number
        # of groups of the replicate that share x_b.
        xr = x.view(n, b)
        same = None
        if self.prompt < 0 and b > 1:
            same = (xr[:, :, None] == xr[:, None, :]).to(torch.float64)  # (n, B, B)
            share = same.sum(dim=2)  # (n, B)
        else:
            share = torch.full((n, b), float(b), dtype=torch.float64, device=self.device)
        t_b = self._target[xr] / share[:, :, None]  # (n, B, K)
        base = self._target_sq - (self._target[xr] * t_b).sum(dim=(1, 2))  # (n,)
        dir_b = self._direction[xr] if self.use_direction else None  # (n, B, K)

        def pooled_sq(u):  # sum_{b, b'} [x_b = x_b'] <u_b, u_b'>  (n,)
            if same is None:
                return u.sum(dim=1).square().sum(dim=1)
            return (torch.bmm(same, u) * u).sum(dim=(1, 2))

        n_est, n_sizes = self.n_estimators, len(self.group_sizes)
        out = torch.empty((n, self.n_columns), dtype=torch.float64, device=self.device)
        proj_at = n_est * n_sizes
        deg_at = proj_at * (2 if self.use_direction else 1)
        counts = successes = None
        previous = 0
        for ell, g in enumerate(self.group_sizes):
            new_counts, new_successes = self._increment(gen, x, g - previous)
            previous = g
            if counts is None:
                counts, successes = new_counts, new_successes
            else:
                counts = counts + new_counts
                successes = successes + new_successes
            m = successes.sum(dim=1).long()  # (N,) successes of each group
            per_est = []
            share = 1.0 / (g * b)  # this group's share of the minibatch estimate
            for e in range(n_est):
                # c_g = a(z_g, m) - w V(x) read from the rule's table, as in the numba kernel
                a_hi = self._table[e, ell, 0][m][:, None]  # (N, 1)
                a_lo = self._table[e, ell, 1][m][:, None]
                shift = self._reference[e][ell] * value_x  # (N, 1)
                group_sum = m[:, None] * a_hi + (g - m[:, None]) * a_lo - g * shift
                s = (successes * a_hi + (counts - successes) * a_lo - counts * shift
                     - pi_x * group_sum) * share
                v = s.view(n, b, k)  # (n, B, K)
                per_est.append(v)
                col = e * n_sizes + ell
                out[:, col] = base + pooled_sq(v - t_b)
                if self.use_direction:
                    out[:, proj_at + col] = (v * dir_b).sum(dim=(1, 2))
            if self.degenerate_pair is not None:
                grpo, oracle = self.degenerate_pair
                out[:, deg_at + ell] = pooled_sq(per_est[grpo] - per_est[oracle])
        return out

    def _sub_block(self, root: np.random.SeedSequence, s: int, n: int) -> torch.Tensor:
        return self._values(_generator(block_seed(root, s), self.device), n)

    def _sizes(self, n_reps: int) -> list[int]:
        size = self.sub_block_size
        return [min(size, n_reps - j * size) for j in range(-(-n_reps // size))]

    def __call__(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` replicates ``(n, m)``, sub-blocks seeded from one draw of ``rng``."""
        root = np.random.SeedSequence(rng.integers(0, 2**32, size=4, dtype=np.uint64))
        parts = [self._sub_block(root, s, size) for s, size in enumerate(self._sizes(int(n)))]
        return torch.cat(parts).cpu().numpy()

    def monte_carlo(self, n_reps: int, seed, *, n_jobs: int = 1, progress: bool = False,
                    labels=None, desc: str = "Monte Carlo") -> MonteCarloEstimate:
        """Means and covariance of ``n_reps`` replicates; the :func:`run_monte_carlo` route.

        Sub-block ``s`` draws from ``SeedSequence(seed, spawn_key=(..., s))``; its moments are
        computed on the device and merged in sub-block order (Chan's update), whatever
        ``n_jobs`` is. Inputs are validated by :func:`~ustat_rl.montecarlo.run_monte_carlo`.
        """
        root = child_seed(seed)
        sizes = self._sizes(n_reps)

        def run(s: int):
            values = self._sub_block(root, s, sizes[s])
            if not bool(torch.isfinite(values).all()):
                raise FloatingPointError("the torch bandit statistic returned non-finite values")
            mean = values.mean(dim=0)
            centred = values - mean
            return values.shape[0], mean.cpu().numpy(), (centred.T @ centred).cpu().numpy()

        total = run_blocks(run, len(sizes), n_jobs=n_jobs, progress=progress, desc=desc)
        return estimate_from_moments(total, tuple(range(self.n_columns)) if labels is None
                                     else labels)
