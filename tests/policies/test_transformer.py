"""Tests for the tiny transformer policy: sampling, log-probabilities and per-sample scores."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ustat_rl.advantages.gradients import grpo_gradient
from ustat_rl.policies.transformer import (
    POLICY_NAMES,
    TransformerArchitecture,
    load_policy,
    load_study_policy,
    new_policy,
    resolve_device,
    save_policy,
)
from ustat_rl.policies.transformer.task import EOS, PAD, ArithmeticTask, CharTokenizer, make_splits
from ustat_rl.training.transformer import (
    expected_accuracy,
    grpo_step_gradient,
    grpo_train,
    moderate_questions,
    question_values,
    supervised_warmup,
)

pytestmark = pytest.mark.fast

#: Frequencies vs probabilities: |f - p| <= Z sqrt(p(1-p)/n) fails with probability 6.3e-5 each.
Z = 4.0
TASK = ArithmeticTask(max_operand=3, max_factor=3, max_answer=9)  # one-digit answers: 11 outputs
SPLITS = make_splits(TASK, n_test=20, n_train=200, seed=0)


def tiny(seed=0, dtype=torch.float64, **kw):
    return new_policy(TASK, seed, architecture=TransformerArchitecture(16, 1, 2, 32),
                      device="cpu", dtype=dtype, **kw)


@pytest.fixture(scope="module")
def trained():
    policy = tiny(1)
    supervised_warmup(policy, SPLITS.train, 60, torch.Generator().manual_seed(0), batch_size=64)
    return policy


def test_device_resolution():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device().type == expected
    assert resolve_device("cpu").type == "cpu"
    assert tiny().device.type == "cpu"


def test_enumerated_probabilities_sum_to_one(trained):
    outputs = trained.enumerate_outputs()
    assert outputs.shape == (11, 2)
    prompts = trained.encode_prompts(SPLITS.test[:3])
    for i in range(3):
        logp = trained.log_prob(prompts[i:i + 1].expand(11, -1), outputs)
        assert abs(logp.exp().sum().item() - 1.0) < 1e-12


def test_vmap_scores_equal_backward_loop(trained):
    prompts = trained.encode_prompts(SPLITS.test[:4]).repeat(3, 1)
    answers = trained.sample(prompts, torch.Generator().manual_seed(5))
    fast = trained.scores(prompts, answers, chunk_size=5)
    slow = trained.scores_by_loop(prompts, answers)
    assert fast.shape == (12, trained.dim)
    assert torch.allclose(fast, slow, rtol=1e-10, atol=1e-12)
    # negative control: scores of different answers are not equal
    other = trained.scores(prompts, answers.flip(0))
    assert not torch.allclose(fast, other, atol=1e-6)


def test_score_identity_and_moments(trained):
    outputs = trained.enumerate_outputs()
    prompt = trained.encode_prompts(SPLITS.test[:1]).expand(len(outputs), -1)
    prob = trained.log_prob(prompt, outputs).exp().detach()
    scores = trained.scores(prompt, outputs)
    sq, weighted = trained.score_moments(prompt, outputs, torch.stack([prob, prob**2]), 4)
    assert torch.allclose(sq, (scores**2).sum(1), rtol=1e-12)
    assert torch.allclose(weighted[1], prob**2 @ scores, rtol=1e-10, atol=1e-14)
    # E[W | x] = 0; the unweighted sum is the negative control
    assert weighted[0].norm() < 1e-10 * scores.norm()
    assert scores.sum(0).norm() > 1e-3


def test_sampler_matches_enumerated_distribution(trained):
    outputs = trained.enumerate_outputs()
    prompt = trained.encode_prompts(SPLITS.test[:1])
    prob = trained.log_prob(prompt.expand(len(outputs), -1), outputs).exp().detach().numpy()
    n = 4000
    draws = trained.sample(prompt.expand(n, -1), torch.Generator().manual_seed(11))
    index = {tuple(row): k for k, row in enumerate(outputs.tolist())}
    freq = np.bincount([index[tuple(r)] for r in draws.tolist()], minlength=len(outputs)) / n
    tol = Z * np.sqrt(prob * (1 - prob) / n) + 1.0 / n
    assert np.all(np.abs(freq - prob) <= tol)
    # negative control: the same check rejects the distribution at another temperature
    hot = tiny(1)
    hot.model.load_state_dict(trained.model.state_dict())
    hot.temperature = 3.0
    prob_hot = hot.log_prob(prompt.expand(len(outputs), -1), outputs).exp().detach().numpy()
    assert not np.all(np.abs(freq - prob_hot) <= tol)


def test_temperature_scales_logits(trained):
    prompts = trained.encode_prompts(SPLITS.test[:2])
    answers = trained.answer_tokens(SPLITS.test[:2])
    logits = trained.model(torch.cat([prompts, answers], 1)[:, :-1])[:, prompts.shape[1] - 1:, :]
    allowed = torch.tensor([d for d in CharTokenizer().digit_ids] + [EOS])
    manual = 0.0
    for t in range(answers.shape[1]):
        if t == TASK.max_answer_len:  # forced <eos>: probability one
            continue
        lp = (logits[:, t, allowed] / 2.0).log_softmax(-1)
        pos = (allowed[None, :] == answers[:, t:t + 1]).float().argmax(1)
        manual = manual + lp.gather(1, pos[:, None])[:, 0] * (answers[:, t] != PAD)
    trained.temperature = 2.0
    try:
        assert torch.allclose(trained.log_prob(prompts, answers), manual, rtol=1e-12)
    finally:
        trained.temperature = 1.0


def test_seeded_sampling_reproducible(trained):
    prompts = trained.encode_prompts(SPLITS.test[:5]).repeat(4, 1)
    a = trained.sample(prompts, torch.Generator().manual_seed(3))
    b = trained.sample(prompts, torch.Generator().manual_seed(3))
    c = trained.sample(prompts, torch.Generator().manual_seed(4))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_free_decoding_truncation_scores_zero():
    policy = tiny(2, constrained=False, max_new_tokens=3)
    prompts = policy.encode_prompts(SPLITS.test[:4]).repeat(50, 1)
    answers = policy.sample(prompts, torch.Generator().manual_seed(0))
    truncated = ~(answers == EOS).any(1)
    assert truncated.any()  # an untrained free policy often never stops
    reward = policy.rewards(list(SPLITS.test[:4]) * 50, answers)
    assert np.all(reward[truncated.numpy()] == 0.0)
    with pytest.raises(ValueError, match="constrained"):
        policy.enumerate_outputs()
    with pytest.raises(ValueError, match="max_new_tokens"):
        tiny(0, constrained=True, max_new_tokens=4)


def test_bad_prompts_rejected(trained):
    with pytest.raises(ValueError, match="'x'"):
        trained.encode_prompts(["3x4="])
    with pytest.raises(ValueError, match="prompt_width"):
        trained.encode_prompts(["1+2+3+1+2+3+1="])
    with pytest.raises(ValueError, match="empty"):
        trained.encode_prompts([])
    with pytest.raises(TypeError, match="generator"):
        trained.sample(trained.encode_prompts(["1+1="]), generator=0)


def test_grpo_step_equals_estimator(trained):
    group_size = 4
    prompts = trained.encode_prompts(SPLITS.test[:3]).repeat_interleave(group_size, 0)
    answers = trained.sample(prompts, torch.Generator().manual_seed(8))
    reward = np.array([0, 1, 1, 0, 1, 0, 0, 0, 1, 1, 1, 0], float).reshape(3, group_size)
    step = torch.cat([g.reshape(-1) for g in grpo_step_gradient(trained, prompts, answers, reward)])
    scores = trained.scores(prompts, answers).numpy().reshape(3, group_size, -1)
    expected = grpo_gradient(scores, reward)
    assert np.allclose(step.numpy(), expected, rtol=1e-9, atol=1e-13)
    # negative control: the full-mean baseline gives a different (shrunk) direction
    assert not np.allclose(step.numpy(), expected * (group_size - 1) / group_size, atol=1e-9)


def test_grpo_train_validation_and_progress():
    policy = tiny(3)
    gen = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="group_size"):
        grpo_train(policy, SPLITS, 1, 8, 1, 0.1, gen)
    with pytest.raises(ValueError, match="divide"):
        grpo_train(policy, SPLITS, 3, 8, 1, 0.1, gen)
    run = grpo_train(policy, SPLITS, 4, 64, 4, 0.5, gen, eval_at=[2])
    assert list(run.iterations) == [0, 2, 4] and run.batch_size == 16
    assert run.test_accuracy[-1] == pytest.approx(expected_accuracy(policy, SPLITS.test))


def test_question_values_equal_enumeration(trained):
    outputs = trained.enumerate_outputs()
    q = SPLITS.test[2]
    prompt = trained.encode_prompts([q]).expand(len(outputs), -1)
    prob = trained.log_prob(prompt, outputs).exp().detach().numpy()
    reward = trained.rewards([q] * len(outputs), outputs)
    assert question_values(trained, [q])[0] == pytest.approx(prob @ reward, rel=1e-12)


def test_save_load_roundtrip(tmp_path, trained):
    save_policy(trained, tmp_path / "p.pt", name="t")
    loaded, meta = load_policy(tmp_path / "p.pt", device="cpu", dtype=torch.float64)
    assert meta == {"name": "t"}
    prompts = trained.encode_prompts(SPLITS.test[:3])
    answers = trained.answer_tokens(SPLITS.test[:3])
    # weights are stored in float32: agreement to float32 rounding
    assert torch.allclose(loaded.log_prob(prompts, answers), trained.log_prob(prompts, answers),
                          rtol=1e-5)


def test_study_policies_load_from_package_data():
    """The committed checkpoints ship as package data and carry their recorded accuracy."""
    for name in POLICY_NAMES:
        policy, meta = load_study_policy(name, device="cpu")
        assert meta["name"] == name and policy.dim == meta["n_params"]
    with pytest.raises(ValueError, match="name"):
        load_study_policy("huge")


def test_moderate_questions_selects_by_value(trained):
    values = question_values(trained, SPLITS.test)
    chosen = moderate_questions(trained, SPLITS.test, low=0.1, high=0.9)
    assert chosen == [q for q, v in zip(SPLITS.test, values) if 0.1 <= v <= 0.9]
    assert moderate_questions(trained, SPLITS.test, low=0.1, high=0.9, limit=1) == chosen[:1]
