"""The spread of a minibatch gradient estimator around its own mean (docs/theory.md, "Against a
real trainer").

What a trainer's gradient over fresh batches at fixed parameters varies by is the variance of the
estimator, not its MSE against the policy gradient: for a biased rule (the full mean, a rule
that scales its advantages) the two differ by the squared bias. :func:`minibatch_variance` is the
variance, from :func:`ustat_rl.theory.mse.minibatch_mse` alone.
"""

from __future__ import annotations

import numpy as np

from .._validation import as_int
from .moments import PromptMoments
from .mse import minibatch_mse

__all__ = ["minibatch_variance"]


def minibatch_variance(moments: PromptMoments, estimator: str, group_size, batch_size=1):
    r"""Variance (trace of the covariance) of the minibatch estimator around its own mean.

    .. math::

        E\|\hat g_B - E\hat g_B\|^2 = \frac{V}{B}, \qquad
        V = 2\,(\mathrm{MSE}_1 - \mathrm{MSE}_2)

    The ``B`` groups are i.i.d., so ``MSE_B = V/B + ||E g_hat - g||^2`` for every rule
    (:func:`minibatch_mse`, Proposition 3): two batch sizes give ``V`` with no separate bias
    formula. It is what the spread of a trainer's gradient over fresh batches at fixed parameters
    measures (docs/theory.md, "Against a real trainer"); for the unbiased rules it is the MSE.
    """
    B = as_int(batch_size, "batch_size", 1)
    one = minibatch_mse(moments, estimator, group_size, 1)
    two = minibatch_mse(moments, estimator, group_size, 2)
    out = 2.0 * (np.asarray(one) - np.asarray(two)) / B
    return float(out) if out.ndim == 0 else out
