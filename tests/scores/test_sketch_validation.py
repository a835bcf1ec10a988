"""Argument checking and the two laws of the dense projections (ustat_rl/scores/sketch.py).

Each kind gives its own entries (Gaussian: not all of size 1/sqrt(k); Rademacher: all of it),
on the numpy and the torch route, with the Gaussian as the default; the smallest legal sizes
work; "none" is not a random kind; messages name the parameter.
"""

import math
import re

import numpy as np
import pytest
import torch

from ustat_rl.scores.sketch import project_scores, projection_matrix, torch_projection_matrix
from ustat_rl.scores.spec import SketchSpec

pytestmark = pytest.mark.fast


def _is_sign_matrix(R, k):
    return np.allclose(np.abs(R), 1.0 / math.sqrt(k))


def test_each_kind_has_its_law_and_gaussian_is_the_default():
    k = 4
    assert _is_sign_matrix(projection_matrix(50, SketchSpec(k, 0, kind="rademacher")), k)
    assert not _is_sign_matrix(projection_matrix(50, SketchSpec(k, 0, kind="gaussian")), k)
    assert not _is_sign_matrix(projection_matrix(50, SketchSpec(k, 0)), k)  # default: Gaussian
    params = {"w": torch.zeros(5, 6), "b": torch.zeros(7)}
    assert _is_sign_matrix(torch_projection_matrix(params,
                                                   SketchSpec(k, 0, blocks=1, kind="rademacher")), k)
    assert not _is_sign_matrix(torch_projection_matrix(params,
                                                       SketchSpec(k, 0, blocks=1, kind="gaussian")), k)
    assert not _is_sign_matrix(torch_projection_matrix(params, SketchSpec(k, 0, blocks=1)), k)
    # E[R^T R] = I: the Gaussian entries have variance 1/k
    R = projection_matrix(20000, SketchSpec(k, 1))
    assert R.var() * k == pytest.approx(1.0, abs=0.05)  # 80,000 entries: se of the var 0.005


def test_smallest_sizes():
    assert projection_matrix(1, SketchSpec(1)).shape == (1, 1)
    assert project_scores(np.ones((2, 1)), SketchSpec(1)).shape == (2, 1)


@pytest.mark.parametrize("name, dim, k", [("dim", 0, 2), ("dimension", 3, 0)])
def test_sizes_are_named(name, dim, k):
    with pytest.raises(ValueError, match=rf"^`{name}` must be"):
        projection_matrix(dim, SketchSpec(k))


@pytest.mark.parametrize("kind", ["none", "sparse"])
def test_none_is_not_a_random_kind(kind):
    message = re.escape("`kind` must be one of ('gaussian', 'rademacher'), got ") + repr(kind)
    with pytest.raises(ValueError, match="^" + message):
        projection_matrix(3, SketchSpec(2, 0, kind=kind))
    with pytest.raises(ValueError, match="^" + message):
        torch_projection_matrix({"w": torch.zeros(2)}, SketchSpec(2, 0, kind=kind))


@pytest.mark.parametrize("shape", [(3,), (3, 0)])
def test_score_shape_is_checked(shape):
    with pytest.raises(ValueError, match=r"^`score` must have shape \(n, d\) with d >= 1, got "):
        project_scores(np.ones(shape), SketchSpec(2))


def _log_prob(params, sample):
    return (params["w"] * sample).sum()


@pytest.mark.parametrize("log_prob, params, message", [
    (None, {"w": torch.zeros(2)},
     "`log_prob` must be callable as log_prob(params, sample) -> scalar"),
    (_log_prob, {}, "`params` must be a non-empty dict of name -> torch.Tensor"),
    (_log_prob, [torch.zeros(2)], "`params` must be a non-empty dict of name -> torch.Tensor"),
    (_log_prob, {"w": np.zeros(2)}, "`params` entry 'w' must be a torch.Tensor, got ndarray")])
def test_policy_arguments_are_named(log_prob, params, message):
    from ustat_rl.scores.sketch import full_scores, sketch_scores

    samples = torch.ones(3, 2)
    with pytest.raises(TypeError, match="^" + re.escape(message) + "$"):
        full_scores(log_prob, params, samples)
    with pytest.raises(TypeError, match="^" + re.escape(message) + "$"):
        sketch_scores(log_prob, params, samples, SketchSpec(2, 0))


def test_a_valid_policy_is_scored():
    from ustat_rl.scores.sketch import full_scores

    samples = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_allclose(full_scores(_log_prob, {"w": torch.zeros(2)}, samples),
                               samples.numpy())
