"""TEST HARNESS: verl 0.9.1's own actor worker built on the CPU (gloo), for
tests/frameworks/test_verl_worker.py. Import it only in a child process: it changes
process-wide state (verl's platform, ``torch.cpu``).

verl 0.9.1 knows no CPU platform: its platform manager falls back to CUDA, whose
``init_device_mesh("cuda")`` fails on a CPU build of torch, and its engine registry holds the
FSDP engine for ``cuda`` and ``npu`` only. verl's own extension points get past both: a platform
registered with ``PlatformRegistry.register`` and chosen by ``VERL_PLATFORM``, and the engine
chosen by ``VERL_ENGINE_DEVICE``/``VERL_ENGINE_VENDOR``, which verl's ``EngineRegistry`` reads.
The platform below says ``cpu`` with ``gloo`` and answers the memory and device queries with
nothing; everything else (the worker, the FSDP2 engine, the loss, the optimizer) is verl's.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import torch

ENVIRONMENT = dict(VERL_PLATFORM="ustat_cpu_test", VERL_ENGINE_DEVICE="cuda",
                   VERL_ENGINE_VENDOR="nvidia")
os.environ.update(ENVIRONMENT)

from omegaconf import OmegaConf, open_dict  # noqa: E402
from verl.plugin.platform.platform_base import PlatformBase  # noqa: E402
from verl.plugin.platform.platform_manager import PlatformRegistry  # noqa: E402

_NOTHING = dict(memory_allocated=0, memory_reserved=0, max_memory_allocated=0,
                max_memory_reserved=0, mem_get_info=(0, 0), reset_peak_memory_stats=None,
                empty_cache=None)
for _name, _value in _NOTHING.items():  # verl logs these after each step
    if not hasattr(torch.cpu, _name):
        setattr(torch.cpu, _name, lambda *args, _value=_value, **kwargs: _value)


@PlatformRegistry.register(platform=ENVIRONMENT["VERL_PLATFORM"])
class CPUPlatform(PlatformBase):
    """The CPU as a verl platform: device ``cpu``, collectives by ``gloo``."""

    device_name = property(lambda self: "cpu")
    vendor_name = property(lambda self: "cpu")
    device_module = property(lambda self: torch.cpu)

    def is_available(self):
        return True

    def current_device(self):
        return "cpu"  # verl moves modules to ``current_device()``

    def device_count(self):
        return 1

    def set_device(self, device_index):
        pass

    def synchronize(self, device_index=None):
        pass

    def manual_seed(self, seed):
        torch.manual_seed(seed)

    manual_seed_all = manual_seed

    def set_allocator_settings(self, settings):
        pass

    def empty_cache(self):
        pass

    def get_device_capability(self, device_index=0):
        return (None, None)

    def communication_backend_name(self):
        return "gloo"

    def visible_devices_envvar(self):
        return "CPU_VISIBLE_DEVICES"

    @contextlib.contextmanager
    def nvtx_range(self, msg):
        yield

    def profiler_start(self):
        pass

    def profiler_stop(self):
        pass

    def ray_resource_name(self):
        return "CPU"

    def ray_noset_envvars(self):
        return []

    def is_ipc_supported(self):
        return False

    def cudart(self):
        return None


def actor_config(model_dir, group_size: int, rows: int, world: int):
    """verl's generated PPO config's ``actor_rollout_ref`` for a tiny model on the CPU: FSDP2 in
    float32 throughout, eager attention, no torch.compile, one mini-batch holding the step's
    ``rows`` (so the adapter's weights are the update's)."""
    import verl

    config = OmegaConf.load(Path(verl.__file__).parent / "trainer" / "config"
                            / "_generated_ppo_trainer.yaml")
    actor = config.actor_rollout_ref
    fp32 = {"param_dtype": "fp32", "reduce_dtype": "fp32", "buffer_dtype": "fp32"}
    with open_dict(config):
        actor.model.path = actor.model.tokenizer_path = str(model_dir)
        actor.model.override_config = {"attn_implementation": "eager"}
        actor.model.use_remove_padding = False
        actor.actor.strategy = "fsdp2"
        actor.actor.fsdp_config.mixed_precision = fp32
        actor.actor.fsdp_config.use_torch_compile = actor.actor.use_torch_compile = False
        actor.actor.ppo_mini_batch_size = rows // group_size
        actor.actor.ppo_micro_batch_size_per_gpu = rows // world
        actor.actor.optim.lr = 1e-2
        actor.rollout.n = group_size
        actor.rollout.log_prob_micro_batch_size_per_gpu = rows // world
    OmegaConf.resolve(config)
    return config.actor_rollout_ref


def update_meta(data, rows: int) -> None:
    """What the legacy trainer's ``_update_actor`` assigns to the batch before the call."""
    from verl.utils import tensordict_utils as tu

    tu.assign_non_tensor(data, calculate_entropy=False, distillation_use_topk=False,
                         distillation_only=False, global_batch_size=rows, mini_batch_size=rows,
                         epochs=1, seed=42, dataloader_kwargs={"shuffle": False},
                         compute_loss=True, temperature=1.0, multi_turn=False)
