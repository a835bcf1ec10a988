"""Small transformer policies on a synthetic arithmetic task, on the moments contract.

The transformer analogue of the paper's experiments (docs/theory.md section 5, C5, C11, C17,
C18), organised by concept:

* :mod:`.task`: the arithmetic task, its tokenizer, verifier and splits;
* :mod:`.model`: :class:`TinyTransformer`, :class:`TransformerPolicy` (sampling, exact
  log-probabilities, ``vmap`` per-sample scores);
* :mod:`.checkpoints`: saving and loading policies, and the committed study policies
  :data:`POLICY_NAMES`;
* :mod:`.moments`: exact :class:`~ustat_rl.theory.PromptMoments` by enumerating every answer,
  so that :mod:`ustat_rl.theory` gives the exact MSEs, scaling constants and ``G*``;
* the Monte Carlo of squared errors (the independent route) is in
  :mod:`ustat_rl.montecarlo.transformer`, and supervised warm-up, GRPO training (Algorithm 1)
  and exact accuracies in :mod:`ustat_rl.training.transformer`: a policy does not import the
  layers that use it.

Importing this package imports torch; :mod:`ustat_rl.policies` does not import it.
"""

from .checkpoints import (
    POLICY_NAMES,
    TransformerArchitecture,
    load_policy,
    load_study_policy,
    new_policy,
    save_policy,
)
from .model import TinyTransformer, TransformerConfig, TransformerPolicy, resolve_device
from .moments import (
    AnswerTable,
    ConstantsInterval,
    Enumeration,
    answer_table,
    bootstrap_constants,
    enumerate_moments,
    exact_moments,
    value_gradients,
)
from .task import (
    ArithmeticSplits,
    ArithmeticTask,
    CharTokenizer,
    Question,
    make_splits,
    verify_answer,
)

__all__ = [
    "POLICY_NAMES",
    "AnswerTable",
    "answer_table",
    "ArithmeticSplits",
    "ArithmeticTask",
    "CharTokenizer",
    "ConstantsInterval",
    "Enumeration",
    "Question",
    "TinyTransformer",
    "TransformerArchitecture",
    "TransformerConfig",
    "TransformerPolicy",
    "bootstrap_constants",
    "enumerate_moments",
    "exact_moments",
    "load_policy",
    "load_study_policy",
    "make_splits",
    "new_policy",
    "resolve_device",
    "save_policy",
    "value_gradients",
    "verify_answer",
]
