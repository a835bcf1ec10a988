"""Monte Carlo statistics of the softmax bandit: groups through their sufficient statistics.

:func:`bandit_squared_errors` samples groups through per-action counts and reward sums, which
have exactly the law of the per-sample route, and nests the groups of every size in one draw
(common random numbers). The numba kernel is the default backend; ``backend="torch"`` runs the
same law with torch on CPU or CUDA (:mod:`.torch_backend`).
"""

from __future__ import annotations

import numba
import numpy as np
from tqdm.auto import tqdm

from .._validation import as_group_sizes, as_int
from ..advantages.gradients import rule_gradient
from ..advantages.registry import ESTIMATORS, get_rule
from ..policies.softmax import SoftmaxBandit
from ..seeding import child_seed
from .engine import (
    Backend,
    Execution,
    MonteCarloEstimate,
    Statistic,
    run_monte_carlo,
    stratified_estimate,
)

__all__ = [
    "bandit_squared_errors",
    "bandit_statistics",
    "draw_categorical",
    "per_sample_squared_errors",
    "prompt_averaged_squared_errors",
]


# ---------------------------------------------------------------------------------------------
# Fast bandit kernel: groups through sufficient statistics, nested across group sizes
# ---------------------------------------------------------------------------------------------

def kernel_tables(estimators, sizes, low: float, high: float):
    """What the kernels read for each (rule, G): ``table (n_est, n_G, 2, G_max + 1)``, the
    advantage of a reward ``high`` (``[..., 0, m]``) or ``low`` (``[..., 1, m]``) in a group with
    ``m`` rewards ``high`` (:meth:`~ustat_rl.advantages.AdvantageRule.two_point_table`), and
    ``reference (n_est, n_G)``, the weight ``w`` of ``-w V(x)``."""
    sizes = np.asarray(sizes, dtype=np.int64)
    table = np.zeros((len(estimators), sizes.size, 2, int(sizes.max()) + 1))
    reference = np.zeros((len(estimators), sizes.size))
    for e, rule in enumerate(estimators):
        for ell, g in enumerate(sizes):
            table[e, ell, 0, :g + 1], table[e, ell, 1, :g + 1] = rule.two_point_table(int(g), low,
                                                                                     high)
            reference[e, ell] = float(rule.centring.kernel_coefficients(float(g))[2])
    return table, reference


@numba.njit(cache=True, nogil=True)
def draw_categorical(rng, cum):
    """One draw of a categorical law from its cumulative probabilities ``cum`` (the last 1), in
    numba kernels: the first index with ``u < cum[i]``, ``u`` uniform on ``[0, 1)``."""
    u = rng.random()
    for x in range(cum.shape[0] - 1):
        if u < cum[x]:
            return x
    return cum.shape[0] - 1


@numba.njit(cache=True, nogil=True)
def _add_to_group(rng, pi_x, r_x, lo, hi, increment, counts, sums, wins):
    # Multinomial(increment, pi_x) by sequential binomials, then Binomial successes per action:
    # exactly the law of the per-action counts and reward sums of `increment` new samples.
    # Returns the number of successes added.
    added = 0
    remaining = increment
    rest = 1.0
    k = pi_x.shape[0]
    for a in range(k):
        if remaining == 0:
            break
        if a == k - 1:
            n_a = remaining
        else:
            p = pi_x[a] / rest if rest > 0.0 else 1.0
            n_a = rng.binomial(remaining, min(max(p, 0.0), 1.0))
        if n_a > 0:
            success = rng.binomial(n_a, r_x[a])
            counts[a] += n_a
            sums[a] += lo * n_a + (hi - lo) * success
            wins[a] += success
            added += success
        remaining -= n_a
        rest -= pi_x[a]
    return added


