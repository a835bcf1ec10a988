"""Tests of pilots from a causal language model (ustat_rl/scores/causal_lm.py, docs/theory.md
C31): scores equal an independent autograd loop over the whole-sequence log-probability,
padding after the end token does not count, the cached sampler draws the uncached answers, every
projection route matches its materialised matrix on the same answers, ``auto`` picks the factored
route exactly when the hooks cover the model, and the pilot feeds the estimators. The model is a
tiny randomly initialised GPT-2 built locally (no download)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ustat_rl.pilot.estimate import estimate_moments
from ustat_rl.scores.causal_lm import (
    Sampling,
    causal_lm_log_prob,
    causal_lm_pilot,
    sample_answers,
)
from ustat_rl.scores.factored import factored_projection_matrix
from ustat_rl.scores.forward_sketch import jvp_projection_matrix
from ustat_rl.scores.sketch import torch_projection_matrix
from ustat_rl.scores.spec import SketchSpec

pytestmark = pytest.mark.fast

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
    answers, mask = sample_answers(model, prompt, Sampling(5, 4, eos_token_id=EOS), gen)
    log_prob = causal_lm_log_prob(model, prompt)
    params = {n: p.detach() for n, p in model.named_parameters()}
    from ustat_rl.scores.sketch import full_scores

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

    kwargs = dict(sampling=Sampling(4, 3, seed=9, eos_token_id=EOS))
    full = causal_lm_pilot(model, prompts, reward, **kwargs)
    again = causal_lm_pilot(model, prompts, reward, **kwargs)
    sketched = causal_lm_pilot(model, prompts, reward, sketch=SketchSpec(5, 1), route="dense",
                               **kwargs)
    assert np.array_equal(full.score, again.score) and np.array_equal(full.reward, again.reward)
    assert full.score.shape == (12, sum(p.numel() for p in model.parameters()))
    params = {n: p.detach() for n, p in model.named_parameters()}
    R = torch_projection_matrix(params, SketchSpec(5, sketched.sketch_seed))
    assert np.allclose(sketched.score, full.score @ R.T, rtol=1e-10, atol=1e-12)
    assert set(np.unique(full.reward)) <= {0.0, 1.0}
    assert estimate_moments(sketched).n_prompts == 3
    assert (full.sketch_route, sketched.sketch_route) == ("full", "dense")
    assert sketched.sketch_blocks is None


def test_cached_sampler_draws_the_uncached_answers(model):
    prompt = torch.tensor([1, 2, 3])
    draws = [sample_answers(model, prompt, Sampling(6, 5, eos_token_id=EOS, use_cache=cache),
                            torch.Generator().manual_seed(2)) for cache in (True, False)]
    assert torch.equal(draws[0][0], draws[1][0]) and torch.equal(draws[0][1], draws[1][1])
    assert not model.training


def test_every_route_matches_its_matrix_on_the_same_answers(model):
    prompts = [[1, 2, 3], [1, 5], [1, 6, 7, 8]]

    def reward(i, answer):  # an injective code of the answer: equal rewards, equal answers
        return float(sum(t * 11**j for j, t in enumerate(answer)) + 11 ** len(answer))

    kwargs = dict(sampling=Sampling(4, 3, seed=5, eos_token_id=EOS), chunk_size=3)
    full = causal_lm_pilot(model, prompts, reward, **kwargs)
    auto = causal_lm_pilot(model, prompts, reward, sketch=SketchSpec(12, 1, blocks=3),
                           **kwargs)
    jvp = causal_lm_pilot(model, prompts, reward, sketch=SketchSpec(6, 1), route="jvp", **kwargs)
    assert (auto.sketch_route, auto.sketch_blocks, jvp.sketch_route) == ("factored", 3, "jvp")
    assert np.array_equal(auto.reward, full.reward) and np.array_equal(jvp.reward, full.reward)
    R = factored_projection_matrix(model, SketchSpec(12, auto.sketch_seed, blocks=3))
    assert np.allclose(auto.score, full.score @ R.T, rtol=1e-10, atol=1e-12)
    assert np.array_equal(auto.column_groups(), np.repeat(np.arange(3), 4))
    R = jvp_projection_matrix(model, SketchSpec(6, jvp.sketch_seed))
    assert np.allclose(jvp.score, full.score @ R.T, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="`blocks`"):
        causal_lm_pilot(model, prompts, reward, sketch=SketchSpec(12, 1, blocks=5), **kwargs)


class _Offset(torch.nn.Module):
    """A causal LM with a parameter outside its layers (a free logit offset of the top module)."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(11, 4)
        self.head = torch.nn.Linear(4, 11)
        self.offset = torch.nn.Parameter(torch.zeros(11))

    def forward(self, tokens):
        return self.head(torch.tanh(self.embed(tokens))) + self.offset


def test_auto_route_is_factored_and_exact_for_a_parameter_outside_the_layers():
    """The offset is covered by what it does (an elementwise shift of the logits), so the auto
    route is the factored one, and it equals the full scores times its matrix."""
    from ustat_rl.scores.coverage import parameter_coverage

    with torch.random.fork_rng():
        torch.manual_seed(1)
        net = _Offset().double()
    with torch.no_grad():
        net.offset.normal_()
    assert parameter_coverage(net)["offset"] == "elementwise"
    kwargs = dict(prompts=[[1, 2], [3, 4]], reward_fn=lambda i, a: float(a[0] % 2),
                  sampling=Sampling(3, 2))
    out = causal_lm_pilot(net, sketch=SketchSpec(4, 1, blocks=2), **kwargs)
    full = causal_lm_pilot(net, **kwargs)
    assert out.sketch_route == "factored" and out.sketch_blocks == 2
    R = factored_projection_matrix(net, SketchSpec(4, out.sketch_seed, blocks=2))
    assert np.allclose(out.score, full.score @ R.T, rtol=1e-10, atol=1e-12)


def test_bad_input(model):
    with pytest.raises(ValueError, match="`group_size`"):
        causal_lm_pilot(model, [[1], [2]], lambda i, a: 0.0, Sampling(2, 3))
    with pytest.raises(ValueError, match="`prompts`"):
        causal_lm_pilot(model, [[1]], lambda i, a: 0.0, Sampling(3, 3))
    with pytest.raises(TypeError, match="`reward_fn`"):
        causal_lm_pilot(model, [[1], [2]], None, Sampling(3, 3))
    with pytest.raises(ValueError, match="`route`"):
        causal_lm_pilot(model, [[1], [2]], lambda i, a: 0.0, Sampling(3, 3), SketchSpec(8),
                        route="sparse")
    with pytest.raises(TypeError, match="`sampling`"):  # loose settings are refused
        causal_lm_pilot(model, [[1], [2]], lambda i, a: 0.0, 3)
    with pytest.raises(TypeError, match="`sketch`"):
        causal_lm_pilot(model, [[1], [2]], lambda i, a: 0.0, Sampling(3, 3), 8)
    with pytest.raises(ValueError, match="`sketch.temperature`"):
        causal_lm_pilot(model, [[1], [2]], lambda i, a: 0.0, Sampling(3, 3, temperature=0.7),
                        SketchSpec(8))
    with pytest.raises(ValueError, match="`max_new_tokens`"):
        Sampling(3, 0)
