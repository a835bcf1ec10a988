"""Expansions and series checked where every term matters, against independent brute force.

Edgeworth expansion (``ustat_rl.theory.edgeworth.edgeworth_cdf``, docs/theory.md C28):
``Phi(x) - phi(x) [s He2(x)/6 + k He3(x)/24 + s^2 He5(x)/72]``, the two-term expansion of the
law of a standardised statistic with skewness ``s`` and excess kurtosis ``k``.

- Exact law: the standardised Gamma(a) (a sum of ``a`` unit exponentials, ``s = 2/sqrt(a)``,
  ``k = 6/a``), its cdf from scipy's regularised incomplete gamma, at ``a = 16`` and ``64`` with
  either sign of ``s`` (the mirrored law ``-X``), on 801 points of [-4, 4]. Tolerance: twice the
  largest third-order Edgeworth term ``T3 = -phi [l5 He4/120 + s k He6/144 + s^3 He8/1296]``
  (``l5 = 24 a^(-3/2)``), since ``F - E2 = T3 + O(a^-2)`` (the ``O(a^-2)`` part measured 3.9e-4
  against ``max |T3|`` = 8.5e-4 at ``a = 16``). Deterministic, no false-failure rate. Every term
  matters there: flipping the sign of any one of the three terms, or of the whole correction,
  moves the cdf by at least 1.6e-2, ten times the tolerance, and each is rejected.
- The law the module is used for (C28): sqrt(G)(U - g) projected on g/|g| at G = 256 for
  ``arithmetic_bandit(2.8)``, x = 3, by Monte Carlo (200 000 replicates, fixed seed), its
  empirical cdf at 9 points against the Edgeworth cdf with the exact cumulants:
  ``|F_hat - E2| <= Z_TEST se + R`` with ``se = sqrt(E2 (1 - E2) / n)``, ``Z_TEST = 4.5``
  (6.8e-6 two-sided per point, 6.1e-5 for the 9 points, union bound) and ``R = 1e-3``, three
  times the Edgeworth remainder 3.3e-4 measured on 10^7 replicates (docs/theory.md C28). There
  only the skewness term is large (s = -0.236: it moves the cdf at 0 by 0.016); flipping it,
  flipping the whole correction and the bare normal are each rejected. The kurtosis and ``s^2``
  terms (at most 1.4e-3 and 1.7e-4 there) are pinned by the Gamma check.

Ruben's series (``ustat_rl.weighted_chi2._ruben.RubenSeries``) evaluated alone (no fallback
to inversion) at cdf = 1e-12 (small x) and sf = 1e-12 (large x):

- Exact: weights of multiplicity 2, so ``Q`` is a sum of independent exponentials with distinct
  rates ``1/(2 w)`` (hypoexponential), ``sf(x) = sum_d exp(-x/(2 w_d)) prod_{j != d}
  w_d/(w_d - w_j)`` in mpmath at 80 digits (the alternating sum cancels; 80 digits cover it), at
  three scales of weights (1e-3, 1 and 100: x from 8e-7 to 6e3) and for K = 6 and K = 20.
- Odd multiplicities (K = 3 and K = 5): the mpmath Gil-Pelaez inversion of
  ``ustat_rl.weighted_chi2._reference`` (25 digits, its own contour), whose error estimate must
  be below 1e-14.
- Tolerance: relative error at most ``RTOL = 1e-12`` (4500 float64 steps; measured below 1e-14)
  and the series must certify the point. Deterministic, no false-failure rate.
- Negative controls: the same series cut early (its coefficient budget ``J_CAP`` lowered below
  what the point needs, monkeypatched) fails the check, and the series summed by hand in mpmath
  from the library's own coefficients matches the exact value only with all its terms: cut
  where the terms left out are still above ``RTOL`` it is rejected.
"""

import math

import mpmath
import numpy as np
import pytest
from scipy import stats