@numba.njit(cache=True, nogil=True)
def _bandit_kernel(rng, n, pi, r, lo, hi, value, cum_prompt, fixed_prompt, batch_size,
                   group_sizes, table, reference, target, direction, deg_pair, out_sq, out_proj,
                   out_deg):
    # Per replicate: the minibatch estimate of every (estimator, G) lives only on the blocks of
    # the drawn prompts, so it is accumulated in a dense scratch and only those blocks are read
    # and reset; untouched coordinates contribute ||target||^2 to every squared error.
    n_prompts, k = pi.shape
    n_sizes = group_sizes.shape[0]
    n_est = table.shape[0]
    scratch = np.zeros((n_est, n_sizes, n_prompts * k))
    touched = np.zeros(n_prompts, dtype=np.bool_)
    order = np.zeros(batch_size, dtype=np.int64)
    counts = np.zeros(k)
    sums = np.zeros(k)
    wins = np.zeros(k)
    target_sq = np.sum(target**2)
    for rep in range(n):
        n_touched = 0
        for _b in range(batch_size):
            x = fixed_prompt if fixed_prompt >= 0 else draw_categorical(rng, cum_prompt)
            if not touched[x]:
                touched[x] = True
                order[n_touched] = x
                n_touched += 1
            counts[:] = 0.0
            sums[:] = 0.0
            wins[:] = 0.0
            previous = 0
            successes = 0
            for ell in range(n_sizes):
                g = group_sizes[ell]
                successes += _add_to_group(rng, pi[x], r[x], lo, hi, g - previous, counts, sums,
                                           wins)
                previous = g
                for e in range(n_est):
                    # c_g = a(z_g, m) - w V(x) read from the rule's table: the sum over the
                    # samples of action a, minus pi_a times the sum over the group
                    a_hi, a_lo = table[e, ell, 0, successes], table[e, ell, 1, successes]
                    shift = reference[e, ell] * value[x]
                    group_sum = successes * a_hi + (g - successes) * a_lo - g * shift
                    for a in range(k):
                        s_a = (wins[a] * a_hi + (counts[a] - wins[a]) * a_lo - counts[a] * shift
                               - pi[x, a] * group_sum)
                        scratch[e, ell, x * k + a] += s_a / (g * batch_size)
        for e in range(n_est):
            for ell in range(n_sizes):
                sq = target_sq
                proj = 0.0
                for t in range(n_touched):
                    x = order[t]
                    for j in range(x * k, (x + 1) * k):
                        est = scratch[e, ell, j]
                        sq += (est - target[j]) ** 2 - target[j] ** 2
                        proj += est * direction[j]
                out_sq[rep, e, ell] = sq
                out_proj[rep, e, ell] = proj
        if deg_pair[0] >= 0:
            for ell in range(n_sizes):
                d = 0.0
                for t in range(n_touched):
                    x = order[t]
                    for j in range(x * k, (x + 1) * k):
                        d += (scratch[deg_pair[0], ell, j] - scratch[deg_pair[1], ell, j]) ** 2
                out_deg[rep, ell] = d
        for t in range(n_touched):
            x = order[t]
            touched[x] = False
            for e in range(n_est):
                for ell in range(n_sizes):
                    for j in range(x * k, (x + 1) * k):
                        scratch[e, ell, j] = 0.0


