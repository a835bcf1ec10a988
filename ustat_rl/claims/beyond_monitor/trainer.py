"""The monitor's units: the gradient TRL's trainer computes (docs/theory.md C47).

Two deterministic checks of what the TRL monitor reports, against independent routes:

* each ``loss_type``'s completion weights (:func:`ustat_rl.frameworks.trainer_units.
  completion_weights`) equal ``n`` times the per-token weight of TRL's loss aggregation
  (``GRPOTrainer._compute_loss``, trl 1.16), written here as the trainer writes it and
  differentiated by autograd;
* the variance of a minibatch estimator (:func:`ustat_rl.theory.minibatch_variance`, the moment
  model's variance at any G) equals its exact MSE minus the squared bias: zero for the unbiased rules,
  ``||g||^2 / G^2`` for the full mean, at several ``(G, B)`` on a bandit with exact moments.

No false-failure rate: exact comparisons to rounding.
"""

from __future__ import annotations

import numpy as np

from ..registry import check_exact, register

#: Completion lengths of the aggregation check (tokens), and ``max_completion_length``.
TRAINER_LENGTHS, TRAINER_MAX_LENGTH = (1, 3, 2, 5, 4), 6
#: ``(G, B)`` of the variance check.
VARIANCE_SIZES = ((2, 1), (4, 8), (16, 3))


def trl_token_weights(loss_type: str, lengths, max_length: int) -> np.ndarray:
    """``d loss / d x_it`` of TRL's aggregation of per-token terms ``x`` (one process, no
    gradient accumulation): the weight of each of completion ``i``'s tokens, by autograd."""
    import torch

    lengths = torch.as_tensor(lengths)
    n, T = lengths.numel(), int(lengths.max())
    mask = (torch.arange(T)[None, :] < lengths[:, None]).double()
    x = torch.ones(n, T, dtype=torch.float64, requires_grad=True)
    if loss_type in ("grpo", "sapo"):
        loss = ((x * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    elif loss_type == "dr_grpo":
        loss = (x * mask).sum() / (x.size(0) * max_length)
    elif loss_type in ("bnpo", "dapo", "cispo", "vespo"):  # num_items_in_batch on one process
        loss = (x * mask).sum() / mask.sum().clamp(min=1.0)
    else:  # luspo: a sum over tokens, a mean over completions
        loss = (x * mask).sum(-1).mean()
    (grad,) = torch.autograd.grad(loss, x)
    return grad[:, 0].numpy()


def cispo_token_factor(epsilon_high: float) -> float:
    """``d loss_token / d log pi`` per unit advantage of TRL's ``cispo`` per-token loss at the
    sampling parameters, ``-clamp(ratio, max=epsilon_high).detach() A log pi`` with
    ``ratio = exp(log pi - log pi_old)`` (``GRPOTrainer._compute_loss``, trl 1.16), by
    autograd: the factor its clamp puts on the score."""
    import torch

    logp = torch.tensor([-0.7], dtype=torch.float64, requires_grad=True)
    ratio = torch.exp(logp - logp.detach())
    loss = -(torch.clamp(ratio, max=epsilon_high).detach() * 1.0 * logp).sum()
    (grad,) = torch.autograd.grad(loss, logp)
    return float(-grad[0])


@register("C47", "Beyond the paper: the monitor reports the gradient TRL computes: each "
          "loss_type's completion weights are TRL's loss aggregation, and the moment model's "
          "step variance is the exact MSE less the squared bias",
          "derived (docs/theory.md C47; section 7, \"Against a real trainer\")",
          "completion_weights against autograd on TRL's aggregation; minibatch_variance against "
          "minibatch_mse minus the closed-form squared bias on small_bandit")
def check_c47(ctx) -> list:
    from ...frameworks.trainer_units import LOSS_WEIGHTS, completion_weights, ratio_one_factor
    from ...policies.examples import small_bandit
    from ...theory import minibatch_mse, minibatch_variance

    lengths = np.array(TRAINER_LENGTHS)
    checks = [check_exact(f"{loss}: w_i = n x TRL's per-token weight",
                          lengths.size * trl_token_weights(loss, lengths, TRAINER_MAX_LENGTH),
                          completion_weights(loss, lengths, TRAINER_MAX_LENGTH),
                          rtol=1e-14, atol=0.0) for loss in sorted(LOSS_WEIGHTS)]
    highs = (0.2, 0.28, 5.0)  # TRL's default epsilon, DAPO's value, the value TRL recommends
    checks.append(check_exact(f"cispo: the clamped ratio's factor at epsilon_high in {highs} is "
                              "TRL's (autograd); every other loss_type has 1",
                              [cispo_token_factor(h) for h in highs] + [1.0] * (len(LOSS_WEIGHTS) - 1),
                              [ratio_one_factor("cispo", h) for h in highs]
                              + [ratio_one_factor(loss, 0.2) for loss in sorted(LOSS_WEIGHTS)
                                 if loss != "cispo"], rtol=1e-14, atol=0.0))
    moments = small_bandit().moments()
    grad_sq = float(moments.grad_norm_sq)
    for rule, bias in (("grpo", lambda G: 0.0), ("vanilla", lambda G: 0.0),
                       ("fullmean", lambda G: grad_sq / G ** 2)):
        want = [minibatch_mse(moments, rule, G, B) - bias(G) for G, B in VARIANCE_SIZES]
        got = [minibatch_variance(moments, rule, G, B) for G, B in VARIANCE_SIZES]
        checks.append(check_exact(f"{rule}: variance = MSE - squared bias at (G, B) in "
                                  f"{VARIANCE_SIZES}", want, got, rtol=1e-10, atol=0.0))
    return checks
