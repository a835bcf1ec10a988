"""A monitor's window against exact values: windows cut from pilots of a committed transformer
policy whose moments are known by enumeration (docs/theory.md C31, C32).

Each window pools four generation batches of 16 groups of 16 answers, sketched with k = 32
Gaussian rows, exactly as :func:`ustat_rl.frameworks.window.window_record` receives them from
the TRL monitor. Over independent windows the point estimates of c1, c2 and c3' must average to
the exact constants (unbiased kernels, C31) and the 90% intervals must cover them, and G*, at a
rate inside the 85-95% band (C32). Tolerances: 4 standard errors of the mean over windows
(false-failure rate 6.3e-5 each) and the band check of
``ustat_rl.stats.coverage_band.coverage_in_band`` (at most 3.2e-5 per check when the true
coverage lies in the band); the negative controls move the truth and must be rejected by the
same checks.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("torch")

from ustat_rl.frameworks.config import EstimatorConfig, MonitorConfig  # noqa: E402
from ustat_rl.frameworks.window import Batch, window_record  # noqa: E402
from ustat_rl.policies.transformer import exact_moments, load_study_policy, make_splits  # noqa: E402
from ustat_rl.scores.spec import drawn_spec  # noqa: E402
from ustat_rl.scores.transformer import answer_population, population_pilot  # noqa: E402
from ustat_rl.stats.coverage_band import coverage_in_band  # noqa: E402
from ustat_rl.theory import scaling_constants  # noqa: E402
from ustat_rl.training.transformer import moderate_questions  # noqa: E402

pytestmark = pytest.mark.integration  # coverage study: monitor windows of the transformer policy

G, GROUPS, POOL, K, WINDOWS = 16, 16, 4, 32, 160
Z = 4.0


@pytest.fixture(scope="module")
def windows():
    policy, _ = load_study_policy("medium", device="cpu")
    questions = moderate_questions(policy, make_splits().test, limit=12)
    population = answer_population(policy, questions, "medium")
    truth = scaling_constants(exact_moments(policy, questions))
    rng = np.random.default_rng(20261201)
    records = []
    for _ in range(WINDOWS):
        pilot = population_pilot(population, GROUPS * POOL, G, rng, sketch=drawn_spec(K, rng))
        order = np.argsort(pilot.prompt_id, kind="stable")  # groups contiguous, G rows each
        reward, score = pilot.reward[order], pilot.score[order]
        rows = GROUPS * G
        batches = [Batch(b, G, reward[b * rows:(b + 1) * rows], score[b * rows:(b + 1) * rows],
                         b * GROUPS) for b in range(POOL)]
        meta = dict(sketch_kind="gaussian", sketch_seed=None, sketch_blocks=None,
                    sketch_route="dense", model_name="medium", param_dim=pilot.param_dim)
        record, _ = window_record(batches, meta, G * GROUPS,
                                  MonitorConfig(estimator=EstimatorConfig(source="test")))
        records.append(record)
    return truth, records


def _mean_ok(values, truth):
    values = np.asarray(values)
    se = values.std(ddof=1) / math.sqrt(values.size)
    return abs(values.mean() - truth) <= Z * se


def test_window_estimates_average_to_the_exact_constants(windows):
    truth, records = windows
    assert all(r.ok and r.n_prompts == GROUPS * POOL for r in records)
    for name in ("c1", "c2", "c3"):
        values = [getattr(r, name).estimate for r in records]
        assert _mean_ok(values, getattr(truth, name)), name
        # negative control: a truth 30% off is rejected by the same check
        assert not _mean_ok(values, 1.3 * getattr(truth, name)), name


def test_window_intervals_cover_the_exact_values(windows):
    truth, records = windows
    exact = {"c1": truth.c1, "c2": truth.c2, "c3": truth.c3,
             "gstar": truth.optimal_group_size()}
    for name, value in exact.items():
        hits = sum(getattr(r, name).covers(value) for r in records)
        verdict = coverage_in_band(hits, len(records))
        assert verdict.passed, (name, verdict)
        # negative control: the same band check rejects intervals tested against a far value
        far = sum(getattr(r, name).covers(3.0 * value) for r in records)
        assert not coverage_in_band(far, len(records)).passed, name