def bandit_statistics(bandit: SoftmaxBandit, estimators=ESTIMATORS, group_sizes=(2,),
                      batch_size=1, prompt=None, *, direction=None, degenerate: bool = False,
                      backend: Backend | str = "numba"):
    """Per-replicate statistics of every (estimator, G) on the bandit, for :func:`run_monte_carlo`.

    Columns, in order: squared errors ``||g_hat - target||^2`` labelled ``("sq", est, G)``;
    if ``direction`` (shape ``(P*K,)``) is given, projections ``<g_hat, direction>`` labelled
    ``("proj", est, G)``; if ``degenerate``, ``||g_grpo - g_oracle||^2`` labelled
    ``("degenerate", G)``, which estimates ``MSE_grpo - MSE_oracle`` with far smaller variance
    than the difference of two MSEs (the Hoeffding parts are uncorrelated, C4).

    The target is ``g`` for minibatches of ``batch_size`` prompts drawn from ``f``, and
    ``g(x)`` (in block ``x``) when every prompt equals ``prompt = x``. Groups of the sizes in
    ``group_sizes`` are nested (the first ``G_1`` samples of the group of size ``G_2``): common
    random numbers across sizes.

    ``backend="numba"`` (default) runs the compiled CPU kernel; ``backend="torch"`` (or
    ``Backend("torch", device)``) draws from the same law with tensor operations on ``device``
    (``"cpu"``, ``"cuda"``, or ``None``: CUDA when available), and its randomness does not
    depend on ``run_monte_carlo``'s ``block_size`` (:mod:`ustat_rl.montecarlo.torch_backend`
    states what is reproducible across devices).
    """
    backend = Backend.of(backend)
    rules, sizes, batch_size, fixed = _bandit_setup(bandit, estimators, group_sizes,
                                                    batch_size, prompt)
    names = tuple(rule.name for rule in rules)
    lo, hi = bandit.reward_values
    table, reference = kernel_tables(rules, sizes, lo, hi)
    target = bandit.target_gradient(fixed if fixed >= 0 else None)
    use_dir = direction is not None
    if use_dir:
        direction = np.asarray(direction, dtype=np.float64)
        if direction.shape != (bandit.dim,) or not np.all(np.isfinite(direction)):
            raise ValueError(f"`direction` must be a finite vector of shape ({bandit.dim},)")
    else:
        direction = np.zeros(bandit.dim)
    deg_pair = np.array([-1, -1], dtype=np.int64)
    if degenerate:
        if "grpo" not in names or "oracle" not in names:
            raise ValueError("`degenerate=True` needs both 'grpo' and 'oracle' in `estimators`")
        deg_pair[:] = names.index("grpo"), names.index("oracle")
    labels = tuple(("sq", e, int(g)) for e in names for g in sizes)
    if use_dir:
        labels += tuple(("proj", e, int(g)) for e in names for g in sizes)
    if degenerate:
        labels += tuple(("degenerate", int(g)) for g in sizes)
    if backend.name == "torch":
        from .torch_backend import TorchBanditStatistic, resolve_device

        measured = (target, direction if use_dir else None,
                    tuple(deg_pair) if degenerate else None)
        statistic = TorchBanditStatistic(bandit, (table, reference), sizes, batch_size, fixed,
                                         measured, resolve_device(backend.device))
        return statistic, labels
    pi, r = bandit.policy, bandit.reward_prob
    cum_prompt = np.cumsum(bandit.prompt_prob)
    n_est, n_sizes = len(rules), len(sizes)

    def statistic(rng, n):
        out_sq = np.empty((n, n_est, n_sizes))
        out_proj = np.empty((n, n_est, n_sizes))
        out_deg = np.empty((n, n_sizes))
        _bandit_kernel(rng, n, pi, r, lo, hi, bandit.value, cum_prompt, fixed, batch_size,
                       sizes, table, reference, target, direction, deg_pair, out_sq, out_proj,
                       out_deg)
        parts = [out_sq.reshape(n, -1)]
        if use_dir:
            parts.append(out_proj.reshape(n, -1))
        if degenerate:
            parts.append(out_deg)
        return np.concatenate(parts, axis=1) if len(parts) > 1 else parts[0]

    return statistic, labels


def bandit_squared_errors(bandit: SoftmaxBandit, estimators=ESTIMATORS, group_sizes=(2,),
                          batch_size=1, prompt=None, *, backend: Backend | str = "numba"):
    """Statistic of squared errors ``||g_hat - target||^2`` for each (estimator, G).

    The mean is the MSE of :meth:`SoftmaxBandit.exact_mse` (minibatches from ``f``) or of
    :meth:`SoftmaxBandit.exact_mse_per_prompt` (``prompt = x`` fixed). See
    :func:`bandit_statistics`, which also describes ``backend``.

    Returns
    -------
    statistic : callable
        For :func:`run_monte_carlo`; columns ordered estimator-major.
    labels : tuple of (str, int)
        ``(estimator, group_size)`` per column.

    Examples
    --------
    The torch backend estimates the same MSE as the exact theory (and the numba backend):

    >>> from ustat_rl.policies.examples import small_bandit
    >>> bandit = small_bandit()
    >>> stat, labels = bandit_squared_errors(bandit, "grpo", (4,), backend=Backend("torch", "cpu"))
    >>> labels
    (('grpo', 4),)
    >>> est = run_monte_carlo(stat, 20_000, seed=1, labels=labels)
    >>> bool(abs(est.mean[0] - bandit.exact_mse("grpo", 4)) < 4.5 * est.std_error[0])
    True
    """
    statistic, labels = bandit_statistics(bandit, estimators, group_sizes, batch_size, prompt,
                                          backend=backend)
    return statistic, tuple(label[1:] for label in labels)


