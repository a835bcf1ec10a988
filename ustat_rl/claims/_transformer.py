"""What the transformer checks (C5.tf, C11.tf, C18.tf) share: the group sizes of the paper's
Figure 4, the task's splits and their seed streams.

The policies are the three committed warm-up checkpoints (``weak``, ``medium``, ``strong``) on
the synthetic arithmetic task. Their constrained output space is small, so per-prompt MSEs are
exact (enumeration); Monte Carlo runs the real pipeline (autoregressive sampling, vmap scores).
Quick versions use a handful of prompts; ``ctx.quick = False`` uses the whole 500-question test
split and many more replicates. Consequences of the theorems (GRPO above oracle, the exact MSE
formulas, the rates) are required; the paper's empirical patterns (the vanilla > GRPO ordering,
MSE falling with policy strength, the trained argmax near G*) are ``required=False``: when they
do not reproduce on this analogue the verdict is ``"differs"``, with the reason in the note.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..policies.transformer import ArithmeticTask, exact_moments, load_study_policy, make_splits

__all__ = ["GROUPS", "study_moments", "study_splits", "transformer_stream"]

#: The group sizes of the paper's Figure 4.
GROUPS = (4, 8, 16, 32, 64)


def transformer_stream(ctx, claim_id: str):
    """The seed sequence of a transformer check (apart from the bandit claims of its number)."""
    # the extra key 7 keeps these streams apart from the bandit claims that share the number
    return ctx.seed_for(claim_id, 7)


def study_splits():
    """The arithmetic task's train and test splits, as the warm-up policies were trained on."""
    return make_splits(ArithmeticTask(), seed=0)


def study_moments(name: str, questions):
    """The exact moments of the committed study policy ``name`` on ``questions``, once a process.

    Enumerating the 111 outputs of every question costs about a second a question, and C11.tf
    and C40 both need the three policies on the first test questions: the second claim reads
    the first one's enumeration. The arrays of the answer are read-only, so that no claim can
    change what another one reads.
    """
    return _study_moments(name, tuple(questions))


@lru_cache(maxsize=16)
def _study_moments(name: str, questions: tuple):
    policy, _ = load_study_policy(name, device="cpu")
    moments = exact_moments(policy, list(questions))
    for value in vars(moments).values():
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
    return moments
