"""Every loss reduction's per-completion weights, against the arithmetic it stands for (C60).

:func:`ustat_rl.frameworks.aggregation.aggregation_weights` (verl's four ``loss_agg_mode``
values, ``token-mean`` with and without a trainer's own token count, on one batch and on a stack
of batches) and :func:`ustat_rl.frameworks.aggregation.prompt_mean_weights` (SkyRL's
``prompt_mean``) hand the monitor ``c_i`` with ``g_hat = sum_i c_i A_i W_i``. Here each reduction
is written out as a framework computes its loss: a masked per-token loss ``x_it`` reduced over
tokens and sequences in torch, whose derivative ``d loss / d x_it`` (autograd) is the weight of
token ``t`` of answer ``i``. The package's ``c_i`` times the response mask must equal that
derivative at every token, padding included, on batches whose padded width is not the longest
answer, whose groups are of unequal sizes and out of order, and with one prompt whose answers
hold no loss token (SkyRL's count clamped at 1: the clamp's boundary).

TRL's ``loss_type`` weights are C47's. Deterministic: exact comparisons to float64 rounding, no
false-failure rate.
"""

from __future__ import annotations

import numpy as np

from ..registry import check_exact, check_true, register

__all__ = ["BATCH_LENGTHS", "PADDED_WIDTH", "EXTRA_TOKENS", "PROMPT_LENGTHS", "PROMPT_IDS",
           "written_out_weights", "prompt_mean_written_out"]

#: Answer lengths of the batch (N = 7), and the padded width of its mask (wider than the longest
#: answer, so the width is neither N nor max T: a shape bug cannot hide at N = T).
BATCH_LENGTHS, PADDED_WIDTH = (1, 3, 2, 5, 4, 1, 6), 9
#: Tokens a trainer counts that the lengths no longer show (truncated completions), for
#: ``token-mean``'s ``total_tokens``.
EXTRA_TOKENS = 5
#: A second batch stacked under the first (the weights' leading axes).
STACKED_LENGTHS = (2, 2, 7, 1, 1, 3, 4)
#: SkyRL's batch: eight answers to three prompts of 3, 2 and 3 answers, out of order; prompt 2's
#: answers hold no loss token (its count ``S_p = 0`` is clamped to 1).
PROMPT_LENGTHS = (1, 3, 0, 2, 2, 5, 0, 4)
PROMPT_IDS = (0, 1, 2, 0, 1, 0, 2, 2)


def _mask(lengths, width: int):
    import torch

    T = torch.as_tensor(np.asarray(lengths, dtype=np.int64))
    return (torch.arange(width)[None, :] < T[:, None]).to(torch.float64)  # (N, width)


def written_out_weights(mode: str, lengths, width: int, horizon=None, total_tokens=None):
    """``d loss / d x_it`` ``(N, width)`` of verl's reduction ``mode`` of a masked per-token
    loss ``x`` (autograd): the token sums' mean over sequences (``seq-mean-token-sum``), the masked
    sum over the batch's tokens, or over ``total_tokens`` (``token-mean``), the mean over
    sequences of each one's token mean (``seq-mean-token-mean``), and the token sums' sum over
    ``horizon`` (``seq-mean-token-sum-norm``)."""
    import torch

    mask = _mask(lengths, width)
    x = torch.ones_like(mask, requires_grad=True)
    per_token = x * mask
    if mode == "seq-mean-token-sum":
        loss = per_token.sum(dim=1).mean()
    elif mode == "token-mean":
        loss = per_token.sum() / (mask.sum() if total_tokens is None else float(total_tokens))
    elif mode == "seq-mean-token-mean":
        loss = (per_token.sum(dim=1) / mask.sum(dim=1)).mean()
    elif mode == "seq-mean-token-sum-norm":
        loss = per_token.sum() / float(horizon)
    else:
        raise ValueError(f"`mode` {mode!r} is not written out here")
    (grad,) = torch.autograd.grad(loss, x)
    return grad.numpy(), mask.numpy()