def prompt_averaged_squared_errors(bandit: SoftmaxBandit, estimators=ESTIMATORS,
                                   group_sizes=(2,), n_reps=10_000, seed=0, *,
                                   block_size=4096, execution: Execution | None = None,
                                   backend: Backend | str = "numba") -> MonteCarloEstimate:
    """``E_X MSE(X)``, the prompt-averaged per-prompt MSE, by stratified Monte Carlo (C5, C11).

    Each prompt ``x`` is simulated on its own (``n_reps`` replicates, seed
    ``child_seed(seed, x)``) and the results are combined with the weights
    ``f(x)`` by :func:`~ustat_rl.montecarlo.engine.stratified_estimate`. The exact counterpart is
    :meth:`SoftmaxBandit.prompt_averaged_mse`. Labels are ``(estimator, G)``. ``backend`` is that
    of :func:`bandit_statistics`; ``block_size`` that of :func:`run_monte_carlo`;
    ``execution`` (:class:`~ustat_rl.montecarlo.engine.Execution`, default one thread and no
    progress bar) the worker threads and the progress bar over prompts, which leave the result
    unchanged.
    """
    backend = Backend.of(backend)
    execution = Execution.of(execution)
    estimates = []
    for x in tqdm(range(bandit.n_prompts), desc="prompts", disable=not execution.progress,
                  leave=False):
        stat, labels = bandit_squared_errors(bandit, estimators, group_sizes, prompt=x,
                                             backend=backend)
        estimates.append(run_monte_carlo(stat, n_reps, child_seed(seed, x), block_size=block_size,
                                         n_jobs=execution.n_jobs, labels=labels))
    return stratified_estimate(estimates, bandit.prompt_prob)


def _bandit_setup(bandit, estimators, group_sizes, batch_size, prompt):
    if isinstance(estimators, str) or not np.iterable(estimators):
        estimators = (estimators,)
    rules = tuple(_mc_rule(name, "estimators") for name in estimators)
    sizes = as_group_sizes(group_sizes, "group_sizes", max(r.min_group_size for r in rules))
    batch_size = as_int(batch_size, "batch_size", 1)
    fixed = -1
    if prompt is not None:
        fixed = as_int(prompt, "prompt", 0)
        if fixed >= bandit.n_prompts:
            raise ValueError(f"`prompt` must be in [0, {bandit.n_prompts - 1}], got {fixed}")
    return rules, sizes, batch_size, fixed


def _mc_rule(name, parameter):
    rule = get_rule(name, parameter)
    if rule.statistics != "group" or rule.centring.reference_source == "baseline":
        raise ValueError(f"`{parameter}` entry {rule.name!r} needs a batch statistic or a "
                         "baseline b(x); the bandit kernels take rules of the group alone "
                         "(batch rules: ustat_rl.montecarlo.batch_rules.batch_rule_statistics)")
    return rule


# ---------------------------------------------------------------------------------------------
# The literal per-sample route (independent check of the fast kernel; benchmark baseline)
# ---------------------------------------------------------------------------------------------


def per_sample_squared_errors(bandit: SoftmaxBandit, estimator: str, group_size, batch_size=1,
                              prompt=None) -> Statistic:
    """Squared errors computed sample by sample: sample actions and rewards, build every score
    ``W_g`` and apply the public estimator functions. Slow but literal."""
    rule = _mc_rule(estimator, "estimator")
    group_size = as_int(group_size, "group_size", rule.min_group_size, rule.min_group_reason)
    batch_size = as_int(batch_size, "batch_size", 1)
    k = bandit.n_actions
    target = bandit.target_gradient(prompt)

    def statistic(rng, n):
        sample = bandit.sample_groups(group_size, n * batch_size, rng, prompt)
        score = bandit.scores(sample.prompt, sample.action)  # (n*B, G, K)
        est = rule_gradient(rule, score, sample.reward, bandit.value[sample.prompt],
                            per_prompt=True)
        full = np.zeros((n * batch_size, bandit.dim))  # (n*B, P*K)
        cols = sample.prompt[:, None] * k + np.arange(k)
        np.put_along_axis(full, cols, est, axis=1)
        batch_mean = full.reshape(n, batch_size, bandit.dim).mean(axis=1)
        return np.sum((batch_mean - target) ** 2, axis=1)[:, None]

    return statistic
