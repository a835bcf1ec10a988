"""The verl hook (ustat_rl.frameworks.verl_worker): the adapter inside verl's actor worker.

Runs in the verl environment (the ``verl`` extra; constraints-verl.txt) and skips elsewhere with
the reason. Two workers take the hook:

* verl 0.9.1's own ``ActorRolloutRefWorker`` (role ``actor``, FSDP2, two gloo processes on the
  CPU), built from verl's generated PPO config with a tiny Qwen2 saved to a temporary folder;
  verl has no CPU platform, so tests/frameworks/verl_cpu.py registers one through verl's own
  ``PlatformRegistry`` (a TEST HARNESS, see there);
* a STAND-IN worker: a plain object with only the attributes the hook reads
  (``config.actor.strategy``/``loss_agg_mode``/``loss_scale_factor``,
  ``config.rollout.n``/``temperature``, ``actor.engine.module``/``get_data_parallel_group``/
  ``train_mode``), whose names are checked against verl's own classes and config by
  ``test_the_stand_in_reads_what_verls_worker_holds``; it runs where verl's worker does not
  import, and for the refusals.

The batch is made by verl's own functions as the legacy trainer's ``_update_actor`` makes it
(``DataProto.to_tensordict`` then ``left_right_2_no_padding``) and split as verl's dispatch
splits it (``chunk_tensordict``); ``balance_batch``'s reordering leaves no rank a whole group.

Checks (exact unless a tolerance is stated): the hooked stand-in's records equal
:class:`VerlWindowMonitor` called by hand on the same ``DataProto``, and the worker's own
``update_actor`` still runs on the unchanged batch; over two gloo processes, each given its
share, rank 0's and rank 1's records equal the one-process record (relative 1e-6 for the
stand-in, 1e-5 for verl's FSDP2 worker, whose sharded float32 sums run in another order), and
verl's update then moves the parameters exactly where verl's worker without the hook moves them. Negative controls: scrambled uids give another
record; another step's record is told apart at the same tolerance; a missing field gives a
skipped record naming it (training goes on); FSDP1 is refused in one line.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import socket
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from ustat_rl.frameworks.verl_monitor import VerlWindowMonitor

pytestmark = pytest.mark.fast

try:
    from monitor_settings import monitor_config
    from omegaconf import OmegaConf
    from test_verl_monitor import OPTIONS, B, G, _model, _step_batch
    from verl.utils.tensordict_utils import chunk_tensordict
    from verl.workers.utils.padding import left_right_2_no_padding

    from ustat_rl.frameworks import verl_worker

    #: B = 3 groups of G = 4 over 2 ranks: 4 and 8 rows, one chunk each at chunk_size 8 (at 4,
    #: one and two: fully_shard's ranks would sketch unequal passes; the window is skipped)
    REAL = dict(OPTIONS, chunk_size=8)
except ImportError:
    verl_worker = None

needs_verl = pytest.mark.skipif(verl_worker is None, reason="verl is not installed (the verl "
                                "extra, in its own environment: constraints-verl.txt)")


def _worker_batch(batch):
    """update_actor's TensorDict, as the legacy trainer's _update_actor makes it."""
    batch = batch[torch.arange(len(batch))]  # a copy: the DataProto stays as it was
    mask = batch.batch["attention_mask"]
    batch.batch["position_ids"] = (mask.cumsum(dim=1) - 1).clamp(min=0)
    return left_right_2_no_padding(batch.to_tensordict())


class StandInEngine:
    """STAND-IN for verl's FSDPEngine: the attributes the hook reads, nothing else."""

    def __init__(self, module, group=None):
        self.module, self.group, self.entered = module, group, 0

    def get_data_parallel_group(self):
        return self.group

    @contextlib.contextmanager
    def train_mode(self, **kwargs):
        self.entered += 1
        yield


class StandInWorker:
    """STAND-IN for verl's ActorRolloutRefWorker: ``config``, ``actor.engine`` and an
    ``update_actor`` that takes a fixed step on the parameters (so training moves them)."""

    def __init__(self, model, strategy="fsdp2", group=None):
        self.config = OmegaConf.create({
            "actor": {"strategy": strategy, "loss_agg_mode": "token-mean",
                      "loss_scale_factor": None},
            "rollout": {"n": G, "temperature": 1.0}})
        self.actor = SimpleNamespace(engine=StandInEngine(model, group))
        self.updates = []

    def update_actor(self, data):
        self.updates.append(sorted(data.keys()))
        _update(self.actor.engine.module)
        return "updated"


