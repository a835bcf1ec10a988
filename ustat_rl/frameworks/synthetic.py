"""Synthetic trajectory records: windows with given estimates and standard errors, for tests,
examples and the trajectory claims (C18, C49; :mod:`ustat_rl.frameworks.trajectory`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .trajectory import RecordInterval, WindowRecord

__all__ = ["synthetic_record", "SyntheticErrors", "SyntheticWindow"]


@dataclass(frozen=True)
class SyntheticErrors:
    """Standard errors of a synthetic window's estimates (:func:`synthetic_record`).

    Parameters
    ----------
    c1, c3 : float
        Standard errors of ``c1`` and ``c3'``.
    c2 : float
        Standard error of ``c2`` (default 0).
    cov13 : float
        Covariance of the ``c1`` and ``c3'`` estimates (default 0).
    stored : bool
        Whether the record carries them as ``gstar_errors`` (a writer that predates the field
        does not).
    """

    c1: float
    c3: float
    c2: float = 0.0
    cov13: float = 0.0
    stored: bool = True


@dataclass(frozen=True)
class SyntheticWindow:
    """What a synthetic window pooled (:func:`synthetic_record`): ``n_prompts`` groups of
    ``group_size`` in ``windows_pooled`` batches of a run with ``budget`` completions per batch,
    intervals at ``level``, and the all-equal fractions ``(predicted, observed)``."""

    n_prompts: int = 64
    level: float = 0.9
    group_size: int = 8
    budget: int = 256
    windows_pooled: int = 1
    all_equal: tuple = (math.nan, math.nan)


def synthetic_record(step: int, c1: float, c2: float, c3: float, errors: SyntheticErrors, *,
                     window: SyntheticWindow | None = None,
                     reason: str | None = None) -> WindowRecord:
    """A valid record for estimates ``c1, c2, c3'`` with standard errors, for tests and examples.

    The intervals are built as :func:`~ustat_rl.pilot.uncertainty.pilot_intervals` builds them
    for full scores (``estimate +- t se`` with ``P - 1`` degrees of freedom, ``G*`` by
    :func:`~ustat_rl.pilot.uncertainty.fieller_gstar`); the MSE fields are ``NaN``. ``window``
    (default :class:`SyntheticWindow()`) says what the window pooled. With ``reason`` the record
    is a skipped window (``null`` estimates).

    Examples
    --------
    >>> rec = synthetic_record(10, 1.0, 2.0, 49.0, SyntheticErrors(0.01, 0.5))
    >>> rec.gstar.estimate, rec.bounded
    (8.0, True)
    """
    from ..pilot.uncertainty import RatioErrors, fieller_gstar, student_quantile
    from ..theory.group_size import gstar_or_nan

    window = SyntheticWindow() if window is None else window
    n_prompts, level, group_size = window.n_prompts, window.level, window.group_size
    se1, se2, se3, cov13 = errors.c1, errors.c2, errors.c3, errors.cov13
    common = dict(step=int(step), windows_pooled=window.windows_pooled, n_prompts=n_prompts,
                  n_samples=n_prompts * group_size, group_size=group_size, budget=window.budget,
                  level=level, estimator="grpo", estimator_source="synthetic",
                  mse_best_estimator="grpo", all_equal_predicted=window.all_equal[0],
                  all_equal_observed=window.all_equal[1])
    if reason is not None:
        return WindowRecord(status="skipped", reason=reason, **common)
    t = student_quantile(level, 1.0, 0.0, n_prompts, None)
    constants = {name: RecordInterval(value, value - t * se, value + t * se)
                 for name, value, se in (("c1", c1, se1), ("c2", c2, se2), ("c3", c3, se3))}
    _, (low, high) = fieller_gstar(c1, c3, RatioErrors(se1, 0.0, se3, cov13), n_prompts, level)
    point = gstar_or_nan(c1, c3)
    errors_field = ({"c1_prompt_se": se1, "c1_sketch_se": 0.0, "c3_se": se3, "cov13": cov13,
                     "sketch_units": None} if errors.stored else None)
    return WindowRecord(status="ok", **common, **constants,
                        gstar=RecordInterval(point, low, high), bounded=math.isfinite(high),
                        recommended_group_size=group_size, mse_run=RecordInterval(math.nan),
                        gstar_errors=errors_field)