from ustat_rl.montecarlo import bandit_statistics
from ustat_rl.policies.examples import arithmetic_bandit
from ustat_rl.theory.edgeworth import edgeworth_cdf, projected_grpo_cumulants
from ustat_rl.tolerances import Z_TEST
from ustat_rl.weighted_chi2 import WeightedChiSquare
from ustat_rl.weighted_chi2 import _ruben as ruben_module
from ustat_rl.weighted_chi2._reference import reference_probability
from ustat_rl.weighted_chi2._ruben import RubenSeries
from ustat_rl.weighted_chi2._small_x import small_x_params

pytestmark = pytest.mark.fast

# --------------------------------------------------------------------------- Edgeworth
GRID = np.linspace(-4.0, 4.0, 801)


def _terms(x, s, k):
    """The three correction terms of the two-term Edgeworth cdf, each times phi(x): (3, n)."""
    he2, he3, he5 = x**2 - 1.0, x**3 - 3.0 * x, x**5 - 10.0 * x**3 + 15.0 * x
    return stats.norm.pdf(x) * np.stack([s * he2 / 6.0, k * he3 / 24.0, s**2 * he5 / 72.0])


def _third_order(x, s, k, l5):
    """The next Edgeworth term (order a^(-3/2) for a sum of a terms)."""
    he4 = x**4 - 6 * x**2 + 3
    he6 = x**6 - 15 * x**4 + 45 * x**2 - 15
    he8 = x**8 - 28 * x**6 + 210 * x**4 - 420 * x**2 + 105
    return -stats.norm.pdf(x) * (l5 * he4 / 120 + s * k * he6 / 144 + s**3 * he8 / 1296)


def _gamma_law(a, sign):
    """Exact cdf on GRID of the standardised Gamma(a) (sign +1) or its mirror (-1), and its
    standardised cumulants (s, k, l5)."""
    if sign > 0:
        exact = stats.gamma.cdf(a + np.sqrt(a) * GRID, a)
    else:  # P(-X <= x) = P(X >= -x)
        exact = stats.gamma.sf(a - np.sqrt(a) * GRID, a)
    return exact, sign * 2 / np.sqrt(a), 6 / a, sign * 24 / a**1.5


@pytest.mark.parametrize("sign", [1, -1], ids=["skew+", "skew-"])
@pytest.mark.parametrize("a", [16, 64])
def test_edgeworth_cdf_against_the_exact_gamma_law(a, sign):
    exact, s, k, l5 = _gamma_law(a, sign)
    tol = 2 * np.max(np.abs(_third_order(GRID, s, k, l5)))
    got = edgeworth_cdf(GRID, s, k)
    assert np.max(np.abs(got - exact)) <= tol
    # the expansion is E2 = Phi - sum(terms); a wrong sign on one term j moves it by 2 term_j
    terms = _terms(GRID, s, k)
    np.testing.assert_allclose(got, stats.norm.cdf(GRID) - terms.sum(0), rtol=0, atol=1e-15)
    for j in range(3):
        wrong = got + 2 * terms[j]
        assert np.max(np.abs(wrong - exact)) > 5 * tol, f"term {j} flipped not rejected"
    whole = stats.norm.cdf(GRID) + terms.sum(0)  # the whole correction with its sign flipped
    assert np.max(np.abs(whole - exact)) > 5 * tol
    assert np.max(np.abs(stats.norm.cdf(GRID) - exact)) > 5 * tol  # no correction at all


#: Monte Carlo replicates of the C28 statistic and the seed they are drawn with.
C28_REPS = 200_000
C28_SEED = 2828
#: Allowance for the Edgeworth remainder at G = 256: 3x the 3.3e-4 of docs/theory.md C28.
C28_REMAINDER = 1e-3
C28_POINTS = np.linspace(-2.0, 2.0, 9)


@pytest.fixture(scope="module")
def c28_sample():
    bandit, prompt, group_size = arithmetic_bandit(2.8), 3, 256
    g_x = bandit.grad_per_prompt[prompt]
    u = g_x / np.linalg.norm(g_x)
    kappa = projected_grpo_cumulants(bandit.policy[prompt], bandit.reward_prob[prompt],
                                     bandit.score_table[prompt] @ u, bandit.reward_values,
                                     group_size)
    stat, _ = bandit_statistics(bandit, ("grpo",), (group_size,), prompt=prompt,
                                direction=bandit.embed(prompt, u))
    values = stat(np.random.default_rng(C28_SEED), C28_REPS)[:, 1]
    t = (values - kappa[0]) / np.sqrt(kappa[1])
    return np.sort(t), kappa[2] / kappa[1] ** 1.5, kappa[3] / kappa[1] ** 2


