"""Tests of pilots from a causal language model (ustat_rl/pilot/causal_lm.py, docs/theory.md
C31): scores equal an independent autograd loop over the whole-sequence log-probability,
padding after the end token does not count, projections match the materialised matrix, and the
pilot feeds the estimators. The model is a tiny randomly initialised GPT-2 built locally (no
download)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ustat_rl.pilot.causal_lm import causal_lm_log_prob, causal_lm_pilot, sample_answers
from ustat_rl.pilot.estimate import estimate_moments
from ustat_rl.pilot.sketch import torch_projection_matrix

transformers = pytest.importorskip("transformers", reason="the optional extra 'hf'")

EOS = 10


@pytest.fixture(scope="module")
def model():
    cfg = transformers.GPT2Config(vocab_size=11, n_positions=16, n_embd=8, n_layer=1, n_head=2,
                                  bos_token_id=1, eos_token_id=EOS, attn_implementation="eager")
    with torch.random.fork_rng():  # the initialisation leaves the global stream untouched
        torch.manual_seed(0)
        return transformers.GPT2LMHeadModel(cfg).double().eval()


def _reference_log_prob(model, prompt, answer):
    """log pi(answer | prompt) from the model's own forward pass, up to the end token."""
    tokens = torch.tensor(prompt + answer)[None]
    logp = torch.log_softmax(model(tokens).logits[0, :-1], dim=-1)
    stop = answer.index(EOS) + 1 if EOS in answer else len(answer)
    rows = torch.arange(len(prompt) - 1, len(prompt) - 1 + stop)
    return logp[rows, tokens[0, rows + 1]].sum()


def test_scores_equal_autograd_of_the_sequence_log_prob(model):
    prompt = torch.tensor([1, 2, 3])
    gen = torch.Generator().manual_seed(4)
    answers, mask = sample_answers(model, prompt, 5, 4, gen, eos_token_id=EOS)
    log_prob = causal_lm_log_prob(model, prompt)
    params = {n: p.detach() for n, p in model.named_parameters()}
    from ustat_rl.pilot.sketch import full_scores

    fast = full_scores(log_prob, params, (answers, mask.double()), chunk_size=2)
    for i in range(5):
        kept = [t for t, m in zip(answers[i].tolist(), mask[i].tolist()) if m]
        model.zero_grad()
        _reference_log_prob(model, [1, 2, 3], kept).backward()
        slow = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).numpy()
        assert np.allclose(fast[i], slow, rtol=1e-10, atol=1e-12)


def test_padding_after_the_end_token_does_not_count(model):
    prompt = torch.tensor([1, 2])
    log_prob = causal_lm_log_prob(model, prompt)
    params = {n: p.detach() for n, p in model.named_parameters()}
    mask = torch.tensor([1.0, 1.0, 0.0, 0.0], dtype=torch.float64)
    a = log_prob(params, (torch.tensor([4, EOS, 0, 0]), mask))
    b = log_prob(params, (torch.tensor([4, EOS, 7, 3]), mask))
    assert torch.equal(a, b)


def test_pilot_is_reproducible_projected_and_estimable(model):
    prompts = [[1, 2, 3], [1, 5], [1, 6, 7, 8]]

    def reward(i, answer):
        return float(7 in answer)

    kwargs = dict(group_size=4, max_new_tokens=3, seed=9, eos_token_id=EOS)
    full = causal_lm_pilot(model, prompts, reward, **kwargs)
    again = causal_lm_pilot(model, prompts, reward, **kwargs)
    sketched = causal_lm_pilot(model, prompts, reward, sketch_dim=5, **kwargs)
    assert np.array_equal(full.score, again.score) and np.array_equal(full.reward, again.reward)
    assert full.score.shape == (12, sum(p.numel() for p in model.parameters()))
    params = {n: p.detach() for n, p in model.named_parameters()}
    R = torch_projection_matrix(params, 5, sketched.sketch_seed)
    assert np.allclose(sketched.score, full.score @ R.T, rtol=1e-10, atol=1e-12)
    assert set(np.unique(full.reward)) <= {0.0, 1.0}
    assert estimate_moments(sketched).n_prompts == 3


def test_bad_input(model):
    with pytest.raises(ValueError, match="`group_size`"):
        causal_lm_pilot(model, [[1], [2]], lambda i, a: 0.0, 2, 3, seed=0)
    with pytest.raises(ValueError, match="`prompts`"):
        causal_lm_pilot(model, [[1]], lambda i, a: 0.0, 3, 3, seed=0)
    with pytest.raises(TypeError, match="`reward_fn`"):
        causal_lm_pilot(model, [[1], [2]], None, 3, 3, seed=0)
