"""The framework-agnostic monitor with the loop's own loss weights is ``window_record`` (C61).

A loop that is not TRL (SkyRL's ``prompt_mean``, a hand-written one) hands
:meth:`ustat_rl.frameworks.entry.WindowMonitor.step` its tokens, masks, rewards and each
completion's weight in its gradient (``loss_weights``). The monitor unpads the rows, hashes the
prompts into groups, sketches every row at the current parameters, weighs the scores, pools the
last ``pool`` batches and builds the window's record. Here the same windows are built without
the monitor: rows written unpadded by hand, sketched by :func:`ustat_rl.scores.chunks.sketch_rows`
(the sketch itself is C44's), each score times the loop's weight, pooled into
:class:`~ustat_rl.frameworks.window.Batch` es and handed to
:func:`~ustat_rl.frameworks.window.window_record`; every field of every record must agree.

Shapes differ on purpose: ``G = 3`` completions to ``B = 4`` prompts, prompts and completions of
unequal lengths, sketch dimension 12; the pool holds 2 batches and the run takes 3 windows, so
the last drops its oldest batch (the pool's boundary); the parameters move between steps as an
optimizer moves them. Deterministic (float64 model and sketch): rel 1e-10, no false-failure rate.
"""

from __future__ import annotations

import math

import numpy as np

from ..registry import check_exact, check_true, register

__all__ = ["ENTRY_SHAPE", "ENTRY_STEPS", "entry_windows", "reference_windows", "record_numbers"]

#: ``(G, B)``, the sketch dimension and its blocks, the pool and the number of windows.
ENTRY_SHAPE = (3, 4)
ENTRY_SKETCH = (12, 3)
ENTRY_POOL, ENTRY_STEPS = 2, 3
#: The relative tolerance of the records' numbers (float64 rounding of a different row order).
ENTRY_RTOL = 1e-10


def _model():
    import torch

    from ...scores.families import tiny_causal_lm

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(6101)
        return tiny_causal_lm().double()


def _draws(rng):
    """One step's rows: per completion its prompt tokens, completion tokens, reward and the
    loop's loss weight (SkyRL's ``prompt_mean`` of the completions' lengths)."""
    from ...frameworks.aggregation import prompt_mean_weights

    G, B = ENTRY_SHAPE
    prompts, completions = [], []
    for _ in range(B):
        prompt = rng.integers(1, 9, size=rng.integers(1, 4)).tolist()
        for _ in range(G):
            prompts.append(prompt)
            completions.append(rng.integers(1, 9, size=rng.integers(1, 5)).tolist())
    reward = rng.integers(0, 2, size=B * G).astype(np.float64)
    lengths = np.array([len(c) for c in completions], dtype=np.float64)
    weights = prompt_mean_weights(lengths, np.repeat(np.arange(B), G))
    return prompts, completions, reward, weights


def _generation(prompts, completions):
    """Prompts left-padded, completions right-padded by 0, as a loop hands them over."""
    import torch

    from ...frameworks.generation import Generation

    n, pw, cw = len(prompts), max(map(len, prompts)), max(map(len, completions)) + 1
    ids, pmask = torch.zeros(n, pw, dtype=torch.long), torch.zeros(n, pw)
    cids, cmask = torch.zeros(n, cw, dtype=torch.long), torch.zeros(n, cw)
    for i, (p, c) in enumerate(zip(prompts, completions)):
        ids[i, pw - len(p):], pmask[i, pw - len(p):] = torch.tensor(p), 1.0
        cids[i, :len(c)], cmask[i, :len(c)] = torch.tensor(c), 1.0
    return Generation(ids, pmask, cids, cmask)


def _config():
    from ...frameworks.config import EstimatorConfig, LossWeighting, MonitorConfig, Schedule
    from ...scores.spec import SketchSpec

    k, blocks = ENTRY_SKETCH
    return MonitorConfig(ENTRY_SHAPE[0], schedule=Schedule(every=1, pool=ENTRY_POOL,
                                                           chunk_size=5),
                         sketch=SketchSpec(k, seed=3, blocks=blocks),
                         estimator=EstimatorConfig("grpo"),
                         loss=LossWeighting(units="the loop's per-completion weights"))


def _steps(seed: int):
    """The run: per step the rows, and the parameters moved after it (a fixed stream)."""
    import torch

    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed % 2**31)
    return [(_draws(rng), 0.05 * torch.randn(1, generator=gen, dtype=torch.float64).item())
            for _ in range(ENTRY_STEPS)]


def _move(model, shift: float) -> None:
    import torch

    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            p.add_(shift * (i + 1))


