"""C55.polaris and C56 (ustat_rl.claims.beyond_frameworks.group_filters, .logs): the claim passes on
the code as it is and fails on a planted bug; C56's stated rate and its exact fractions.

C55.polaris with copies whose advantages are not merged with their source's (SkyRL merges them,
the copy sharing the prompt id) must fail its MSE comparison. C56's exact all-equal fraction is
checked against numerical integration of the Beta law (1e-10), and the count it needs against
the binomial tail it states.
"""

from __future__ import annotations

import pytest
from scipy import integrate, stats

import ustat_rl.theory.replace_sampling as replace_module
from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.claims.beyond_frameworks import logs as c56
from ustat_rl.tolerances import CLAIM_BUDGET

pytestmark = pytest.mark.fast

CTX = VerifyContext(seed=0, quick=True)


def test_c55_polaris_passes():
    result = run_claim(registry()["C55.polaris"], CTX)
    assert result.verdict == "pass", [c.name for c in result.checks if not c.passed]


def test_c55_polaris_fails_with_unmerged_copies(monkeypatch):
    real = replace_module.merged_table
    monkeypatch.setattr(replace_module, "merged_table",
                        lambda estimator, G, m: real(estimator, G, 1))
    result = run_claim(registry()["C55.polaris"], CTX)
    assert result.verdict == "fail"
    assert any("MSE" in c.name and not c.passed for c in result.checks)


@pytest.mark.parametrize("G", [2, 8, 32])
def test_c56_exact_fraction_is_the_beta_integral(G):
    a, b = c56.BETA
    value, _ = integrate.quad(lambda p: (p**G + (1 - p)**G) * stats.beta.pdf(p, a, b), 0, 1,
                              epsabs=1e-13, limit=200)
    assert c56.beta_all_equal(G) == pytest.approx(value, rel=1e-8)


def test_c56_states_the_binomial_tail_of_its_count():
    need, rate = c56.min_covered()
    assert rate == pytest.approx(stats.binom.cdf(need - 1, c56.WINDOWS, c56.LEVEL), rel=1e-12)
    assert rate <= c56.RATE_PER_SIZE < stats.binom.cdf(need, c56.WINDOWS, c56.LEVEL)
    assert rate * (len(c56.SIZES) + 1) <= CLAIM_BUDGET


def test_c56_one_group_logs_admit_only_the_whole_batch(tmp_path):
    import json

    from ustat_rl.frameworks.logs import consistent_group_sizes, read_trainer_state

    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps(c56.one_group_state()))
    assert consistent_group_sizes(read_trainer_state(path)) == [c56.ONE_GROUP_G]
