"""The gradient TRL's ``GRPOTrainer`` computes, written as the paper's estimator of rescaled scores.

At the parameters that sampled a generation batch (importance ratio 1, no KL term: ``beta = 0``,
TRL's default), TRL's loss (trl 1.16, ``GRPOTrainer._compute_loss``) aggregates the per-token
terms ``-A_i ratio_it`` by ``loss_type``, and its gradient is

.. math::

    \\nabla L = -\\frac{1}{n} \\sum_i A_i\\, w_i\\, W_i, \\qquad
    W_i = \\sum_t \\nabla \\log \\pi(o_{it} \\mid \\ldots)

over the batch's ``n = B G`` completions, ``W_i`` the score the monitor sketches, with

* ``grpo``, ``sapo``: ``w_i = 1/|o_i|`` (each completion's mean over its tokens);
* ``dr_grpo``: ``w_i = 1/L``, ``L`` = ``max_completion_length``;
* ``bnpo``, ``dapo`` (TRL's default), ``cispo``, ``vespo``: ``w_i = n / sum_j |o_j|`` (the
  batch's tokens; with data parallelism the gathered batch's, as DDP averages the processes);
  ``dapo``, ``cispo`` and ``vespo`` divide by the batch's ``num_items_in_batch``, which TRL
  before 1.9 counted before ``mask_truncated_completions`` zeroed the truncated completions
  (so it includes their tokens): :data:`NUM_ITEMS_LOSSES`, and ``total_tokens`` below;
* ``luspo``: ``w_i = 1`` (a sum over tokens, a mean over completions);

and ``cispo``'s further factor ``min(1, epsilon_high)``: its loss is
``-clamp(ratio, max=epsilon_high).detach() A log pi``, so at ratio 1 each token's score is
multiplied by the clamped ratio (:func:`ratio_one_factor`). ``epsilon_high`` defaults to
``epsilon`` (0.2), so with TRL's defaults a ``cispo`` gradient is a fifth of ``dapo``'s (TRL
recommends 5.0, where the factor is 1). The other losses' clipped or soft ratios have value
and derivative 1 at ratio 1.

So the paper's estimator with ``W_i`` replaced by ``w_i W_i`` is, up to its sign, the gradient of
one generation batch (an optimizer step's when ``steps_per_generation`` equals
``gradient_accumulation_steps``, TRL's default). How exactly the theory then applies depends on
``w`` (:data:`EXACTNESS`): a constant ``w`` (``dr_grpo``, ``luspo``) keeps the rows i.i.d. and
``E[w W | x] = 0``, so every formula holds exactly; the batch normaliser of ``dapo``-like losses
is a ratio estimator, the constant ``1/E|o|`` to first order in ``1/B``; a per-completion ``1/|o_i|``
(``grpo``) is not a score function any more (``E[W_i/|o_i| | x] != 0``), so the U-statistic
formulas, which use ``E[W | x] = 0``, are an approximation there (docs/theory.md, "Against a real
trainer").
"""

from __future__ import annotations

import numpy as np

from .._validation import as_float, as_int
from .aggregation import aggregation_weights

__all__ = ["LOSS_WEIGHTS", "EXACTNESS", "NUM_ITEMS_LOSSES", "completion_weights", "units_note",
           "ratio_one_factor"]

#: ``loss_type`` -> how each completion's score is weighted in the trainer's gradient.
LOSS_WEIGHTS = {"grpo": "length", "sapo": "length", "dr_grpo": "max_length",
                "bnpo": "batch_tokens", "dapo": "batch_tokens", "cispo": "batch_tokens",
                "vespo": "batch_tokens", "luspo": "one"}

#: The ``loss_type``\ s whose normaliser is the generation batch's ``num_items_in_batch``
#: (``bnpo`` divides by its micro-batch's completion tokens instead).
NUM_ITEMS_LOSSES = ("dapo", "cispo", "vespo")

#: Each kind of weight as verl's ``loss_agg_mode`` of the same reduction, and whether TRL's
#: ``w_i`` is ``n`` times its per-sample weight ``c_i`` (Dr. GRPO divides by ``n L``, verl's
#: ``seq-mean-token-sum-norm`` by ``L`` alone, so there ``w_i = c_i``).
AGGREGATION_MODES = {"one": ("seq-mean-token-sum", True), "length": ("seq-mean-token-mean", True),
                     "batch_tokens": ("token-mean", True),
                     "max_length": ("seq-mean-token-sum-norm", False)}

