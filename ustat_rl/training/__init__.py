"""Training loops: the paper's Algorithm 1, std-normalised training, Algorithm 2, group-size
sweeps and transformer training.

* :mod:`.algorithm1`: :func:`train` (Algorithm 1 on any gradient oracle, set by an
  :class:`Algorithm1Config`), :class:`NoisyQuadratic`;
* :mod:`.std`: training with the std-normalised conventions (docs/theory.md C24-C26);
* :mod:`.algorithm2`: Algorithm 2 off policy (C27);
* :mod:`.group_size`: the group-size sweeps behind ``G*`` (C17-C19);
* :mod:`.batch_study`: batch-level conventions and dynamic sampling;
* :mod:`.transformer`: supervised warm-up and GRPO on the transformer policies (imports torch,
  so it is not imported here).

The names of :mod:`.algorithm1` are re-exported, so ``from ustat_rl.training import train`` works
as it did when training was one module.
"""

from .algorithm1 import (
    SCHEDULES,
    Algorithm1Config,
    NoisyQuadratic,
    TrainingResult,
    learning_rates,
    quadratic_expected_gap,
    run_generators,
    train,
)

__all__ = ["Algorithm1Config", "NoisyQuadratic", "TrainingResult", "train", "run_generators", "learning_rates",
           "quadratic_expected_gap", "SCHEDULES"]
