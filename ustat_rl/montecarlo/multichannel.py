"""Monte Carlo of multi-reward rules on a multi-channel bandit (docs/theory.md C52).

The bandit is a :class:`~ustat_rl.policies.multichannel.MultiChannelBandit`.

Each replicate is one step's batch: ``B`` prompts from ``f`` (or one fixed prompt), ``G`` draws
each, every draw an action and a joint outcome of the ``K`` channels. Two backends draw the
same law with different code and generators: ``"numba"`` (a compiled loop over draws, the
default) and ``"torch"`` (``torch.multinomial`` on CPU or CUDA). Both hand the draws to the
rule's own evaluator (:meth:`~ustat_rl.advantages.multichannel.MultiChannelRule.batched`, batch
statistics within each batch), so a batch rule is measured at its finite ``B``; groups of the
sizes asked are nested (the first ``G_1`` draws of the group of ``G_2``: common random numbers).

Columns per ``(rule, G)``: ``("sq", rule, G)`` the squared error ``||g_hat_B - t||^2`` against
the weighted objective's gradient ``t``, ``("proj", rule, G)`` the projection ``<g_hat_B, t>``
and ``("second", rule, G)`` the squared norm ``||g_hat_B||^2``: their means are the ``mse``,
``mean_projection`` and ``second_moment`` of
:func:`ustat_rl.theory.multichannel.multichannel_moments`.
"""

from __future__ import annotations

import numba
import numpy as np

from .._validation import as_group_sizes, as_int
from ..advantages.multichannel import get_multichannel_rule
from .bandit import draw_categorical
from .engine import Backend

__all__ = ["multichannel_statistics"]


@numba.njit(cache=True, nogil=True)
def _draw_numba(rng, n, cum_prompt, fixed, cum_policy, cum_outcome, prompt, action, outcome):
    # prompt (n, B), action and outcome (n, B, G): one categorical per prompt, action, outcome
    B, G = action.shape[1], action.shape[2]
    for r in range(n):
        for b in range(B):
            x = fixed if fixed >= 0 else draw_categorical(rng, cum_prompt)
            prompt[r, b] = x
            for j in range(G):
                a = draw_categorical(rng, cum_policy[x])
                action[r, b, j] = a
                outcome[r, b, j] = draw_categorical(rng, cum_outcome[x, a])


def _numba_sampler(bandit, fixed):
    cum_prompt = np.cumsum(bandit.prompt_prob)
    cum_policy = np.cumsum(bandit.policy, axis=1)
    cum_outcome = np.cumsum(bandit.outcome_prob, axis=2)

    def draw(rng, n, B, G):
        prompt = np.empty((n, B), dtype=np.int64)
        action = np.empty((n, B, G), dtype=np.int64)
        outcome = np.empty((n, B, G), dtype=np.int64)
        _draw_numba(rng, n, cum_prompt, fixed, cum_policy, cum_outcome, prompt, action, outcome)
        return prompt, action, outcome

    return draw


def _torch_sampler(bandit, fixed, device):
    import torch

    from .torch_backend import resolve_device

    dev = resolve_device(device)
    f = torch.as_tensor(bandit.prompt_prob, device=dev)
    pi = torch.as_tensor(bandit.policy, device=dev)
    p_out = torch.as_tensor(bandit.outcome_prob, device=dev)

    def draw(rng, n, B, G):
        gen = torch.Generator(device=dev)
        gen.manual_seed(int(rng.integers(2**63 - 1)))
        if fixed >= 0:
            prompt = torch.full((n * B,), fixed, dtype=torch.int64, device=dev)
        else:
            prompt = torch.multinomial(f, n * B, replacement=True, generator=gen)
        action = torch.multinomial(pi[prompt], G, replacement=True, generator=gen)  # (nB, G)
        rows = p_out[prompt[:, None], action].reshape(n * B * G, -1)
        outcome = torch.multinomial(rows, 1, generator=gen).reshape(n * B, G)
        return (prompt.reshape(n, B).cpu().numpy(), action.reshape(n, B, G).cpu().numpy(),
                outcome.reshape(n, B, G).cpu().numpy())

    return draw