#: How the finite-G formulas apply to the rescaled scores, per kind of weight.
EXACTNESS = {"one": "exact", "max_length": "exact",
             "batch_tokens": "first order in 1/B (the batch's mean length as a constant)",
             "length": "approximate (W/|o| is not a score function: E[W/|o| | x] != 0)"}


def completion_weights(loss_type: str, lengths, max_completion_length=None,
                       total_tokens=None) -> np.ndarray:
    """``w_i`` of each completion of one generation batch (module docstring).

    Parameters
    ----------
    loss_type : str
        TRL's ``GRPOConfig.loss_type``, a key of :data:`LOSS_WEIGHTS`.
    lengths : array_like (n,)
        Completion tokens of each row (the completion mask's row sums), the whole batch.
    max_completion_length : int, optional
        ``GRPOConfig.max_completion_length``; needed for ``dr_grpo``.
    total_tokens : float, optional
        The tokens the loss divides the batch by, for the ``n / sum_j |o_j|`` kinds (default
        ``sum(lengths)``; the monitor passes TRL's ``num_items_in_batch`` for
        :data:`NUM_ITEMS_LOSSES`).

    Examples
    --------
    >>> completion_weights("dapo", [1, 3]).tolist(), completion_weights("grpo", [1, 4]).tolist()
    ([0.5, 0.5], [1.0, 0.25])
    """
    if loss_type not in LOSS_WEIGHTS:
        raise ValueError(f"`loss_type` must be one of {sorted(LOSS_WEIGHTS)}, got {loss_type!r}")
    lengths = np.asarray(lengths, dtype=np.float64)
    if lengths.ndim != 1 or lengths.size == 0 or np.any(~np.isfinite(lengths)) \
            or np.any(lengths < 0):
        raise ValueError("`lengths` must be a non-empty 1-D array of token counts >= 0")
    kind = LOSS_WEIGHTS[loss_type]
    horizon = total = None
    if kind == "max_length":
        if max_completion_length is None:
            raise ValueError("`max_completion_length` is needed for loss_type 'dr_grpo'")
        horizon = as_int(max_completion_length, "max_completion_length", 1)
    if kind == "batch_tokens":
        total = float(lengths.sum()) if total_tokens is None else as_float(
            total_tokens, "total_tokens", low=0.0)
        total = max(total, 1.0)
    mode, per_batch = AGGREGATION_MODES[kind]
    # TRL clamps each length at 1 (a truncated completion's zeroed mask)
    c = aggregation_weights(np.maximum(lengths, 1.0), mode, horizon, total_tokens=total)
    return c * lengths.size if per_batch else c


def ratio_one_factor(loss_type: str, epsilon_high: float) -> float:
    """The factor TRL's loss puts on every token's score at importance ratio 1.

    ``cispo`` multiplies ``-A log pi`` by ``clamp(ratio, max=epsilon_high)``, detached, which is
    ``min(1, epsilon_high)`` at ratio 1; every other ``loss_type`` has 1 there.

    Parameters
    ----------
    loss_type : str
        TRL's ``GRPOConfig.loss_type``.
    epsilon_high : float
        The trainer's upper clipping value (``GRPOConfig.epsilon_high``, or ``epsilon`` when that
        is ``None``, as ``GRPOTrainer`` takes it).

    Examples
    --------
    >>> ratio_one_factor("cispo", 0.2), ratio_one_factor("cispo", 5.0), ratio_one_factor("dapo", 0.2)
    (0.2, 1.0, 1.0)
    """
    epsilon_high = as_float(epsilon_high, "epsilon_high", low=0.0)
    return min(1.0, epsilon_high) if loss_type == "cispo" else 1.0


def units_note(loss_type: str) -> str:
    """The record's ``units``: which gradient the estimates are of, and how exactly."""
    if loss_type not in LOSS_WEIGHTS:
        return (f"paper units (loss_type {loss_type!r} has no known aggregation: scores are "
                "unweighted)")
    return f"trainer (loss_type {loss_type!r}: {EXACTNESS[LOSS_WEIGHTS[loss_type]]})"
