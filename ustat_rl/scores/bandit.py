"""Pilot rollouts drawn from a softmax bandit, whose exact moments are known (section 7).

The checks of the pilot estimators compare estimates from these rollouts with
:meth:`ustat_rl.policies.softmax.SoftmaxBandit.moments`; the CLI and notebook use them as a worked
example.
"""

from __future__ import annotations

import numpy as np

from .._validation import as_int, as_rng
from ..pilot.rollouts import Rollouts
from ..policies.softmax import SoftmaxBandit
from .sketch import projection_matrix
from .spec import SketchSpec, as_spec

__all__ = ["bandit_pilot"]


def bandit_pilot(bandit: SoftmaxBandit, n_prompts, group_size, rng,
                 sketch: SketchSpec | None = None, fixed_prompts: bool = False) -> Rollouts:
    """Draw a pilot from ``bandit``: ``n_prompts`` groups of ``group_size`` samples each.

    Parameters
    ----------
    bandit : SoftmaxBandit
    n_prompts : int
        Groups (i.i.d. prompt draws from ``f``, each its own group id); ignored with
        ``fixed_prompts``.
    group_size : int
        Samples per group, ``>= 3``.
    rng : numpy.random.Generator or seed
    sketch : SketchSpec, optional
        Project the full ``P K``-dimensional scores to ``sketch.dimension`` columns with the
        spec's :func:`~ustat_rl.scores.sketch.projection_matrix` (its seed and kind; ``rng``
        draws the samples only); ``None`` keeps them. Pilots that should see independent
        projections take specs of different seeds.
    fixed_prompts : bool
        One group per bandit prompt with ``prompt_weight = f(x)`` (a fixed prompt set).

    Returns
    -------
    Rollouts
    """
    if not isinstance(bandit, SoftmaxBandit):
        raise TypeError(f"`bandit` must be a SoftmaxBandit, got {type(bandit).__name__}")
    spec = None if sketch is None else as_spec(sketch, "sketch")
    n_prompts = bandit.n_prompts if fixed_prompts else as_int(n_prompts, "n_prompts", 2)
    group_size = as_int(group_size, "group_size", 3, "(order-3 kernels)")
    rng = as_rng(rng)
    prompt = list(range(bandit.n_prompts)) if fixed_prompts else None
    sample = bandit.sample_groups(group_size, n_prompts, rng, prompt=prompt)
    score = bandit.scores(sample.prompt, sample.action, full=True)  # (B, G, P K)
    score = score.reshape(n_prompts * group_size, bandit.dim)
    meta = dict(sketch_kind="none", param_dim=bandit.dim, model_name=repr(bandit))
    if spec is not None:
        score = score @ projection_matrix(bandit.dim, spec).T  # (n, k)
        meta.update(sketch_kind=spec.kind, sketch_seed=spec.seed)
    weight = None
    if fixed_prompts:
        weight = bandit.prompt_prob[sample.prompt].repeat(group_size)  # (n,)
    return Rollouts(prompt_id=np.arange(n_prompts).repeat(group_size),
                    reward=sample.reward.ravel(), score=score, prompt_weight=weight, **meta)