def _update(model):
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(0.9)


def _by_hand(batches, options=None):
    options = OPTIONS if options is None else options
    hand = VerlWindowMonitor(monitor_config(group_size=G, **options))
    model, records = _model(), []
    for step, batch in enumerate(batches):
        records.append(hand.step(batch, model, step=step))
        _update(model)
    return records


@needs_verl
def test_hooked_update_actor_records_as_the_adapter_by_hand_and_trains():
    batches = [_step_batch(seed) for seed in (61, 62)]
    want = _by_hand(batches)
    cls = verl_worker.monitored_worker(StandInWorker, monitor_config(**OPTIONS))
    worker = cls(_model())
    for batch in batches:
        data = _worker_batch(batch)
        keys = sorted(data.keys())
        assert worker.update_actor(data) == "updated"
        assert worker.updates[-1] == keys  # verl's update ran on the batch, unchanged
    got = worker._ustat_monitor.records
    assert [r.status for r in got] == ["ok", "ok"] and worker.actor.engine.entered == 2
    np.testing.assert_equal(got, want)
    # negative control: uids scrambled across groups (still G rows each) give another record
    batch = batches[0]
    batch.non_tensor_batch["uid"] = np.array(batch.non_tensor_batch["uid"])[
        np.roll(np.arange(B * G), 1)]
    control = cls(_model())
    control.update_actor(_worker_batch(batch))
    assert control._ustat_monitor.records[0].ok
    assert control._ustat_monitor.records[0].c1.estimate != pytest.approx(
        want[0].c1.estimate, rel=1e-6)


@needs_verl
def test_a_missing_field_is_a_skipped_window_and_training_goes_on():
    worker = verl_worker.monitored_worker(StandInWorker, monitor_config(**OPTIONS))(_model())
    data = _worker_batch(_step_batch(63))
    data.pop("token_level_rewards")
    with pytest.warns(UserWarning, match="token_level_rewards"):
        assert worker.update_actor(data) == "updated"
    record = worker._ustat_monitor.records[0]
    assert record.status == "skipped" and "'token_level_rewards'" in record.reason
    assert len(worker.updates) == 1


@needs_verl
def test_bad_settings_and_fsdp1_are_refused_in_one_line():
    with pytest.raises(ValueError, match="`config.group_size` is read from the verl worker"):
        verl_worker.monitored_worker(StandInWorker, monitor_config(group_size=G))
    with pytest.raises(ValueError, match="`config.sketch.temperature` is read from the verl"):
        verl_worker.monitored_worker(StandInWorker, monitor_config(temperature=0.7))
    with pytest.raises(ValueError, match="`every`"):
        verl_worker.monitored_worker(StandInWorker, monitor_config(every=0))
    with pytest.raises(TypeError, match="`base`"):
        verl_worker.monitored_worker(object)
    worker = verl_worker.monitored_worker(StandInWorker, monitor_config(**OPTIONS))(
        _model(), strategy="fsdp")
    with pytest.raises(ValueError, match="actor.strategy='fsdp2'.*got 'fsdp'"):
        worker.update_actor(_worker_batch(_step_batch(64)))
    assert worker.updates == []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank, world, port, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.set_num_threads(1)
        data = _worker_batch(_step_batch(66))
        share = chunk_tensordict(data, world)[rank]  # as verl's dispatch splits the batch
        worker = verl_worker.monitored_worker(StandInWorker, monitor_config(**OPTIONS))(
            _model(), group=torch.distributed.group.WORLD)
        worker.update_actor(share)
        torch.save(worker._ustat_monitor.records, Path(out) / f"rank{rank}.pt")
    finally:
        torch.distributed.destroy_process_group()


@needs_verl
def test_two_ranks_given_halves_record_what_one_process_records(tmp_path):
    torch.multiprocessing.spawn(_rank, args=(2, _free_port(), str(tmp_path)), nprocs=2)
    want = _by_hand([_step_batch(66)])[0]
    for rank in range(2):
        got = torch.load(tmp_path / f"rank{rank}.pt", weights_only=False)[0]
        assert got.ok
        _assert_close(got, want)
    # negative control: the same comparison tells another step's record apart
    with pytest.raises(AssertionError):
        _assert_close(got, _by_hand([_step_batch(67)])[0])