def _estimates(bandit, prompt, action, adv):
    """``g_hat_B = (1/(B G)) sum_b sum_j A_bj (e_{a_bj} - pi(x_b))``, shape ``(n, P A)``."""
    n, B, G = adv.shape
    A = bandit.n_actions
    out = np.zeros((n, bandit.dim))
    rep = np.arange(n)[:, None, None]
    np.add.at(out, (np.broadcast_to(rep, adv.shape), prompt[:, :, None] * A + action), adv)
    total = adv.sum(axis=2)  # (n, B)
    cols = prompt[:, :, None] * A + np.arange(A)  # (n, B, A)
    np.add.at(out, (np.broadcast_to(rep, cols.shape), cols),
              -total[:, :, None] * bandit.policy[prompt])
    return out / (B * G)


def multichannel_statistics(bandit, estimators, group_sizes, batch_size=1, weights=None, *,
                            prompt=None, backend: Backend | str = "numba"):
    """Per-replicate squared errors, projections and squared norms for
    :func:`~ustat_rl.montecarlo.run_monte_carlo`.

    Parameters
    ----------
    bandit : MultiChannelBandit
    estimators : str, MultiChannelRule or sequence of them
    group_sizes : int or sequence of int
    batch_size : int
    weights : array_like (K,), optional
        Channel weights (ones by default); the target is ``bandit.target_gradient(weights)``
        (or prompt ``x``'s own ``t(x)`` when ``prompt = x`` is fixed).
    prompt : int, optional
        Draw every group at this prompt.
    backend : {"numba", "torch"} or Backend
        The sampler, and for torch its device (:class:`~ustat_rl.montecarlo.engine.Backend`);
        the numba backend runs on the CPU only.

    Returns
    -------
    statistic : callable
        ``statistic(rng, n) -> (n, 3 L)``.
    labels : tuple
        ``(kind, rule, G)`` per column, kind-major (``"sq"``, ``"proj"``, ``"second"``).
    """
    backend = Backend.of(backend)
    if isinstance(estimators, str) or not np.iterable(estimators):
        estimators = (estimators,)
    estimators = tuple(get_multichannel_rule(r, "estimators") for r in estimators)
    sizes = as_group_sizes(group_sizes, "group_sizes", max(r.min_group_size for r in estimators))
    B = as_int(batch_size, "batch_size", 1)
    w = estimators[0].check_weights(weights, bandit.n_channels)
    fixed = -1 if prompt is None else as_int(prompt, "prompt", 0)
    if fixed >= bandit.n_prompts:
        raise ValueError(f"`prompt` must be in [0, {bandit.n_prompts - 1}], got {fixed}")
    for rule in estimators:
        if B * int(sizes.min()) < rule.min_batch_size:
            raise ValueError(f"rule {rule.name!r} needs batches of at least "
                             f"{rule.min_batch_size} samples")
    target = bandit.target_gradient(w)
    if fixed >= 0:  # prompt x's own t(x), in its block
        block = np.zeros(bandit.dim)
        A = bandit.n_actions
        block[fixed * A:(fixed + 1) * A] = target[fixed * A:(fixed + 1) * A]
        target = block / bandit.prompt_prob[fixed]
    draw = (_numba_sampler(bandit, fixed) if backend.name == "numba"
            else _torch_sampler(bandit, fixed, backend.device))
    g_max = int(sizes.max())
    keys = [(rule, int(G)) for rule in estimators for G in sizes]
    labels = tuple((kind, rule.name, G) for kind in ("sq", "proj", "second") for rule, G in keys)

    def statistic(rng, n):
        prompt_, action, outcome = draw(rng, n, B, g_max)
        rewards = bandit.rewards(outcome)  # (n, B, G_max, K)
        cols = {"sq": [], "proj": [], "second": []}
        for rule, G in keys:
            adv = rule.batched(rewards[:, :, :G], w)  # (n, B, G)
            est = _estimates(bandit, prompt_, action[:, :, :G], adv)  # (n, P A)
            cols["sq"].append(np.sum((est - target) ** 2, axis=1))
            cols["proj"].append(est @ target)
            cols["second"].append(np.sum(est**2, axis=1))
        return np.stack(cols["sq"] + cols["proj"] + cols["second"], axis=1)

    return statistic, labels
