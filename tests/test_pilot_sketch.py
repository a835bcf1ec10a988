"""Tests of projected per-sample scores (ustat_rl/pilot/sketch.py, docs/theory.md C31).

The torch route is checked against full per-sample gradients of a tiny softmax policy (an
independent autograd loop) and against its own projection matrix materialised; unbiasedness of
projected inner products is a Monte Carlo check with ``Z_CHECK`` = 4 standard errors (two-sided
false-failure rate 6.3e-5 per comparison, 4 comparisons), with an unscaled projection as the
negative control.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ustat_rl.pilot.sketch import (
    full_scores,
    project_scores,
    projection_matrix,
    sketch_scores,
    torch_projection_matrix,
)
from ustat_rl.tolerances import Z_CHECK

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _policy(device="cpu"):
    gen = torch.Generator().manual_seed(0)
    params = {"weight": torch.randn(5, 4, generator=gen, dtype=torch.float64),
              "bias": torch.randn(4, generator=gen, dtype=torch.float64)}
    params = {name: value.to(device) for name, value in params.items()}
    context = torch.randn(13, 5, generator=gen, dtype=torch.float64).to(device)
    action = torch.randint(0, 4, (13,), generator=gen).to(device)

    def log_prob(p, sample):
        x, a = sample
        logp = torch.log_softmax(x @ p["weight"] + p["bias"], dim=-1)
        return logp.gather(-1, a.reshape(1)).squeeze(-1)  # vmap-safe indexing

    return log_prob, params, (context, action)


def _autograd_loop(log_prob, params, samples):
    rows = []
    for i in range(samples[0].shape[0]):
        leaves = {name: value.clone().requires_grad_(True) for name, value in params.items()}
        out = log_prob(leaves, (samples[0][i], samples[1][i]))
        grads = torch.autograd.grad(out, list(leaves.values()))
        rows.append(torch.cat([g.reshape(-1) for g in grads]).cpu().numpy())
    return np.stack(rows)


@pytest.mark.parametrize("device", DEVICES)
def test_full_scores_equal_an_autograd_loop(device):
    log_prob, params, samples = _policy(device)
    fast = full_scores(log_prob, params, samples, chunk_size=4)
    assert fast.shape == (13, 24)
    assert np.allclose(fast, _autograd_loop(log_prob, params, samples), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["gaussian", "rademacher"])
def test_sketch_equals_full_scores_times_its_matrix(device, kind):
    log_prob, params, samples = _policy(device)
    full = full_scores(log_prob, params, samples)
    # column_chunk 7 splits both parameter tensors into several regenerated blocks
    R = torch_projection_matrix(params, 6, seed=3, kind=kind, column_chunk=7)  # (k, d)
    for chunk_size in (1, 5, 64):
        sketch = sketch_scores(log_prob, params, samples, 6, seed=3, kind=kind,
                               chunk_size=chunk_size, column_chunk=7)
        assert np.allclose(sketch, full @ R.T, rtol=1e-12, atol=1e-12)
    other = sketch_scores(log_prob, params, samples, 6, seed=4, kind=kind, column_chunk=7)
    assert not np.allclose(other, full @ R.T)


def _inner_product_z(matrices, a, b, scale=1.0):
    values = np.array([(scale * R @ a) @ (scale * R @ b) for R in matrices])
    return (values.mean() - a @ b) / (values.std(ddof=1) / np.sqrt(values.size))


@pytest.mark.parametrize("kind", ["gaussian", "rademacher"])
def test_projected_inner_products_are_unbiased(kind):
    rng = np.random.default_rng(11)
    a = rng.normal(size=24)
    b = a + rng.normal(size=24)  # <a, b> far from 0, so a wrong scale shows
    params = {"weight": torch.zeros(5, 4), "bias": torch.zeros(4)}
    torch_R = [torch_projection_matrix(params, 4, seed=s, kind=kind, column_chunk=7)
               for s in range(2000)]
    numpy_R = [projection_matrix(24, 4, rng, kind) for _ in range(2000)]
    for matrices in (torch_R, numpy_R):
        assert abs(_inner_product_z(matrices, a, b)) <= Z_CHECK
        # negative control: without the 1/sqrt(k) scale E[R^T R] = k I
        assert abs(_inner_product_z(matrices, a, b, scale=2.0)) > Z_CHECK


def test_project_scores_shape_and_bad_input():
    assert project_scores(np.ones((3, 5)), 2, rng=0).shape == (3, 2)
    with pytest.raises(ValueError, match="`kind`"):
        projection_matrix(4, 2, rng=0, kind="sparse")
    with pytest.raises(ValueError, match="`score`"):
        project_scores(np.ones((3, 0)), 2, rng=0)
    log_prob, params, samples = _policy()
    with pytest.raises(TypeError, match="`params`"):
        sketch_scores(log_prob, {"w": np.ones(3)}, samples, 2, seed=0)
    with pytest.raises(ValueError, match="`k`"):
        sketch_scores(log_prob, params, samples, 0, seed=0)
