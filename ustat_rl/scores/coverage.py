"""How each trainable parameter of a model is covered by the factored sketch (C31).

The factored sketch (:mod:`ustat_rl.scores.factored`) projects each sample's gradient from what a
forward hook sees of the module that owns the parameter (its inputs, its output and, in the
backward pass, the gradient of its output). Which formula applies depends on what the parameter
does there, never on the module's class name (:mod:`ustat_rl.scores.projectors` holds each
projector's test and formula together; this module applies them to a model):

* ``"linear"``: a matrix applied to the last axis of the input (``nn.Linear`` whose ``forward`` is
  ``nn.Linear``'s own, and Hugging Face's ``Conv1D``, the same map with the matrix stored
  transposed). The per-sample gradient ``sum_t u_t x_t^T`` is projected through its Kronecker
  factors without being formed.
* ``"embedding"``: rows of a table gathered by integer ids, times any scale that does not depend
  on the table (``nn.Embedding`` and subclasses such as Gemma's ``embed_scale`` embedding, checked
  at run time); ``padding_idx`` rows get no gradient, as in autograd.
* ``"elementwise"``: 1-D parameters of the output's width whose Jacobian is diagonal along the
  last axis: every normalisation's scale and shift (``LayerNorm``, ``RMSNorm`` in any family's
  spelling, Gemma's ``(1 + w)``). The diagonal is one forward-mode pass of the module alone,
  checked at run time against a random direction.
* ``"module"``: anything else, the general fallback: the exact per-sample gradient of the
  module's own parameters, recomputed sample by sample from its saved inputs and the gradient of
  its output, then projected. Exact for any module whose rows do not interact; cost: one extra
  forward and backward of that module per sample. :func:`uncovered_parameters` lists the
  parameters that take it.

An ``"elementwise"`` module whose run-time check fails is sketched through the fallback (still
exact); an ``"embedding"`` whose check fails is refused with one line.
"""

from __future__ import annotations

import torch

from . import projectors
from .sequence import trainable_parameters

__all__ = ["PROJECTOR_NAMES", "module_projectors", "parameter_coverage", "uncovered_parameters",
           "check_supported", "fully_sharded", "zero3_partitioned"]

#: The ways a parameter can enter the forward pass, fastest first; ``"module"`` is the fallback
#: (each projector's test and formula: :mod:`ustat_rl.scores.projectors`).
PROJECTOR_NAMES = tuple(projector.name for projector in projectors.PROJECTORS)


def own_trainable(module) -> list[tuple[str, torch.nn.Parameter]]:
    """``(attribute, parameter)`` of the module's own (not its children's) trainable tensors."""
    return [(name, p) for name, p in module._parameters.items()
            if p is not None and p.requires_grad]


def module_projectors(model) -> list[tuple]:
    """``(module, projector, [(attribute, parameter), ...])`` for every module owning trainable
    tensors, in ``model.modules()`` order."""
    out = []
    for module in model.modules():
        own = own_trainable(module)
        if own:
            out.append((module, projectors.projector_for(module, own).name, own))
    return out


def parameter_coverage(model) -> dict[str, str]:
    """``{name: projector}`` for every trainable parameter, by the projector's name (a tensor
    tied into two modules, as a tied language-model head, lists both names joined by ``"+"``).

    Examples
    --------
    >>> from torch import nn
    >>> parameter_coverage(nn.Sequential(nn.Embedding(5, 4), nn.LayerNorm(4), nn.Linear(4, 5)))
    {'0.weight': 'embedding', '1.weight': 'elementwise', '1.bias': 'elementwise', \
'2.weight': 'linear', '2.bias': 'linear'}
    """
    by_id: dict[int, list[str]] = {}
    for _, projector, own in module_projectors(model):
        for _, p in own:
            taken = by_id.setdefault(id(p), [])
            if projector not in taken:
                taken.append(projector)
    return {name: "+".join(by_id[id(p)]) for name, p in trainable_parameters(model).items()}


def uncovered_parameters(model) -> list[str]:
    """Names of trainable parameters that take the general fallback (``"module"``).

    They are still sketched exactly, at the cost of one extra forward and backward of their
    module per sample; an empty list means every parameter has a fast projector. A tensor used
    functionally outside the module that owns it is not detected (its use there is not seen).
    """
    return [name for name, projector in parameter_coverage(model).items() if "module" in projector]


def _fsdp_units(model) -> list:
    """The modules of ``model`` that FSDP2's ``fully_shard`` made units of sharding."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # a build of torch without distributed support
        return []
    return [module for module in model.modules() if isinstance(module, FSDPModule)]


def zero3_partitioned(model) -> bool:
    """Whether DeepSpeed ZeRO-3 partitions a parameter of ``model`` (marked ``ds_id``): then each
    module gathers its own parameters in a hook before its forward and frees them in a hook
    after it, and the sketch's hooks must run before that release."""
    return any(hasattr(p, "ds_id") for p in model.parameters())


def fully_sharded(model) -> bool:
    """Whether FSDP2's ``fully_shard`` made any module of ``model`` a unit of sharding, or
    DeepSpeed ZeRO-3 partitions its parameters: then every forward pass all-gathers parameters,
    a collective all its processes must join."""
    return bool(_fsdp_units(model)) or zero3_partitioned(model)


def check_supported(model) -> None:
    """Refuse, in one line, a model whose parameters the hooks cannot follow.

    Parameters sharded by FSDP2 (``fully_shard``, ``DTensor`` parameters) are supported: inside
    its forward a module holds them whole (all-gathered), which is what the projectors read, and the
    factors are drawn from the global shapes; a tensor the hook finds still sharded (a module
    that is itself a unit, resharded before the hook runs) is gathered. So are DeepSpeed
    ZeRO-3's partitioned parameters (marked ``ds_id``) of a model ``deepspeed.initialize`` set
    up: each module holds its own whole during its forward, where the hooks read them. Refused:
    FSDP1's flat parameters, ZeRO-3 parameters of a module without DeepSpeed's gather hooks
    (``deepspeed.zero.Init`` alone: empty on every process, nothing gathers them) and
    ``DTensor`` parameters outside any ``fully_shard`` unit (tensor parallelism)."""
    units = _fsdp_units(model)
    managed = {id(p) for unit in units for p in unit.parameters()}
    gathered = {id(p) for module in model.modules() if hasattr(module, "ds_id")
                for p in module.parameters(recurse=False)}  # modules DeepSpeed hooked
    for name, p in trainable_parameters(model).items():
        kind = type(p).__name__
        if "FlatParam" in kind:
            raise ValueError(f"`model`: parameter {name!r} is sharded by FSDP1 ({kind}); shard "
                             f"with FSDP2 (torch.distributed.fsdp.fully_shard) instead")
        if hasattr(p, "ds_id") and id(p) not in gathered:  # ZeRO-3 marks what it partitions
            raise ValueError(f"`model`: parameter {name!r} is partitioned by DeepSpeed ZeRO-3 "
                             f"but no DeepSpeed hook gathers it; sketch the module that "
                             f"deepspeed.initialize set up (engine.module)")
        if hasattr(p, "full_tensor") and id(p) not in managed:
            raise ValueError(f"`model`: parameter {name!r} is a {kind} outside any fully_shard "
                             f"unit (tensor parallelism?); the sketch supports FSDP2 sharding")
