"""The split of the pilot into statistics (ustat_rl/pilot/, numpy) and scores (ustat_rl/scores/,
torch): the statistics load no torch, the old module paths still serve the moved modules, one
SketchSpec carries the sketch's settings into the sketch and the pilot file, and one chunk loop
does the model-level work once per window."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ustat_rl.pilot.rollouts import Rollouts, load_rollouts  # noqa: E402
from ustat_rl.scores import coverage, factored, projectors  # noqa: E402
from ustat_rl.scores.chunks import sketch_rows  # noqa: E402
from ustat_rl.scores.spec import DEFAULT_SKETCH_BLOCKS, SketchSpec  # noqa: E402

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[2]

#: Imports ``ustat_rl.pilot`` and every module in it.
IMPORT_PILOT = ("import importlib, pkgutil, sys, ustat_rl.pilot; "
                "[importlib.import_module('ustat_rl.pilot.' + m.name) "
                "for m in pkgutil.iter_modules(ustat_rl.pilot.__path__)]")
#: Fails (AssertionError) when torch was loaded.
DETECTOR = "assert 'torch' not in sys.modules, 'torch was imported'"


def _python(code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter that resolves imports to this checkout."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, PYTHONPATH=path))


# ---------------------------------------------------------------------------- the split
def test_the_pilot_statistics_load_no_torch():
    proc = _python(f"{IMPORT_PILOT}; {DETECTOR}; print(len(sys.modules))")
    assert proc.returncode == 0, proc.stderr


def test_the_torch_detector_flags_a_scores_module():
    # negative control: the same detector after one module of ustat_rl.scores
    proc = _python(f"{IMPORT_PILOT}; import ustat_rl.scores.spec; {DETECTOR}")
    assert proc.returncode != 0 and "torch was imported" in proc.stderr


# ---------------------------------------------------------------------------- SketchSpec
def test_spec_defaults():
    assert SketchSpec(64).blocks == DEFAULT_SKETCH_BLOCKS == 16
    assert SketchSpec(6).blocks == 6 and SketchSpec(64, blocks=4).block_dim == 16
    spec = SketchSpec(32, seed=3, kind="rademacher", dtype=torch.float64, temperature=0.5)
    assert (spec.seed, spec.kind, spec.dtype, spec.temperature) == (3, "rademacher",
                                                                     torch.float64, 0.5)
    with pytest.raises(AttributeError):
        spec.seed = 4  # frozen


@pytest.mark.parametrize("field,value,error", [
    ("dimension", 0, ValueError), ("dimension", 2.0, TypeError),
    ("blocks", 3, ValueError), ("blocks", 0, ValueError),
    ("seed", -1, ValueError), ("kind", "sparse", ValueError),
    ("dtype", "float32", TypeError), ("dtype", torch.int64, TypeError),
    ("temperature", 0.0, ValueError), ("temperature", float("nan"), ValueError),
])
def test_spec_errors_name_the_field(field, value, error):
    values = dict(dimension=8, seed=0, blocks=4, kind="gaussian", dtype=None, temperature=1.0)
    with pytest.raises(error, match=f"`{field}`"):
        SketchSpec(**{**values, field: value})
    # the caller's own argument name, where it calls the field otherwise
    with pytest.raises(error, match=f"`my_{field}`"):
        SketchSpec.named({field: f"my_{field}"}, **{**values, field: value})


def test_spec_to_meta_and_back_through_a_saved_file(tmp_path):
    spec = SketchSpec(12, seed=7, blocks=3, kind="rademacher")
    meta = spec.to_meta("factored")
    assert meta == dict(sketch_kind="rademacher", sketch_seed=7, sketch_blocks=3,
                        sketch_route="factored")
    rng = np.random.default_rng(0)
    pilot = Rollouts(np.repeat(np.arange(2), 3), rng.normal(size=6), rng.normal(size=(6, 12)),
                     **meta)
    pilot.save(tmp_path / "p.npz")
    back = SketchSpec.from_meta(load_rollouts(tmp_path / "p.npz"))
    assert back == spec
    # i.i.d. rows (dense, jvp): no blocks recorded, one block per row read back
    assert spec.to_meta("jvp")["sketch_blocks"] is None
    assert SketchSpec.from_meta(dict(sketch_kind="gaussian", sketch_seed=1), 8).blocks == 8
    assert SketchSpec.from_meta(dict(sketch_kind="none")) is None
    # negative control: another seed is another spec
    assert SketchSpec.from_meta(dict(meta, sketch_seed=8), 12) != spec


# ---------------------------------------------------------------------------- the chunk loop
class _Tiny(torch.nn.Module):
    def __init__(self, vocab=7, width=4):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.norm = torch.nn.LayerNorm(width)
        self.mix = torch.nn.Linear(width, width)
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, tokens):
        return self.head(torch.tanh(self.mix(self.norm(self.embed(tokens)))))


def _rows(n=7):
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 7, (n, 5), generator=gen)
    target = torch.zeros(n, 5)
    target[:, 2:] = 1.0
    return tokens, target


def _counting(monkeypatch):
    calls = {"module_projectors": 0, "check_supported": 0}
    for name in calls:
        original = getattr(factored, name)

        def counted(*args, _name=name, _original=original):
            calls[_name] += 1
            return _original(*args)

        monkeypatch.setattr(factored, name, counted)
    return calls


def test_the_chunk_loop_prepares_the_model_once_and_matches_chunk_by_chunk(monkeypatch):
    torch.manual_seed(0)
    model = _Tiny().double()
    tokens, target = _rows()
    spec = SketchSpec(8, seed=2, blocks=2)
    calls = _counting(monkeypatch)
    got = sketch_rows(model, tokens, target, spec, chunk_size=3)
    assert calls == {"module_projectors": 1, "check_supported": 1}  # one window, three chunks
    # negative control: a chunk at a time through the one-call sketch redoes it per chunk
    parts = [factored.factored_sketch_scores(model, tokens[s:s + 3], target[s:s + 3],
                                             SketchSpec(8, 2, blocks=2))
             for s in range(0, 7, 3)]
    assert calls == {"module_projectors": 4, "check_supported": 4}
    assert np.array_equal(got, torch.cat(parts).numpy())  # the same arithmetic, bit for bit
    assert not any(m._forward_hooks for m in model.modules())  # hooks gone after the window
    other = sketch_rows(model, tokens, target, SketchSpec(8, seed=3, blocks=2), chunk_size=3)
    assert not np.allclose(got, other)  # negative control: another R


def test_the_chunk_loop_refuses_bad_input():
    model = _Tiny()
    tokens, target = _rows()
    with pytest.raises(TypeError, match="`spec`"):
        sketch_rows(model, tokens, target, 8, chunk_size=3)
    with pytest.raises(ValueError, match="`chunk_size`"):
        sketch_rows(model, tokens, target, SketchSpec(8), chunk_size=0)
    with pytest.raises(ValueError, match="`route`"):
        sketch_rows(model, tokens, target, SketchSpec(8), chunk_size=3, route="dense")
    with pytest.raises(ValueError, match="`tokens`"):
        sketch_rows(model, tokens, target[:, :3], SketchSpec(8), chunk_size=3)


# ---------------------------------------------------------------------------- the projectors
def test_each_module_takes_the_first_projector_whose_test_passes():
    model = _Tiny()
    found = {type(m).__name__: name for m, name, _ in coverage.module_projectors(model)}
    assert found == {"Embedding": "embedding", "LayerNorm": "elementwise", "Linear": "linear"}
    assert coverage.PROJECTOR_NAMES == tuple(p.name for p in projectors.PROJECTORS)
    assert projectors.PROJECTORS[-1].covers(torch.nn.Conv1d(2, 2, 1), [])  # the fallback covers any


def test_a_projector_whose_test_is_off_hands_its_modules_to_the_next(monkeypatch):
    # negative control of the dispatch: the elementwise test off, LayerNorm takes the fallback
    monkeypatch.setattr(projectors.Elementwise, "covers", lambda self, module, own: False)
    assert coverage.uncovered_parameters(_Tiny()) == ["norm.weight", "norm.bias"]


@pytest.mark.parametrize("route,blocks", [("factored", 4), ("jvp", None), ("dense", None)])
def test_a_pilot_records_its_spec_in_the_metadata(route, blocks):
    """causal_lm_pilot's metadata is its SketchSpec's; the i.i.d. routes record one block per
    row whatever blocks the spec holds (20 rows here, in 20 blocks, or 5)."""
    from ustat_rl.scores.causal_lm import Sampling, causal_lm_pilot

    torch.manual_seed(0)
    dim = 8 if route == "factored" else 20
    given = SketchSpec(dim, seed=11, blocks=blocks or 5)
    pilot = causal_lm_pilot(_Tiny().double(), [[1, 2], [3]], lambda i, a: float(len(a)),
                            Sampling(3, 2, seed=4), given, route=route)
    spec = SketchSpec(dim, seed=11, blocks=blocks if blocks else dim)
    assert SketchSpec.from_meta(pilot) == spec and pilot.score.shape == (6, dim)
    assert pilot.sketch_route == route
    assert pilot.sketch_blocks == (blocks if route == "factored" else None)