def prompt_mean_written_out(lengths, group_ids, width: int):
    """``d loss / d x_it`` ``(N, width)`` of SkyRL's ``prompt_mean``: each prompt's masked token
    sum over its tokens (at least 1), averaged over the prompts (autograd)."""
    import torch

    mask = _mask(lengths, width)
    ids = np.asarray(group_ids)
    x = torch.ones_like(mask, requires_grad=True)
    per_token = x * mask
    parts = []
    for prompt in np.unique(ids):
        rows = torch.as_tensor(np.flatnonzero(ids == prompt))
        parts.append(per_token[rows].sum() / torch.clamp(mask[rows].sum(), min=1.0))
    loss = torch.stack(parts).mean()
    (grad,) = torch.autograd.grad(loss, x)
    return grad.numpy(), mask.numpy()


@register("C60", "Beyond the paper: every loss reduction's per-completion weights are the "
          "framework's own arithmetic: verl's four loss_agg_mode values (token-mean with a "
          "trainer's token count too, on one batch and a stack of batches) and SkyRL's "
          "prompt_mean",
          "derived (docs/theory.md C60; section 2, the loss aggregations)",
          "aggregation_weights and prompt_mean_weights times the response mask against autograd "
          "on each masked per-token loss written out in torch, N = 7 answers padded to width 9, "
          "SkyRL's prompts of unequal sizes out of order, one with no loss token")
def check_c60(ctx) -> list:
    from ...frameworks.aggregation import AGGREGATIONS, aggregation_weights, prompt_mean_weights

    checks = []
    lengths = np.array(BATCH_LENGTHS)
    for mode in AGGREGATIONS:
        horizon = PADDED_WIDTH if mode == "seq-mean-token-sum-norm" else None
        grad, mask = written_out_weights(mode, lengths, PADDED_WIDTH, horizon)
        got = aggregation_weights(lengths, mode, horizon)
        checks.append(check_exact(f"{mode}: c_i x mask == d loss / d x_it, N = {lengths.size}, "
                                  f"width {PADDED_WIDTH}", grad, got[:, None] * mask,
                                  rtol=1e-12, atol=0.0, note="every token, padding included"))
    total = float(lengths.sum() + EXTRA_TOKENS)
    grad, mask = written_out_weights("token-mean", lengths, PADDED_WIDTH, total_tokens=total)
    checks.append(check_exact(f"token-mean over a trainer's {total:g} tokens ({EXTRA_TOKENS} the "
                              f"lengths do not show)", grad,
                              aggregation_weights(lengths, "token-mean", total_tokens=total)[:, None]
                              * mask, rtol=1e-12, atol=0.0))
    stacked = np.stack([lengths, np.array(STACKED_LENGTHS)])  # (2, N)
    for mode in AGGREGATIONS:
        horizon = PADDED_WIDTH if mode == "seq-mean-token-sum-norm" else None
        got = aggregation_weights(stacked, mode, horizon)  # (2, N)
        want = np.stack([written_out_weights(mode, row, PADDED_WIDTH, horizon)[0].sum(axis=1)
                         / row for row in stacked])
        checks.append(check_exact(f"{mode}: a stack of 2 batches, each its own reduction",
                                  want, got, rtol=1e-12, atol=0.0,
                                  note="each batch's statistics from its own row"))
    grad, mask = prompt_mean_written_out(PROMPT_LENGTHS, PROMPT_IDS, PADDED_WIDTH)
    got = prompt_mean_weights(PROMPT_LENGTHS, PROMPT_IDS)
    checks.append(check_exact("prompt_mean: c_i x mask == d loss / d x_it, prompts of 3, 2, 3 "
                              "answers out of order, one with no loss token", grad,
                              got[:, None] * mask, rtol=1e-12, atol=0.0))
    # negative controls: the same comparison rejects a reduction's weights in another's place
    wrong_mode = aggregation_weights(lengths, "token-mean")[:, None] * _mask(
        lengths, PADDED_WIDTH).numpy()
    grad_mean, _ = written_out_weights("seq-mean-token-mean", lengths, PADDED_WIDTH)
    batch_token_mean = mask / float(np.sum(PROMPT_LENGTHS))  # every token over the batch's
    rejected = [not check_exact("", grad_mean, wrong_mode, rtol=1e-12, atol=0.0).passed,
                not check_exact("", grad, batch_token_mean, rtol=1e-12, atol=0.0).passed]
    checks.append(check_true("negative controls: token-mean's weights for seq-mean-token-mean's, "
                             "and the batch token-mean for prompt_mean, are rejected",
                             all(rejected), float(sum(rejected)),
                             note="the answers differ in length, so the reductions differ"))
    return checks