def _c28_misses(sample, cdf):
    """Points where the empirical cdf is outside Z_TEST se + remainder of ``cdf``."""
    f_hat = np.searchsorted(sample, C28_POINTS, side="right") / sample.size
    se = np.sqrt(cdf * (1 - cdf) / sample.size)
    return C28_POINTS[~(np.abs(f_hat - cdf) <= Z_TEST * se + C28_REMAINDER)]


def test_edgeworth_law_of_the_projected_grpo_gradient_by_monte_carlo(c28_sample):
    sample, s, k = c28_sample
    assert s == pytest.approx(-0.236, abs=5e-4) and k == pytest.approx(0.063, abs=5e-4)
    assert _c28_misses(sample, edgeworth_cdf(C28_POINTS, s, k)).size == 0
    # negative controls, by hand: the skewness term's sign flipped, the whole correction's
    # sign flipped, and no correction (the bare normal)
    flipped_skew = edgeworth_cdf(C28_POINTS, s, k) + 2 * _terms(C28_POINTS, s, k)[0]
    flipped_all = 2 * stats.norm.cdf(C28_POINTS) - edgeworth_cdf(C28_POINTS, s, k)
    for wrong in (flipped_skew, flipped_all, stats.norm.cdf(C28_POINTS)):
        assert 0.0 in _c28_misses(sample, wrong)


# --------------------------------------------------------------------------- Ruben's series
RTOL = 1e-12
TAIL = 1e-12
DPS = 80


def _hypoexponential(w, x):
    """(cdf, sf) of sum_d w_d chi2_2 (distinct w_d) at x, exact, as mpmath numbers."""
    with mpmath.workdps(DPS):
        w = [mpmath.mpf(float(v)) for v in w]
        x = mpmath.mpf(float(x))
        sf = mpmath.fsum(mpmath.exp(-x / (2 * wd)) * mpmath.fprod(
            [wd / (wd - wj) for wj in w if wj != wd]) for wd in w)
        return 1 - sf, sf


def _solve(f, lo, hi):
    """x in [lo, hi] with f(x) = 0, f increasing (bisection on log x)."""
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    return math.sqrt(lo * hi)


def _series(weights):
    distinct, mult = np.unique(np.asarray(weights, dtype=float), return_counts=True)
    mult = mult.astype(float)
    return RubenSeries(distinct, mult), small_x_params(distinct, mult), float(distinct @ mult)


def _series_tails(weights, x):
    """(cdf, sf, certified) from Ruben's series alone at x."""
    series, small, mean = _series(weights)
    assert x > small[0]  # beyond the small-x expansion: the series itself is evaluated
    log_cdf, log_sf, ok = series.log_cdf_sf(np.array([x]), mean, small)
    return math.exp(log_cdf[0]), math.exp(log_sf[0]), bool(ok[0])


def _rel(got, ref):
    return abs(got / float(ref) - 1.0) if math.isfinite(got) else math.inf


HYPO = {"K=6": (0.5, 1.0, 2.0), "K=20": tuple(np.linspace(0.5, 2.0, 10)),
        "K=6 small w": (1e-3, 2e-3, 5e-3), "K=6 large w": (30.0, 70.0, 100.0)}


def _hypo_point(w, tail):
    total = sum(w)
    if tail == "cdf":
        return _solve(lambda x: float(_hypoexponential(w, x)[0]) - TAIL, 1e-9 * total, total)
    return _solve(lambda x: TAIL - float(_hypoexponential(w, x)[1]), total, 1e3 * total)


