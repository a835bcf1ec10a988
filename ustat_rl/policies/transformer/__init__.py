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
* :mod:`.sampling`: the Monte Carlo of squared errors through
  :func:`ustat_rl.montecarlo.run_monte_carlo`, the independent route;
* :mod:`.training`: supervised warm-up, GRPO training (Algorithm 1) and exact accuracies.

Importing this package imports torch; :mod:`ustat_rl.policies` does not import it.
"""

from .checkpoints import POLICY_NAMES, load_policy, load_study_policy, new_policy, save_policy
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
from .sampling import mc_squared_errors, squared_error_statistic
from .task import (
    ArithmeticSplits,
    ArithmeticTask,
    CharTokenizer,
    Question,
    make_splits,
    verify_answer,
)
from .training import (
    GRPORun,
    expected_accuracy,
    grpo_step_gradient,
    grpo_train,
    moderate_questions,
    question_values,
    supervised_warmup,
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
    "GRPORun",
    "Question",
    "TinyTransformer",
    "TransformerConfig",
    "TransformerPolicy",
    "bootstrap_constants",
    "enumerate_moments",
    "exact_moments",
    "expected_accuracy",
    "grpo_step_gradient",
    "grpo_train",
    "load_policy",
    "load_study_policy",
    "make_splits",
    "mc_squared_errors",
    "moderate_questions",
    "new_policy",
    "question_values",
    "resolve_device",
    "save_policy",
    "squared_error_statistic",
    "supervised_warmup",
    "value_gradients",
    "verify_answer",
]