def _assert_close(got, want, where="record", rtol=1e-6):
    """Equal structure and text; numbers equal to relative ``rtol`` (NaN equal to NaN); window
    records are compared field by field through their trajectory lines."""
    if hasattr(want, "to_dict"):
        _assert_close(got.to_dict(), want.to_dict(), where, rtol)
    elif isinstance(want, dict):
        assert sorted(got) == sorted(want), where
        for key in want:
            _assert_close(got[key], want[key], f"{where}[{key!r}]", rtol)
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            _assert_close(g, w, f"{where}[{i}]", rtol)
    elif isinstance(want, (float, np.floating)):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=0, equal_nan=True, err_msg=where)
    else:
        assert got == want, where


def _verl_classes():
    """verl's own worker, engine and runners; skip, with the reason, where they do not import
    (verl 0.9.1's worker module imports fastapi, uvicorn and cachetools, which verl does not
    declare: the verl extra adds them)."""
    try:
        from verl.trainer import main_ppo, main_ppo_v0
        from verl.trainer.ppo.ray_trainer import Role
        from verl.workers.engine.fsdp.transformer_impl import FSDPEngine
        from verl.workers.engine_workers import ActorRolloutRefWorker, TrainingWorker
    except ImportError as exc:
        pytest.skip(f"verl's worker does not import here: {exc}")
    return SimpleNamespace(worker=ActorRolloutRefWorker, training=TrainingWorker,
                           engine=FSDPEngine, v0=main_ppo_v0, v1=main_ppo, Role=Role)


@needs_verl
def test_the_stand_in_reads_what_verls_worker_holds():
    verl = _verl_classes()
    assert "self.actor = self.actor_worker_cls(" in inspect.getsource(verl.worker.init_model)
    assert "self.config = config" in inspect.getsource(verl.worker.__init__)
    assert verl.worker.actor_worker_cls is verl.training
    assert "self.engine: BaseEngine = EngineRegistry.new(" in inspect.getsource(
        verl.training.__init__)
    assert "self.module = module" in inspect.getsource(verl.engine)
    for name in verl_worker.ENGINE_ATTRIBUTES[1:]:
        assert callable(getattr(verl.engine, name)), name
    # negative control: the older worker's attribute (fsdp_workers.py) is not in 0.9.1's
    assert "actor_module_fsdp" not in inspect.getsource(inspect.getmodule(verl.worker))
    config = OmegaConf.load(Path(inspect.getfile(verl.v1)).parent / "config"
                            / "_generated_ppo_trainer.yaml").actor_rollout_ref
    for key in ("actor.strategy", "actor.loss_agg_mode", "actor.loss_scale_factor", "rollout.n",
                "rollout.temperature"):
        assert OmegaConf.select(config, key, default="absent") != "absent", key
    assert OmegaConf.select(config, "actor.loss_type", default="absent") == "absent"  # control


@needs_verl
def test_the_monitored_worker_keeps_verls_dispatch_and_the_runners_install_it():
    from verl.single_controller.base.decorator import MAGIC_ATTR

    verl = _verl_classes()
    cls = verl_worker.monitored_worker(config=monitor_config(**OPTIONS))
    assert issubclass(cls, verl.worker)
    assert getattr(cls.update_actor, MAGIC_ATTR) == getattr(verl.worker.update_actor, MAGIC_ATTR)
    assert getattr(cls.compute_log_prob, MAGIC_ATTR) != getattr(cls.update_actor, MAGIC_ATTR)
    legacy = verl_worker.verl_task_runner(use_v1=False, config=monitor_config(**OPTIONS)).__ray_actor_class__
    assert issubclass(legacy, verl.v0.TaskRunner.__ray_actor_class__)
    config = OmegaConf.load(Path(inspect.getfile(verl.v1)).parent / "config"
                            / "_generated_ppo_trainer.yaml")
    runner = legacy()
    installed, _ = runner.add_actor_rollout_worker(config)
    assert issubclass(installed, verl.worker) and installed.__name__.startswith("Monitored")
    v1 = verl_worker.verl_task_runner(config=monitor_config(**OPTIONS)).__ray_actor_class__
    assert issubclass(v1, verl.v1.TaskRunnerV1.__ray_actor_class__)
    import ray  # the v1 trainer's mapping, as PPOTrainer._init_resource_pool_mgr builds it

    mapping = {verl.Role.ActorRollout: ray.remote(verl.worker),
               verl.Role.Critic: ray.remote(verl.training)}
    verl_worker._swap_workers(mapping, dict(config=monitor_config(**OPTIONS)))
    assert mapping[verl.Role.ActorRollout].__ray_actor_class__.__name__ == \
        "MonitoredActorRolloutRefWorker"
    assert mapping[verl.Role.Critic].__ray_actor_class__ is verl.training  # control: untouched


