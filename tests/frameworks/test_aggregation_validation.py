"""Input errors of the loss aggregations name the parameter, at the boundaries of the rules.

Written for the survivors of the mutation round on ``ustat_rl/frameworks/aggregation.py``
(docs/mutation.md): the messages are matched, ``horizon`` is tried at 0 (rejected) and 1
(accepted), a batch of one response is valid, and a scalar ``lengths`` is rejected.
"""

import numpy as np
import pytest

from ustat_rl.frameworks.aggregation import aggregation_weights

pytestmark = pytest.mark.fast


def test_unknown_mode_is_named():
    with pytest.raises(ValueError, match=r"^`mode` must be one of .*, got 'token-sum'$"):
        aggregation_weights([1, 2], "token-sum")


def test_horizon_must_be_positive_and_one_is_allowed():
    with pytest.raises(ValueError, match=r"^`horizon` \(the constant L, e\.g\. the maximum "
                                         r"response length\) must be positive for mode "
                                         r"'seq-mean-token-sum-norm', got 0$"):
        aggregation_weights([1, 2], "seq-mean-token-sum-norm", horizon=0)
    np.testing.assert_array_equal(aggregation_weights([1, 1], "seq-mean-token-sum-norm", 1),
                                  [1.0, 1.0])


def test_one_response_is_a_batch_and_a_scalar_is_not():
    np.testing.assert_array_equal(aggregation_weights([3], "seq-mean-token-sum"), [1.0])
    with pytest.raises(ValueError, match=r"^`lengths` must be a non-empty array of lengths >= 1$"):
        aggregation_weights(3, "token-mean")
