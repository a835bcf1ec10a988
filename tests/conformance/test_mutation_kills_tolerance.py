"""The conformance kit's tolerance where the mutants of docs/mutation.md's fifth round found it
untested: a passed dtype coarser than float32, rewards so small that the underflow term
``sqrt(2 tiny)`` of the spread's bound dominates, and the rule the report states.

The bound is compared with ``documented_bound`` of tests/conformance/test_kit_tolerance_pinned.py (the
module docstring's terms computed a second way, per group and in a loop) at rtol 1e-9, as there;
the float16 case is the docstring's formula by hand. All checks are deterministic (fixed seeds,
hypothesis derandomized): no false-failure rate. Each test names the mutants it was written
against; they are its negative controls (benchmarks/mutation.py reports them killed).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.conformance.test_kit_tolerance_pinned import documented_bound
from ustat_rl.advantages.conventions import advantages, get_convention
from ustat_rl.conformance import kit as conformance
from ustat_rl.conformance.search import Search

pytestmark = pytest.mark.fast

#: Conventions whose spread is a group's (with an epsilon added, a tiny one, or none) or the
#: others' (NeMo-RL): the branches whose bound carries the underflow term.
SPREAD_NAMES = ("trl_group", "verl_grpo", "openrlhf_group_norm", "paper_algorithm2",
                "nemo_rl_grpo")


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, None])
def test_the_working_precision_is_the_coarser_of_float32_and_the_dtype(dtype):
    # mutant: `dtype is not None` into `dtype is None` (a float16 output then held to float32)
    # trl_none on one group [0, 1]: n = 2, S = 1, |A| = 1/2, so the docstring's bound
    # (n + 4)(eps S + tiny) + 2 eps |A| is 7 eps + 6 tiny
    work = np.finfo(np.float16 if dtype is np.float16 else np.float32)
    got = conformance.tolerance("trl_none", [0.0, 1.0], [0, 0], dtype)
    np.testing.assert_allclose(got, 7 * work.eps + 6 * work.tiny, rtol=1e-12, atol=0)


def _tiny_batches(name, scale, count=6, seed=11):
    """Two groups of 3 to 6 rewards of size ``scale``, float64, ids in any order."""
    spec = get_convention(name)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        sizes = [int(rng.integers(max(spec.min_group_size, 3), 7))] * 2
        z = rng.uniform(0.0, scale, sum(sizes))
        ids = np.repeat([4, -2], sizes)
        out.append((z, ids))
    return out


@pytest.mark.parametrize("name, scale", [(name, scale) for name in SPREAD_NAMES
                                         for scale in (1e-16, 1e-20)
                                         if scale > 1e-20 or get_convention(name).epsilon > 0])
def test_the_underflow_term_of_the_spread_is_the_documented_one(name, scale):
    # mutants: sqrt(2 tiny) into sqrt(3 tiny), `+ under` into `- under` in the group's and the
    # others' spread. At these scales (n + 3) eps s and the deviations' errors are below 1e-21
    # and sqrt(2 tiny) = 1.5e-19 is most of the spread's bound. Without an epsilon a spread of
    # 1e-20 is below that bound, the samples unchecked, so those conventions take 1e-16 only
    for z, ids in _tiny_batches(name, scale):
        got = conformance.tolerance(name, z, ids, np.float64)
        want = documented_bound(name, z, ids)
        assert np.array_equal(np.isinf(got), np.isinf(want)), (name, z, ids)
        finite = np.isfinite(want)
        assert finite.any(), "no sample checked: the batch proves nothing"
        np.testing.assert_allclose(got[finite], want[finite], rtol=1e-9, atol=0)



def test_a_reward_of_exactly_float32_tiny_is_a_normal_number_and_counts_as_nonzero():
    # mutant: `|z| < tiny` into `|z| <= tiny` in the nonzero fraction's flush count (verl's GPG):
    # tiny itself is float32's smallest normal number, never flushed to 0
    tiny = float(np.finfo(np.float32).tiny)
    z = np.array([tiny, 0.0, 1.0, 0.5, 0.0, 0.25])
    ids = np.repeat([0, 1], 3)
    got = conformance.tolerance("verl_gpg", z, ids, np.float64)
    want = documented_bound("verl_gpg", z, ids)
    assert np.all(np.isfinite(want))
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=0)
    # a reward below tiny may be flushed, so the bound widens: the control that it matters
    flushed = conformance.tolerance("verl_gpg", np.r_[tiny / 2, z[1:]], ids, np.float64)
    assert np.all(flushed[z != 0] > got[z != 0])

def test_a_report_states_the_module_docstrings_rule():
    # mutants: TOLERANCE_FORMULA set to None, or its formula decorated with XX
    report = conformance.check_conformance(lambda z, g: advantages("trl_group", z, g),
                                           "trl_group", search=Search(max_examples=5))
    assert report.passed and report.tolerance == conformance.TOLERANCE_FORMULA
    formula = re.match(r"^(\|got - expected\| <= .*?): ", report.tolerance).group(1)
    squeeze = "".join(formula.split())
    assert squeeze in "".join(conformance.__doc__.split())
    assert report.summary().splitlines()[1] == f"tolerance: {conformance.TOLERANCE_FORMULA}"
