"""Per-sample scores of a model, full or sketched, and the pilots that record them (section 7).

A model (a causal language model, the synthetic transformer, a softmax bandit) becomes per-sample
scores ``W = grad log pi`` or their random projections ``R W`` (:class:`SketchSpec` says which
``R``): the dense reference (:mod:`.sketch`), the factored sketch taken by module hooks in one
backward pass, each parameter covered by the rule of what it does in the forward pass
(:mod:`.factored`, :mod:`.rules`, :mod:`.coverage`), the forward-mode one (:mod:`.forward_sketch`),
a window of rows a chunk at a time (:func:`sketch_rows`), and the pilots that record rewards and
scores as :class:`~ustat_rl.pilot.Rollouts` (:mod:`.causal_lm`, :mod:`.transformer`,
:mod:`.bandit`). This package needs ``torch``; the statistics on the result
(:mod:`ustat_rl.pilot`) do not.
"""

from .chunks import sketch_rows
from .spec import DEFAULT_SKETCH_BLOCKS, SketchSpec

__all__ = ["DEFAULT_SKETCH_BLOCKS", "SketchSpec", "sketch_rows"]
