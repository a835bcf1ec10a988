"""The verl adapter (ustat_rl.frameworks.verl_monitor) fed by verl's own objects, on the CPU.

Needs verl (the ``verl`` extra, in its own environment: verl 0.9.1 wants transformers
>=5.5.3,<5.11; constraints-verl.txt); those tests skip with the reason where verl is not importable, and the
one that holds the extra and constraints-verl.txt to the tested release runs everywhere. A step's
batch is verl's ``DataProto``, made as ``RayPPOTrainer.fit`` makes it: one ``uid`` per prompt,
``repeat(rollout.n, interleave=True)``, prompts left-padded and responses right-padded, the reward
on each response's last token, then the rows reordered as ``balance_batch`` reorders them.
verl's own ``compute_grpo_outcome_advantage`` runs on it and the model is a tiny Qwen2 built from
a transformers config.

Checks (exact unless a tolerance is stated): the adapter's record equals the entry
(:class:`WindowMonitor`) called by hand on rows grouped by hand and weighted by the gradient of
verl's own ``agg_loss``; each ``loss_agg_mode``'s weights equal that gradient (rtol 1e-6: verl
adds 1e-8 to each length in ``seq-mean-token-mean``); the rule the record names gives verl's own
advantages (atol 1e-6, float32). Negative controls: uids scrambled across groups give another
record; the weights of another mode differ from verl's gradient; a field removed is refused in
one line naming it.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from monitor_settings import monitor_config
from script_loader import ROOT

from ustat_rl.advantages import get_rule
from ustat_rl.frameworks.aggregation import AGGREGATIONS
from ustat_rl.frameworks.demo import VOCAB, tiny_family
from ustat_rl.frameworks.entry import WindowMonitor
from ustat_rl.frameworks.verl_monitor import (
    VERL_VERSIONS,
    VerlWindowMonitor,
    monitor_step,
    verl_rule,
    verl_step_inputs,
)

pytestmark = pytest.mark.fast

try:
    import verl
    from verl import DataProto
    from verl.trainer.ppo.core_algos import agg_loss, compute_grpo_outcome_advantage
except ImportError:
    verl = None

#: Every test but the packaging one runs verl's own code.
needs_verl = pytest.mark.skipif(verl is None, reason="verl is not installed (the verl extra, in "
                                "its own environment: constraints-verl.txt)")

B, G, P, T, K = 3, 4, 5, 6, 8  # prompts, rollout.n, prompt and response widths, sketch columns
OPTIONS = dict(every=1, sketch_dim=K, sketch_blocks=2, pool=1, chunk_size=4)


def _step_batch(seed: int, uids=None):
    """One step's DataProto, as verl's trainer holds it before update_actor."""
    rng = np.random.default_rng(seed)
    uids = [f"u{seed}-{i}" for i in range(B)] if uids is None else uids
    prompts = torch.zeros(B, P, dtype=torch.long)
    prompt_mask = torch.zeros(B, P, dtype=torch.long)
    for i in range(B):  # left-padded prompts of different lengths
        length = int(rng.integers(2, P + 1))
        prompts[i, P - length:] = torch.as_tensor(rng.integers(2, len(VOCAB), size=length))
        prompt_mask[i, P - length:] = 1
    batch = DataProto.from_dict(tensors={"prompts": prompts, "prompt_mask": prompt_mask},
                                non_tensors={"uid": np.array(uids, dtype=object)})
    batch = batch.repeat(repeat_times=G, interleave=True)  # as fit repeats by rollout.n
    n = B * G
    responses = torch.zeros(n, T, dtype=torch.long)
    response_mask = torch.zeros(n, T, dtype=torch.long)
    rewards = torch.zeros(n, T)
    for j in range(n):  # right-padded responses, the reward on the last token
        length = int(rng.integers(1, T + 1))
        responses[j, :length] = torch.as_tensor(rng.integers(2, len(VOCAB), size=length))
        response_mask[j, :length] = 1
        rewards[j, length - 1] = float(rng.integers(0, 3))
    batch.batch["responses"] = responses
    batch.batch["response_mask"] = response_mask
    batch.batch["attention_mask"] = torch.cat([batch.batch.pop("prompt_mask"), response_mask], 1)
    batch.batch["input_ids"] = torch.cat([batch.batch["prompts"], responses], 1)
    batch.batch["token_level_rewards"] = rewards
    advantages, _ = compute_grpo_outcome_advantage(
        token_level_rewards=rewards, response_mask=response_mask,
        index=batch.non_tensor_batch["uid"], norm_adv_by_std_in_grpo=True)
    batch.batch["advantages"] = advantages
    order = torch.as_tensor(rng.permutation(n))  # balance_batch's reordering, groups broken up
    return batch[order]


def _verl_weights(batch, mode: str) -> np.ndarray:
    """Each row's weight in verl's own aggregated loss: d agg_loss / d loss_mat at a response
    token, times n (the entry's w_i)."""
    mask = batch.batch["response_mask"].float()
    loss_mat = torch.zeros_like(mask, dtype=torch.float64, requires_grad=True)
    agg_loss(loss_mat, mask, mode).backward()
    first = mask.argmax(dim=1)  # every row has a token there
    grad = loss_mat.grad[torch.arange(mask.shape[0]), first].numpy()
    return grad * mask.shape[0]


def _by_hand(batch, mode: str) -> dict:
    """WindowMonitor.step's inputs built from the DataProto without the adapter: row by row,
    groups in order of first appearance, weights from verl's agg_loss."""
    uid = list(batch.non_tensor_batch["uid"])
    seen = []
    for u in uid:
        if u not in seen:
            seen.append(u)
    rows = [j for u in seen for j in range(len(uid)) if uid[j] == u]
    tensors = batch.batch
    weights = _verl_weights(batch, mode)
    return dict(prompt_ids=torch.stack([tensors["prompts"][j] for j in rows]),
                prompt_mask=torch.stack([tensors["attention_mask"][j, :P] for j in rows]),
                completion_ids=torch.stack([tensors["responses"][j] for j in rows]),
                completion_mask=torch.stack([tensors["response_mask"][j] for j in rows]),
                rewards=np.array([float(tensors["token_level_rewards"][j].sum()) for j in rows]),
                group_ids=np.array([uid[j] for j in rows]),
                loss_weights=weights[rows])


def _model():
    return tiny_family("qwen2", seed=0, hidden_size=16, intermediate_size=32,
                       num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)


@needs_verl
def test_the_installed_verl_is_a_tested_release():
    assert verl.__version__ in VERL_VERSIONS


def test_the_extra_and_the_constraints_pin_the_tested_release():
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11")
    from packaging.requirements import Requirement

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    extra = {Requirement(r).name: Requirement(r).specifier for r in extras["verl"]}
    pins = {}
    for line in (ROOT / "constraints-verl.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            requirement = Requirement(line)
            pins[requirement.name] = str(requirement.specifier)
    assert [str(s) for s in extra["verl"]] == [f"=={VERL_VERSIONS[0]}"]
    assert pins["verl"] == f"=={VERL_VERSIONS[0]}" and pins["torch"] == "==2.13.0"
    assert extra["transformers"].contains(pins["transformers"].lstrip("="))
    assert not extra["transformers"].contains("5.11.0")  # control: verl 0.9.1's upper bound


@needs_verl
def test_record_equals_the_entry_called_by_hand_and_scrambled_uids_differ():
    model = _model()
    batches = [_step_batch(seed) for seed in (11, 12)]
    adapter = VerlWindowMonitor(monitor_config(group_size=G, **OPTIONS),
                                loss_agg_mode="token-mean")
    by_hand = WindowMonitor(None, monitor_config(
        group_size=G, estimator="verl_grpo", estimator_source=verl_rule("grpo")[1],
        units=adapter.monitor.units, name="VerlWindowMonitor", **OPTIONS))
    for step, batch in enumerate(batches):
        record = adapter.step(batch, model, step=step)
        want = monitor_step(by_hand, model, _by_hand(batch, "token-mean"), step)
        assert record.ok and record.estimator == "verl_grpo"
        np.testing.assert_equal(record.to_dict(), want.to_dict())
    # negative control: the same rows with uids scrambled across groups (still G rows each)
    batch = batches[-1]
    scrambled = np.array(batch.non_tensor_batch["uid"])[np.roll(np.arange(B * G), 1)]
    batch.non_tensor_batch["uid"] = scrambled
    control = VerlWindowMonitor(monitor_config(group_size=G, **OPTIONS),
                                loss_agg_mode="token-mean").step(batch, model, step=1)
    assert control.ok
    assert control.c1.estimate != pytest.approx(record.c1.estimate, rel=1e-6)


@pytest.mark.parametrize("mode", AGGREGATIONS)
@needs_verl
def test_loss_weights_are_the_gradient_of_verls_agg_loss(mode):
    batch = _step_batch(21)
    inputs = verl_step_inputs(batch, G, mode)
    want = _by_hand(batch, mode)
    np.testing.assert_allclose(inputs["loss_weights"], want["loss_weights"], rtol=1e-6)
    for name in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask"):
        assert torch.equal(inputs[name], want[name]), name
    np.testing.assert_array_equal(inputs["rewards"], want["rewards"])
    other = AGGREGATIONS[(AGGREGATIONS.index(mode) + 1) % len(AGGREGATIONS)]
    assert not np.allclose(verl_step_inputs(batch, G, other)["loss_weights"],
                           want["loss_weights"], rtol=1e-3)  # negative control: another mode


@needs_verl
def test_a_given_loss_scale_factor_is_verls():
    batch = _step_batch(22)
    mask = batch.batch["response_mask"].float()
    loss_mat = torch.zeros_like(mask, dtype=torch.float64, requires_grad=True)
    agg_loss(loss_mat, mask, "seq-mean-token-sum-norm", loss_scale_factor=10).backward()
    want = loss_mat.grad.sum(dim=1).numpy() / mask.sum(dim=1).numpy() * mask.shape[0]
    order = np.argsort(np.argsort([list(dict.fromkeys(batch.non_tensor_batch["uid"])).index(u)
                                   for u in batch.non_tensor_batch["uid"]], kind="stable"),
                       kind="stable")
    got = verl_step_inputs(batch, G, "seq-mean-token-sum-norm", loss_scale_factor=10)
    np.testing.assert_allclose(got["loss_weights"][order], want, rtol=1e-12)
    default = verl_step_inputs(batch, G, "seq-mean-token-sum-norm")["loss_weights"]
    assert not np.allclose(default[order], want)  # control: the default is the width, T


@needs_verl
def test_the_named_rule_gives_verls_own_advantages():
    batch = _step_batch(31)
    inputs = verl_step_inputs(batch, G)
    ids = np.unique(inputs["group_ids"], return_inverse=True)[1]  # the rules take integer ids
    ours = get_rule(verl_rule("grpo", True)[0]).advantages(inputs["rewards"], ids)
    uid = batch.non_tensor_batch["uid"]
    verls = {}
    for j in range(B * G):
        verls.setdefault(uid[j], []).append(float(batch.batch["advantages"][j, 0]))
    want = np.concatenate([verls[u] for u in dict.fromkeys(inputs["group_ids"])])
    np.testing.assert_allclose(ours, want, atol=1e-6)
    nostd = get_rule(verl_rule("grpo", False)[0]).advantages(inputs["rewards"], ids)
    assert not np.allclose(nostd, want, atol=1e-3)  # negative control: another rule


@pytest.mark.parametrize("field", ["prompts", "responses", "attention_mask", "response_mask",
                                   "token_level_rewards", "uid"])
@needs_verl
def test_a_missing_field_is_refused_naming_it(field):
    batch = _step_batch(41)
    verl_step_inputs(batch, G)  # control: the whole batch is taken
    (batch.non_tensor_batch if field == "uid" else batch.batch).pop(field)
    with pytest.raises(ValueError, match=f"'{field}'"):
        verl_step_inputs(batch, G)


@needs_verl
def test_bad_settings_are_refused_naming_the_parameter():
    batch = _step_batch(51)
    with pytest.raises(ValueError, match="`loss_agg_mode`"):
        verl_step_inputs(batch, G, "token-sum")
    with pytest.raises(ValueError, match="`loss_scale_factor`"):
        verl_step_inputs(batch, G, "seq-mean-token-sum-norm", loss_scale_factor=0.0)
    with pytest.raises(ValueError, match="group_size=3"):
        verl_step_inputs(batch, 3)
    with pytest.raises(ValueError, match="`config.estimator` is read from verl's settings"):
        VerlWindowMonitor(monitor_config(group_size=G, estimator="grpo"))
    with pytest.raises(ValueError, match="`config.loss` is read from verl's settings"):
        VerlWindowMonitor(monitor_config(group_size=G, loss_type="dapo"))
    with pytest.raises(TypeError, match="`config`"):
        VerlWindowMonitor(G)
    with pytest.raises(TypeError, match="`batch`"):
        verl_step_inputs([1, 2], G)  # neither a DataProto nor a mapping of the fields
