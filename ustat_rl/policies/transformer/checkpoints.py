"""Checkpoints of transformer policies, and the three committed policies of the study.

A checkpoint (:func:`save_policy`, :func:`load_policy`) holds float32 weights, the architecture
and the decoding settings and loads with ``torch.load(weights_only=True)``; the three committed
warm-up policies are :data:`POLICY_NAMES` (:func:`load_study_policy`), made by
``simulations/make_transformer_policies.py``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ..._validation import as_int
from .model import TinyTransformer, TransformerConfig, TransformerPolicy, resolve_device

__all__ = ["POLICY_NAMES", "TransformerArchitecture", "load_policy", "load_study_policy", "new_policy", "save_policy"]

#: The committed warm-up checkpoints, weakest first (analogues of base, instruct, few-shot
#: instruct).
POLICY_NAMES = ("weak", "medium", "strong")
_CHECKPOINTS = Path(__file__).resolve().parents[2] / "data" / "transformer_policies"


def save_policy(policy: TransformerPolicy, path, **metadata) -> None:
    """Save weights (float32, CPU), architecture, decoding settings and ``metadata``."""
    state = {k: v.detach().to("cpu", torch.float32) for k, v in policy.model.state_dict().items()}
    torch.save({"config": asdict(policy.model.cfg), "state": state,
                "policy": {"prompt_width": policy.prompt_width,
                           "max_answer_len": policy.max_answer_len,
                           "temperature": policy.temperature},
                "metadata": dict(metadata)}, path)


def load_policy(path, device=None, dtype: torch.dtype = torch.float32,
                temperature: float | None = None) -> tuple[TransformerPolicy, dict]:
    """Load a policy saved by :func:`save_policy`; returns ``(policy, metadata)``."""
    blob = torch.load(path, map_location="cpu", weights_only=True)
    model = TinyTransformer(TransformerConfig(**blob["config"]))
    model.load_state_dict(blob["state"])
    model.to(device=resolve_device(device), dtype=dtype)
    settings = dict(blob["policy"])
    if temperature is not None:
        settings["temperature"] = temperature
    return TransformerPolicy(model, **settings), blob["metadata"]


@dataclass(frozen=True)
class TransformerArchitecture:
    """The size of a :class:`TinyTransformer` apart from its task (vocabulary, length).

    ``d_model`` (a multiple of ``n_heads``), ``n_layers``, ``n_heads`` and ``d_ff``, validated.
    """

    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 256

    def __post_init__(self):
        for name in ("d_model", "n_layers", "n_heads", "d_ff"):
            object.__setattr__(self, name, as_int(getattr(self, name), name, 1))
        if self.d_model % self.n_heads:
            raise ValueError(f"`d_model` = {self.d_model} must be a multiple of `n_heads` = "
                             f"{self.n_heads}")


_DEFAULT_ARCHITECTURE = TransformerArchitecture()


def new_policy(task, seed: int, *, architecture: TransformerArchitecture = _DEFAULT_ARCHITECTURE,
               temperature: float = 1.0, constrained: bool = True,
               max_new_tokens: int | None = None, device=None,
               dtype: torch.dtype = torch.float32) -> TransformerPolicy:
    """Freshly initialised policy for an :class:`~ustat_rl.policies.transformer.task.ArithmeticTask`.

    Weights are drawn from N(0, 0.02^2) (biases 0, layer norms 1) with a ``torch.Generator``
    seeded by ``seed``; global torch random state is untouched. ``architecture`` sets the
    network's size (:class:`TransformerArchitecture`).
    """
    seed = as_int(seed, "seed", 0)
    if not isinstance(architecture, TransformerArchitecture):
        raise TypeError(f"`architecture` must be a TransformerArchitecture, got "
                        f"{type(architecture).__name__}")
    n_new = task.max_answer_len + 1 if max_new_tokens is None else max_new_tokens
    a = architecture
    cfg = TransformerConfig(task.tokenizer.vocab_size, task.prompt_width + 1 + n_new,
                            a.d_model, a.n_layers, a.n_heads, a.d_ff)
    model = TinyTransformer(cfg)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.zero_()
            elif ".ln" in name or name.startswith("ln"):
                p.fill_(1.0)
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
    model.to(device=resolve_device(device), dtype=dtype)
    return TransformerPolicy(model, task.prompt_width, task.max_answer_len, temperature,
                             constrained, max_new_tokens)


def load_study_policy(name: str, device=None, dtype: torch.dtype = torch.float32):
    """Load one of :data:`POLICY_NAMES`; returns ``(policy, metadata)``."""
    if name not in POLICY_NAMES:
        raise ValueError(f"`name` must be one of {POLICY_NAMES}, got {name!r}")
    return load_policy(_CHECKPOINTS / f"{name}.pt", device=device, dtype=dtype)
