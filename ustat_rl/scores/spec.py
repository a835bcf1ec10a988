"""The settings of a sketch of per-sample scores, in one object (section 7, C31).

A :class:`SketchSpec` says which random projection ``R`` a sketch applies and how the scores it
projects are computed: ``dimension`` rows ``k`` in ``blocks`` independent blocks, drawn from
``seed`` with entries of law ``kind``, projections in ``dtype``, scores of the policy at
``temperature``. It is checked once, when made, and then travels unchanged from the caller (the
monitors' :class:`~ustat_rl.frameworks.config.MonitorConfig`,
:func:`ustat_rl.scores.causal_lm.causal_lm_pilot`) into the sketch
(:func:`ustat_rl.scores.chunks.sketch_rows`, and every route's function: the factored, dense and
jvp sketches and their materialised matrices take a spec, as do the numpy projection of small
models' full scores, :func:`ustat_rl.scores.sketch.projection_matrix`, and the pilots drawn from
known policies, :func:`ustat_rl.scores.bandit.bandit_pilot` and
:func:`ustat_rl.scores.transformer.population_pilot`) and into the pilot file's metadata
(:meth:`SketchSpec.to_meta`, read back by :meth:`SketchSpec.from_meta`), whose key names
(``sketch_kind``, ``sketch_seed``, ``sketch_blocks``, ``sketch_route``) are the
:class:`~ustat_rl.pilot.rollouts.Rollouts` fields files have always carried.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from .._validation import as_float, as_int, as_rng
from ..pilot.rollouts import SKETCH_KINDS

__all__ = ["SketchSpec", "DEFAULT_SKETCH_BLOCKS", "FACTORED_KINDS", "check_kind", "as_spec",
           "drawn_spec"]

#: Independent blocks of a factored sketch unless told otherwise (fewer when ``dimension`` is
#: smaller): ``m - 1 = 15`` degrees of freedom for the projection part of the jackknife.
DEFAULT_SKETCH_BLOCKS = 16

#: Laws of the projection's entries (scaled to unit variance per row of ``R``): the pilot file's
#: sketch kinds (:data:`~ustat_rl.pilot.rollouts.SKETCH_KINDS`, the one list) but ``"none"``.
FACTORED_KINDS = tuple(kind for kind in SKETCH_KINDS if kind != "none")

#: Lowest temperature accepted (as the samplers accept).
_MIN_TEMPERATURE = 1e-3


def check_kind(kind, name: str = "kind") -> str:
    """``kind`` if it is a projection law of :data:`FACTORED_KINDS` (the one check); a
    ``ValueError`` naming ``name`` otherwise."""
    if kind not in FACTORED_KINDS:
        raise ValueError(f"`{name}` must be one of {FACTORED_KINDS}, got {kind!r}")
    return kind


def as_spec(spec, name: str = "spec"):
    """``spec`` if it is a :class:`SketchSpec`; a ``TypeError`` naming ``name`` otherwise."""
    if not isinstance(spec, SketchSpec):
        raise TypeError(f"`{name}` must be a SketchSpec (ustat_rl.scores.SketchSpec(k, seed, "
                        f"blocks=..., kind=...)), got {type(spec).__name__}")
    return spec


def _checked(values: dict, names: dict) -> dict:
    """``values`` of the fields, validated and normalised; errors name ``names[field]`` (the
    caller's own argument name) or the field."""
    def name(field):
        return names.get(field, field)

    dimension = as_int(values["dimension"], name("dimension"), 1)
    seed = as_int(values["seed"], name("seed"), 0)
    blocks = values["blocks"]
    blocks = min(DEFAULT_SKETCH_BLOCKS, dimension) if blocks is None else \
        as_int(blocks, name("blocks"), 1)
    if dimension % blocks:
        raise ValueError(f"`{name('blocks')}` ({blocks}) must divide `{name('dimension')}` "
                         f"({dimension}): independent blocks of equal size")
    kind = check_kind(values["kind"], name("kind"))
    dtype = values["dtype"]
    if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"`{name('dtype')}` must be a floating torch.dtype or None, got "
                        f"{dtype!r}")
    temperature = as_float(values["temperature"], name("temperature"), low=_MIN_TEMPERATURE)
    return dict(dimension=dimension, seed=seed, blocks=blocks, kind=kind, dtype=dtype,
                temperature=temperature)


