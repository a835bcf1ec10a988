"""A bandit pilot's projection is its SketchSpec's (ustat_rl/scores/bandit.py).

The sketched pilot is the full pilot drawn from the same stream times the spec's own
``projection_matrix`` (its seed and kind, not the sampling stream's), to rounding; the metadata
names the spec; anything but a spec is refused naming ``sketch``. Negative control: another seed
gives another projection of the same samples.
"""

from __future__ import annotations

import numpy as np
import pytest

from ustat_rl.policies.examples import interior_optimum_bandit
from ustat_rl.scores.bandit import bandit_pilot
from ustat_rl.scores.sketch import projection_matrix
from ustat_rl.scores.spec import SketchSpec

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("kind", ["gaussian", "rademacher"])
def test_the_projection_is_the_specs(kind):
    bandit = interior_optimum_bandit()
    spec = SketchSpec(6, seed=11, kind=kind)
    full = bandit_pilot(bandit, 8, 4, np.random.default_rng(3))
    sketched = bandit_pilot(bandit, 8, 4, np.random.default_rng(3), sketch=spec)
    np.testing.assert_array_equal(sketched.reward, full.reward)  # the samples: the stream's
    R = projection_matrix(bandit.dim, spec)  # (k, d)
    np.testing.assert_allclose(sketched.score, full.score @ R.T, rtol=1e-12, atol=1e-15)
    assert (sketched.sketch_kind, sketched.sketch_seed, sketched.sketch_dim) == (kind, 11, 6)
    other = bandit_pilot(bandit, 8, 4, np.random.default_rng(3),
                         sketch=SketchSpec(6, seed=12, kind=kind))
    assert not np.allclose(other.score, sketched.score)  # negative control: another R


def test_a_loose_dimension_is_refused_naming_the_parameter():
    with pytest.raises(TypeError, match="^`sketch` must be a SketchSpec"):
        bandit_pilot(interior_optimum_bandit(), 8, 4, 0, sketch=6)
    with pytest.raises(TypeError, match="sketch_dim"):
        bandit_pilot(interior_optimum_bandit(), 8, 4, 0, sketch_dim=6)  # the old keyword
