"""SkyRL's ``prompt_mean`` loss reduction (ustat_rl.frameworks.aggregation.prompt_mean_weights).

* The weights equal SkyRL's own scaling (its ``apply_loss_reduction_to_advantages_minibatch``,
  extracted to tests/data at the commit cited there) to 1e-12 in float64, on ragged responses
  and prompts of unequal token counts; negative control: the batch ``token-mean`` scaling of the
  same function differs.
* The exact mean of the estimator over a batch of two prompts, by enumerating every pair of
  groups, equals the average over prompts of ``exact_aggregation_mean`` in ``token-mean`` mode
  (the identity the module states) to 1e-12; negative control: the batch ``token-mean``
  weights' exact mean differs from it, since the prompts' answers differ in length.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from script_loader import load_data

from ustat_rl.advantages.conventions import advantages
from ustat_rl.frameworks.aggregation import (
    aggregation_weights,
    exact_aggregation_mean,
    prompt_mean_weights,
)

pytestmark = pytest.mark.fast


def _skyrl_weights(lengths, prompt_sizes, reduction="prompt_mean", width=5):
    """``c_i``: SkyRL's scaled advantage on a loss token of answer ``i``, for advantage 1."""
    skyrl = load_data("skyrl_loss_reduction_a9564572")
    T = np.asarray(lengths)
    mask = torch.as_tensor((np.arange(width)[None, :] < T[:, None]).astype(np.float64))
    ends = np.cumsum(prompt_sizes)
    bounds = list(zip((ends - np.asarray(prompt_sizes)).tolist(), ends.tolist()))
    out = skyrl.apply_loss_reduction_to_advantages_minibatch(
        torch.ones_like(mask), mask, reduction, micro_batch_size=T.size, max_seq_len=width,
        prompt_boundaries=bounds)
    return out[:, 0].numpy()  # every answer has at least one token, its first


def test_weights_equal_skyrls_own_scaling():
    rng = np.random.default_rng(53)
    for _ in range(5):
        sizes = rng.integers(1, 5, size=3)
        T = rng.integers(1, 6, size=int(sizes.sum()))
        ids = np.repeat(np.arange(3), sizes)
        ours = prompt_mean_weights(T, ids)
        np.testing.assert_allclose(ours, _skyrl_weights(T, sizes), rtol=1e-12, atol=0)
        # the order of the samples does not matter, only their prompt
        order = rng.permutation(T.size)
        np.testing.assert_allclose(prompt_mean_weights(T[order], ids[order]), ours[order],
                                   rtol=1e-15)
        # negative control: SkyRL's token_mean weighs the prompts by their tokens
        token_mean = _skyrl_weights(T, sizes, "token_mean")
        np.testing.assert_allclose(token_mean, aggregation_weights(T, "token-mean"), rtol=1e-12)
        assert not np.allclose(ours, token_mean, rtol=1e-6)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="lengths"):
        prompt_mean_weights([1, -1], [0, 0])
    with pytest.raises(ValueError, match="group_ids"):
        prompt_mean_weights([1, 2], [0, 0, 1])


def _prompt(seed, lengths):
    rng = np.random.default_rng(seed)
    prob = rng.dirichlet(np.ones(len(lengths)))
    reward = np.array([1, 0, 1, 0][:len(lengths)], dtype=float)
    scores = rng.normal(size=(len(lengths), 3))
    return prob, reward, np.asarray(lengths), scores - prob @ scores


def test_exact_mean_is_the_prompts_token_means_averaged():
    G = 2
    prompts = [_prompt(1, [1, 1, 3, 2]), _prompt(2, [3, 4, 1, 4])]  # unequal lengths
    groups = [list(itertools.product(range(4), repeat=G)) for _ in prompts]
    ids = np.repeat([0, 1], G)
    mean_pm, mean_tm = np.zeros(3), np.zeros(3)
    for pick0, pick1 in itertools.product(*groups):
        picks = (pick0, pick1)
        prob = np.prod([prompts[p][0][list(pk)].prod() for p, pk in enumerate(picks)])
        z = np.concatenate([prompts[p][1][list(pk)] for p, pk in enumerate(picks)])
        T = np.concatenate([prompts[p][2][list(pk)] for p, pk in enumerate(picks)])
        W = np.concatenate([prompts[p][3][list(pk)] for p, pk in enumerate(picks)])
        A = advantages("grpo", z, ids)
        mean_pm += prob * (prompt_mean_weights(T, ids) * A) @ W
        mean_tm += prob * (aggregation_weights(T, "token-mean") * A) @ W
    expected = np.mean([exact_aggregation_mean(*p, "grpo", G, "token-mean") for p in prompts],
                       axis=0)
    np.testing.assert_allclose(mean_pm, expected, rtol=1e-12, atol=1e-14)
    # negative control: the batch token-mean couples the prompts and misses the identity
    assert np.max(np.abs(mean_tm - expected)) > 1e-3 * np.max(np.abs(expected))