@dataclass(frozen=True)
class SketchSpec:
    """Which projection a sketch applies, and to which scores.

    Parameters
    ----------
    dimension : int
        ``k``, rows of ``R`` (columns of the sketched scores).
    seed : int
        Seed of ``R``.
    blocks : int, optional
        ``m`` independent blocks of ``k/m`` rows (a factored sketch's Kronecker blocks); must
        divide ``dimension``. Default ``min(16, dimension)`` (:data:`DEFAULT_SKETCH_BLOCKS`).
    kind : {"gaussian", "rademacher"}
        Law of the projection's entries.
    dtype : torch.dtype, optional
        Precision of the projections and the result (default: the model's).
    temperature : float
        Sampling temperature of the policy whose scores are sketched.

    Examples
    --------
    >>> SketchSpec(64).blocks, SketchSpec(8).blocks
    (16, 8)
    >>> SketchSpec(64, seed=3).to_meta("factored")
    {'sketch_kind': 'gaussian', 'sketch_seed': 3, 'sketch_blocks': 16, 'sketch_route': 'factored'}
    """

    dimension: int
    seed: int = 0
    blocks: int | None = None
    kind: str = "gaussian"
    dtype: torch.dtype | None = None
    temperature: float = 1.0

    def __post_init__(self):
        for field, value in _checked(self._values(), {}).items():
            object.__setattr__(self, field, value)

    def _values(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def named(cls, names: dict, **values) -> SketchSpec:
        """The spec of ``values``, with errors naming the caller's arguments: ``names`` maps a
        field to the argument that carried it (``{"dimension": "sketch_dim"}``)."""
        defaults = {f.name: f.default for f in dataclasses.fields(cls)
                    if f.default is not dataclasses.MISSING}
        return cls(**_checked({**defaults, **values}, names))

    @property
    def block_dim(self) -> int:
        """``k/m``, rows of one block."""
        return self.dimension // self.blocks

    def to_meta(self, route: str = "factored") -> dict:
        """The pilot file's metadata of a sketch taken by ``route``: the blocks are recorded for
        the factored route only (the dense and jvp routes draw i.i.d. rows, one block each)."""
        return dict(sketch_kind=self.kind, sketch_seed=self.seed,
                    sketch_blocks=self.blocks if route == "factored" else None,
                    sketch_route=route)

    @classmethod
    def from_meta(cls, meta, dimension: int | None = None) -> SketchSpec | None:
        """The spec a pilot's metadata records (a :class:`Rollouts` or a dict of its fields),
        ``None`` for full scores. ``dimension`` defaults to the scores' columns of a
        ``Rollouts``; ``dtype`` and ``temperature`` are not recorded and take their defaults.
        A file without ``sketch_blocks`` (i.i.d. rows) gives one block per row."""
        if not isinstance(meta, dict):
            dimension = meta.sketch_dim if dimension is None else dimension
            meta = {key: getattr(meta, key) for key in ("sketch_kind", "sketch_seed",
                                                         "sketch_blocks")}
        kind = meta.get("sketch_kind", "none")
        if kind == "none":
            return None
        if dimension is None:
            raise ValueError("`dimension` is needed to read a sketch from a metadata dict")
        blocks = meta.get("sketch_blocks")
        seed = meta.get("sketch_seed")
        return cls(dimension=dimension, seed=0 if seed is None else seed, kind=kind,
                   blocks=dimension if blocks is None else blocks)


def drawn_spec(dimension, rng, **fields) -> SketchSpec | None:
    """A spec of a new projection, its seed drawn from ``rng`` (``None`` for ``dimension``
    ``None``: full scores).

    Pilots drawn in a loop each see their own ``R`` this way, as a projection's randomness is
    part of what their estimates average over; ``fields`` are the spec's others (``kind``, ...).

    Examples
    --------
    >>> import numpy as np
    >>> a, b = (drawn_spec(8, np.random.default_rng(0)) for _ in range(2))
    >>> a == b, a.seed == drawn_spec(8, np.random.default_rng(0)).seed, drawn_spec(None, 0)
    (True, True, None)
    """
    if dimension is None:
        return None
    return SketchSpec(dimension, seed=int(as_rng(rng).integers(2**31)), **fields)
