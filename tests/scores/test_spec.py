"""Specs drawn for pilots in a loop, and the pilots that take Gaussian specs only
(ustat_rl/scores/spec.py, ustat_rl/scores/transformer.py's population_pilot).

``drawn_spec`` gives each call a new seed from its stream (two draws differ; the same stream
again gives the same specs) and ``None`` for full scores. ``population_pilot`` projects the
isometric coordinates with a Gaussian matrix, exact in law only for Gaussian ``R``: another kind
is refused naming ``sketch``, before any sampling.
"""

from __future__ import annotations

import numpy as np
import pytest

from ustat_rl.scores.spec import SketchSpec, drawn_spec
from ustat_rl.scores.transformer import AnswerPopulation, population_pilot

pytestmark = pytest.mark.fast


def test_drawn_specs_are_new_for_each_draw_and_reproducible():
    rng = np.random.default_rng(5)
    first, second = drawn_spec(8, rng), drawn_spec(8, rng, kind="rademacher")
    assert first.seed != second.seed and second.kind == "rademacher" and first.dimension == 8
    again = np.random.default_rng(5)
    assert (drawn_spec(8, again), drawn_spec(8, again, kind="rademacher")) == (first, second)
    assert drawn_spec(None, rng) is None


def _population():
    return AnswerPopulation(prob=np.array([[0.5, 0.5], [0.25, 0.75]]),
                            reward=np.array([[1.0, 0.0], [0.0, 1.0]]),
                            embedding=np.eye(4).reshape(2, 2, 4), param_dim=4, model_name="toy")


def test_population_pilot_takes_a_gaussian_spec_only():
    pilot = population_pilot(_population(), 3, 4, 0, sketch=SketchSpec(2, seed=7))
    assert (pilot.score.shape, pilot.sketch_kind, pilot.sketch_seed) == ((12, 2), "gaussian", 7)
    with pytest.raises(ValueError, match="^`sketch` must be of kind 'gaussian'"):
        population_pilot(_population(), 3, 4, 0, sketch=SketchSpec(2, kind="rademacher"))
    with pytest.raises(TypeError, match="^`sketch` must be a SketchSpec"):
        population_pilot(_population(), 3, 4, 0, sketch=2)
