"""A factored sketch leaves nothing of its autograd graph behind (a monitor sketches every window
of a long run in one process).

Each hooked module output got a tensor hook that refers back to the sketcher, which holds the
outputs: a cycle through the autograd engine that Python's collector cannot see, so every call's
graph, saved activations included, stayed alive (about 2 MB a call on the test model; the
resident memory grew without bound over a 6000-step monitored run). The check: a weak reference
to each call's sketcher, which holds that call's graph, must be dead once the call returns.
"""

from __future__ import annotations

import gc
import weakref

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from ustat_rl.frameworks.demo import tiny_family  # noqa: E402
from ustat_rl.scores.factored import factored_sketch_scores  # noqa: E402
from ustat_rl.scores.spec import SketchSpec  # noqa: E402

pytestmark = pytest.mark.fast


def _sketchers_alive(release: bool, monkeypatch) -> int:
    """Sketchers still alive after a call: each holds its call's graph (its roots, their
    nodes and, through them, the saved activations)."""
    from ustat_rl.scores import _sketcher

    made = []
    init = _sketcher.Sketcher.__init__

    def recording(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(weakref.ref(self))

    monkeypatch.setattr(_sketcher.Sketcher, "__init__", recording)
    if not release:  # negative control: the references kept, as before the fix
        monkeypatch.setattr(_sketcher.Sketcher, "release", lambda self: None)
    model = tiny_family("qwen2", 0)
    tokens = torch.randint(2, 14, (4, 6))
    target = torch.zeros(4, 6)
    target[:, 3:] = 1.0
    for _ in range(3):
        factored_sketch_scores(model, tokens, target, SketchSpec(16, 0, blocks=4))
    gc.collect()
    return sum(ref() is not None for ref in made)


def test_no_sketcher_outlives_its_call(monkeypatch):
    assert _sketchers_alive(True, monkeypatch) == 0


def test_the_check_sees_a_sketcher_kept_alive(monkeypatch):
    assert _sketchers_alive(False, monkeypatch) == 3