def _real_rank(rank, world, port, folder):
    """One rank of verl's own ActorRolloutRefWorker (FSDP2, gloo, CPU: tests/frameworks/
    verl_cpu.py), hooked, given its share of the step's batch by verl's own chunking."""
    import verl_cpu  # first: verl's platform is chosen at its first use

    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    # verl would ask for "cpu:gloo,cpu:gloo" (one backend per device type): give it the group
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.set_num_threads(1)
        from verl.workers.engine_workers import ActorRolloutRefWorker

        batch = _step_batch(71)
        rows = len(batch)
        # the ratio's denominator, as compute_log_prob would give it (a constant here: the test
        # checks the record and that verl's update runs, not the loss's value)
        batch.batch["old_log_probs"] = torch.full(batch.batch["responses"].shape, -1.0)
        data = _worker_batch(batch)
        verl_cpu.update_meta(data, rows)
        config = verl_cpu.actor_config(Path(folder) / "model", G, rows, world)
        worker = verl_worker.monitored_worker(ActorRolloutRefWorker, monitor_config(**REAL))(
            config, role="actor")
        worker.init_model()
        module = worker.actor.engine.module
        before = [p.full_tensor().detach().clone() for p in module.parameters()]
        output = worker.update_actor(chunk_tensordict(data, world)[rank])
        moved = sum(float((p.full_tensor().detach() - q).abs().sum())
                    for p, q in zip(module.parameters(), before))
        plain = ActorRolloutRefWorker(config, role="actor")  # verl's worker without the hook
        plain.init_model()
        plain.update_actor(chunk_tensordict(data, world)[rank])
        unchanged = all(torch.equal(p.full_tensor(), q.full_tensor()) for p, q in
                        zip(module.parameters(), plain.actor.engine.module.parameters()))
        torch.save(dict(records=worker._ustat_monitor.records, moved=moved, unchanged=unchanged,
                        module=type(module).__name__,
                        metrics=sorted(output["metrics"]) if output is not None else None),
                   Path(folder) / f"real{rank}.pt")
    finally:
        torch.distributed.destroy_process_group()


@needs_verl
def test_verls_own_worker_on_two_cpu_ranks_records_what_one_process_records(tmp_path):
    _verl_classes()  # skips, with the reason, where verl's worker does not import
    _model().save_pretrained(tmp_path / "model")
    torch.multiprocessing.spawn(_real_rank, args=(2, _free_port(), str(tmp_path)), nprocs=2)
    want = _by_hand([_step_batch(71)], REAL)[0]
    for rank in range(2):
        got = torch.load(tmp_path / f"real{rank}.pt", weights_only=False)
        assert got["module"].startswith("FSDP")  # fully_shard's class
        assert got["moved"] > 0  # verl's update ran after the hook and moved the parameters
        assert got["unchanged"]  # to exactly where verl's worker without the hook moves them
        record = got["records"][0]
        assert record.ok
        # relative 1e-5: the sharded model sums in float32 in another order (measured ~1e-7)
        _assert_close(record, want, rtol=1e-5)
    with pytest.raises(AssertionError):  # negative control: another step's record is told apart
        _assert_close(record, _by_hand([_step_batch(72)], REAL)[0], rtol=1e-5)
    assert "actor/pg_loss" in torch.load(tmp_path / "real0.pt", weights_only=False)["metrics"]


def test_without_verl_the_hook_is_refused_in_one_line():
    from ustat_rl.frameworks import monitored_worker, verl_task_runner

    try:
        import verl.workers.engine_workers  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("verl's worker imports here: the refusal is for where it does not")
    for build in (monitored_worker, verl_task_runner):
        with pytest.raises(ImportError, match="the `verl` extra") as refused:
            build()
        assert "\n" not in str(refused.value)