@pytest.mark.parametrize("tail", ["cdf", "sf"])
@pytest.mark.parametrize("case", list(HYPO))
def test_ruben_deep_tails_against_the_exact_hypoexponential_law(case, tail, monkeypatch):
    w = HYPO[case]
    x = _hypo_point(w, tail)
    ref_cdf, ref_sf = _hypoexponential(w, x)
    ref = ref_cdf if tail == "cdf" else ref_sf
    assert 0.5 * TAIL < ref < 2 * TAIL
    cdf, sf, ok = _series_tails(np.repeat(w, 2), x)
    assert ok and _rel(cdf if tail == "cdf" else sf, ref) <= RTOL
    assert _rel(sf if tail == "cdf" else cdf, 1 - ref) <= RTOL
    # negative control: the series cut early (fewer coefficients than the point needs)
    lam = x / min(w) / 2
    monkeypatch.setattr(ruben_module, "J_CAP", max(2, int(lam)))
    cdf, sf, ok = _series_tails(np.repeat(w, 2), x)
    assert not (ok and _rel(cdf if tail == "cdf" else sf, ref) <= RTOL)


INVERSION = {"K=3": (0.3, 1.0, 1.7), "K=5": (0.2, 0.5, 1.0, 1.5, 3.0)}


@pytest.mark.parametrize("tail", ["cdf", "sf"])
@pytest.mark.parametrize("case", list(INVERSION))
def test_ruben_deep_tails_against_mpmath_inversion(case, tail):
    w = np.array(INVERSION[case])
    law = WeightedChiSquare(w, method="inversion")  # only to place the point
    x = float(law.ppf(TAIL) if tail == "cdf" else law.isf(TAIL))
    ref, err = reference_probability(w, x, tail)
    assert err < 1e-14 and 0.5 * TAIL < ref < 2 * TAIL
    cdf, sf, ok = _series_tails(w, x)
    assert ok and _rel(cdf if tail == "cdf" else sf, ref) <= RTOL


def _hand_sum(series, x, tail, n_terms):
    """Ruben's positive-term sum at x from the series' own coefficients, first n_terms terms:
    cdf = sum g_i C_i, sf = S_K(y) + sum g_i T_i, g_i = e^(-y/2) (y/2)^(K/2+i) / Gamma(K/2+i+1)."""
    with mpmath.workdps(40):
        y, half = mpmath.mpf(x) / series.beta, mpmath.mpf(series.K) / 2
        a = [mpmath.exp(mpmath.mpf(v)) for v in series.log_a]
        if tail == "cdf":  # C_i = sum_{j <= i} a_j
            weights = np.cumsum(a)
        else:  # T_i = sum_{j > i} a_j, summed from the far end (no 1 - C_i cancellation)
            weights = np.append(np.cumsum(a[::-1])[::-1][1:], mpmath.mpf(0))
        terms = [mpmath.exp(-y / 2 + (half + i) * mpmath.log(y / 2) - mpmath.loggamma(half + i + 1))
                 * weights[i] for i in range(n_terms)]
        head = 0 if tail == "cdf" else mpmath.gammainc(half, y / 2, regularized=True)
        return head + mpmath.fsum(terms), terms


@pytest.mark.parametrize("tail", ["cdf", "sf"])
def test_ruben_terms_all_matter_a_hand_sum_cut_early_is_rejected(tail):
    w = HYPO["K=20"]
    x = _hypo_point(w, tail)
    ref = _hypoexponential(w, x)[0 if tail == "cdf" else 1]
    series, small, mean = _series(np.repeat(w, 2))
    series.log_cdf_sf(np.array([x]), mean, small)  # grows the coefficients the point needs
    total, terms = _hand_sum(series, x, tail, series.log_a.size)
    assert _rel(float(total), ref) <= RTOL
    # the shortest head of the sum within RTOL, and the head one term shorter
    needed = next(n for n in range(1, len(terms) + 1)
                  if _rel(float(_hand_sum(series, x, tail, n)[0]), ref) <= RTOL)
    assert needed >= (10 if tail == "cdf" else 100)  # many terms matter at these points
    assert _rel(float(_hand_sum(series, x, tail, needed - 1)[0]), ref) > RTOL