def entry_windows(seed: int, weighted: bool = True) -> list:
    """The records :class:`~ustat_rl.frameworks.entry.WindowMonitor` returns along the run."""
    import warnings

    from ...frameworks.entry import WindowMonitor

    model, config = _model(), _config()
    monitor = WindowMonitor(None, config)
    records = []
    for step, ((prompts, completions, reward, weights), shift) in enumerate(_steps(seed)):
        with warnings.catch_warnings(record=True):  # a skipped window shows in its record
            records.append(monitor.step(model, _generation(prompts, completions), reward,
                                        step=step, loss_weights=weights if weighted else None))
        _move(model, shift)
    return records


def reference_windows(seed: int, weighted: bool = True) -> list:
    """The same windows without the monitor: rows unpadded by hand, sketched, weighted, pooled."""
    import torch

    from ...frameworks.window import Batch, window_record
    from ...scores.chunks import sketch_rows

    model, config = _model(), _config()
    G, B = ENTRY_SHAPE
    param_dim = sum(p.numel() for p in model.parameters() if p.requires_grad)
    meta = dict(config.sketch.to_meta("factored"), model_name=type(model).__name__,
                param_dim=int(param_dim))
    batches, records = [], []
    for step, ((prompts, completions, reward, weights), shift) in enumerate(_steps(seed)):
        rows = [p + c for p, c in zip(prompts, completions)]
        width = max(map(len, rows))
        tokens = torch.zeros(len(rows), width, dtype=torch.long)
        target = torch.zeros(len(rows), width)
        for i, p in enumerate(prompts):
            tokens[i, :len(rows[i])] = torch.tensor(rows[i])
            target[i, len(p):len(rows[i])] = 1.0  # the completion's tokens score
        score = sketch_rows(model, tokens, target, config.sketch, chunk_size=7)  # (B G, k)
        if weighted:
            score = score * weights[:, None]
        batches.append(Batch(step, G, reward, score, step * B, reward[:, None]))
        records.append(window_record(batches[-ENTRY_POOL:], meta, B * G, config)[0])
        _move(model, shift)
    return records


def _flat(value, prefix=""):
    if isinstance(value, dict):
        out = {}
        for key, part in value.items():
            out.update(_flat(part, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): value}


def record_numbers(record) -> tuple[dict, dict]:
    """A record's numeric fields (``inf`` and ``None`` as NaN-aware floats) and its others."""
    numbers, others = {}, {}
    for key, value in _flat(record.to_dict()).items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) and value is not None \
                and value not in ("inf", "-inf"):
            others[key] = value
        else:
            numbers[key] = math.nan if value is None else float(value)
    return numbers, others


@register("C61", "Beyond the paper: the framework-agnostic WindowMonitor fed a loop's tokens, "
          "rewards and per-step loss weights returns, window after window, the record "
          "window_record gives for the same rows sketched, weighted and pooled by hand",
          "derived (docs/theory.md C61; C48's window through the monitor's entry)",
          "WindowMonitor.step with loss_weights (SkyRL's prompt_mean) on tiny_causal_lm, G = 3, "
          "B = 4, pool 2 over 3 windows, parameters moved between steps, against sketch_rows "
          "times the weights and window_record; every field, rel 1e-10")
def check_c61(ctx) -> list:
    seed = int(ctx.seed_for("C61").generate_state(1)[0])
    got, want = entry_windows(seed), reference_windows(seed)
    checks = [check_true(f"{len(got)} windows, each estimated (none skipped)",
                         len(got) == len(want) and all(r is not None and r.ok for r in got),
                         float(sum(r is not None and r.ok for r in got)))]
    for i, (a, b) in enumerate(zip(got, want)):
        (na, oa), (nb, ob) = record_numbers(a), record_numbers(b)
        checks.append(check_true(f"window {i}: the same fields, every non-numeric one equal "
                                 f"(pooled {b.windows_pooled})",
                                 na.keys() == nb.keys() and oa == ob, float(len(oa))))
        keys = sorted(set(na) & set(nb))
        x, y = np.array([na[k] for k in keys]), np.array([nb[k] for k in keys])
        finite = np.isfinite(y)
        same_ends = bool(np.array_equal(x[~finite], y[~finite], equal_nan=True))
        checks.append(check_exact(f"window {i}: {int(finite.sum())} finite numeric fields, and "
                                  f"NaN and infinity where the reference has them "
                                  f"({same_ends})", y[finite],
                                  x[finite] if same_ends else np.full(finite.sum(), np.nan),
                                  rtol=ENTRY_RTOL, atol=1e-12))
    control = reference_windows(seed, weighted=False)[-1]
    moved = abs(control.var_run.estimate - got[-1].var_run.estimate)
    checks.append(check_true("negative control: the same windows without the loop's weights "
                             "give another var_run (by more than 1e-3 relative)",
                             moved > 1e-3 * abs(got[-1].var_run.estimate), moved,
                             note="the weights are 1/(P S_p), far from 1"))
    return checks
