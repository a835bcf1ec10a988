"""Claims that run the routes a user's answers come from, against exact answers (beyond the paper).

The theorem checks run the maths behind the toolkit; these run what the toolkit hands a user,
where a bug can hide behind a fallback or a seed average (docs/theory.md C43-C44):

* ``C43``: Ruben's series on its own (``method="ruben"``, which returns NaN where it cannot
  certify a point, instead of ``"auto"``'s silent fallback to inversion) at cdf and sf 1e-12,
  against the exact hypoexponential law of weights of multiplicity two and, for odd
  multiplicities, the mpmath references;
* ``C44``: the pilot's default (factored) sketch of a model whose full per-sample scores are
  known: the sketch equals the full scores times its materialised matrix (with a plain
  embedding, and with one that scales its rows inside the module, as Gemma's does), and
  projected inner products averaged over independent blocks match the exact ones.

Exact comparisons have rounding tolerances (no false-failure rate); the statistical ones state
their rates.
"""

from __future__ import annotations

import math

import numpy as np

from ..scores.families import tiny_causal_lm
from ..tolerances import Z_CHECK
from .registry import check_close, check_exact, check_true, register

# ---------------------------------------------------------------------------------------------
# C43: Ruben's series alone in the deep tails
# ---------------------------------------------------------------------------------------------

#: Tail probability at which the series is evaluated, on either side.
SERIES_TAIL = 1e-12
#: Relative tolerance of the series there: 4500 float64 roundings (measured at most 3.1e-14,
#: for the spread-100 weights whose upper tail needs 8600 coefficients).
SERIES_RTOL = 1e-12
#: Digits of the exact hypoexponential sums (alternating: 80 digits cover the cancellation).
HYPO_DPS = 80
#: Relative error of the weights in the negative control: it moves sf at the sf points by about
#: x / (2 w_min) times this, at least 1e-7 here, far above ``SERIES_RTOL``.
WRONG_WEIGHTS = 1e-8

#: Distinct weights of multiplicity two (so ``Q`` is a sum of exponentials): K = 6, 20, three
#: scales of weights, and spreads of 50 and 100 whose upper tails need thousands of coefficients.
HYPO_CASES = {
    "K=6": (0.5, 1.0, 2.0),
    "K=20": tuple(np.linspace(0.5, 2.0, 10)),
    "K=6, w ~ 1e-3": (1e-3, 2e-3, 5e-3),
    "K=6, w ~ 100": (30.0, 70.0, 100.0),
    "K=6, spread 100": (0.01, 0.1, 1.0),
    "K=8, spread 50": (0.02, 0.3, 0.5, 1.0),
}
#: Odd multiplicities (K/2 a half-integer), against the mpmath Gil-Pelaez reference.
ODD_CASES = {"K=3": (0.3, 1.0, 1.7)}


def hypoexponential_probabilities(weights, x, dps: int = HYPO_DPS):
    """Exact ``(cdf, sf, pdf)`` at ``x`` of ``sum_d w_d chi2_2`` for distinct ``w_d`` (mpmath).

    ``w chi2_2`` is exponential with rate ``1/(2w)``, so the sum is hypoexponential:
    ``sf(x) = sum_d exp(-x/(2 w_d)) prod_{j != d} w_d / (w_d - w_j)`` and
    ``pdf(x) = sum_d exp(-x/(2 w_d)) / (2 w_d) prod_{j != d} w_d / (w_d - w_j)``; the cdf is
    ``1 - sf`` at ``dps`` digits, exact at every tail the checks use.
    """
    import mpmath

    with mpmath.workdps(dps):
        w = [mpmath.mpf(float(v)) for v in weights]
        if len(set(w)) != len(w):
            raise ValueError(f"`weights` must be distinct, got {list(weights)}")
        x = mpmath.mpf(float(x))
        parts = [(mpmath.exp(-x / (2 * wd)) * mpmath.fprod([wd / (wd - wj) for wj in w
                                                            if wj != wd]), wd) for wd in w]
        sf = mpmath.fsum(term for term, _ in parts)
        pdf = mpmath.fsum(term / (2 * wd) for term, wd in parts)
        return 1 - sf, sf, pdf


def _tail_point(weights, tail: str) -> float:
    """``x`` with exact cdf (``tail="cdf"``) or sf equal to ``SERIES_TAIL`` to about 1e-15 relative
    (bisection on ``log x``, the probability monotone in ``x``)."""
    total = float(np.sum(weights))
    if tail == "cdf":
        lo, hi = 1e-9 * total, total
        below = lambda x: float(hypoexponential_probabilities(weights, x)[0]) < SERIES_TAIL  # noqa: E731
    else:
        lo, hi = total, 1e3 * total
        below = lambda x: float(hypoexponential_probabilities(weights, x)[1]) > SERIES_TAIL  # noqa: E731
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if below(mid) else (lo, mid)
    return math.sqrt(lo * hi)


def _series_point_checks(name, law, x, exact, tail, kinds=("cdf", "sf", "pdf")) -> list:
    """The series alone at ``x`` against ``exact`` (a dict kind -> value): the point lies beyond
    the small-x expansion, and every kind is within ``SERIES_RTOL`` (NaN: not certified)."""
    checks = [check_true(f"{name}, {tail} {SERIES_TAIL:g}: x = {x:.6g} is a series point "
                         f"(beyond the small-x expansion)", x > float(law._small[0]), x,
                         note="the series, not the x -> 0 expansion, is what is evaluated")]
    for kind in kinds:
        ref = float(exact[kind])
        checks.append(check_exact(f"{name}, {tail} {SERIES_TAIL:g}: Ruben {kind}({x:.6g})", ref,
                                  float(getattr(law, kind)(x)), rtol=SERIES_RTOL, atol=0.0,
                                  note="method='ruben': NaN where the series cannot certify"))
    return checks


@register("C43", "Beyond the paper: Ruben's series alone (no fallback) matches the exact law at "
          "cdf and sf 1e-12, densities included, for weights of every scale and spreads up to 100",
          "derived (docs/theory.md C43; the law of C20 in its deep tails)",
          "WeightedChiSquare(method='ruben') against the exact hypoexponential law (weights of "
          "multiplicity 2, mpmath at 80 digits) and the mpmath Gil-Pelaez reference (K = 3)")
def check_c43(ctx) -> list:
    from ..weighted_chi2 import WeightedChiSquare
    from ..weighted_chi2._reference import reference_probability

    checks = []
    rejected = []
    for name, w in HYPO_CASES.items():
        law = WeightedChiSquare(np.repeat(w, 2), method="ruben")
        for tail in ("cdf", "sf"):
            x = _tail_point(w, tail)
            exact = dict(zip(("cdf", "sf", "pdf"), hypoexponential_probabilities(w, x)))
            checks += _series_point_checks(name, law, x, exact, tail)
            wrong = float(hypoexponential_probabilities(np.multiply(w, 1 + WRONG_WEIGHTS),
                                                        x)[0 if tail == "cdf" else 1])
            got = float(getattr(law, tail)(x))
            rejected.append(not abs(got - wrong) <= SERIES_RTOL * abs(wrong))
    for name, w in ODD_CASES.items():
        w = np.asarray(w)
        law = WeightedChiSquare(w, method="ruben")
        placer = WeightedChiSquare(w, method="inversion")  # only places the point
        for tail in ("cdf", "sf"):
            x = float(placer.ppf(SERIES_TAIL) if tail == "cdf" else placer.isf(SERIES_TAIL))
            ref, err = reference_probability(w, x, tail)
            checks.append(check_true(f"{name}, {tail} {SERIES_TAIL:g}: the reference's error "
                                     f"estimate is below 1e-14", float(err) < 1e-14, float(err)))
            checks += _series_point_checks(name, law, x, {tail: ref}, tail, kinds=(tail,))
    checks.append(check_true(
        f"negative control: weights {WRONG_WEIGHTS:g} too large are rejected at every "
        f"hypoexponential point", all(rejected), float(sum(rejected)),
        note=f"{sum(rejected)} of {len(rejected)} points; the comparison resolves a relative "
             f"error of 1e-12"))
    return checks


# ---------------------------------------------------------------------------------------------
# C44: the pilot's default (factored) sketch against exact per-sample scores
# ---------------------------------------------------------------------------------------------

#: Independent blocks per sketch and the block shape ``k_o x k_i`` of the statistical check:
#: every block of a sketch is an independent unbiased estimate of each inner product, so one
#: call gives ``SKETCH_BLOCKS`` replicates. ``3 x 3`` (not ``1 x k``) makes both factors' scales
#: matter: one factor unscaled multiplies the matrices' part of every inner product by 3.
SKETCH_BLOCKS, SKETCH_BLOCK_SHAPE = 256, (3, 3)
#: Independent sketches (seeds) in the quick and full runs: 4096 and 16384 block replicates.
SKETCH_SEEDS = (16, 64)
#: Pairs of samples whose projected inner products are compared; ``(i, i)`` is a squared norm.
SKETCH_PAIRS = ((0, 0), (1, 1), (2, 2), (0, 1), (1, 2), (0, 2))
#: ``(k, blocks)`` of the exact comparison of the sketch with full scores times its matrix.
SKETCH_EXACT_SIZES = ((12, 1), (12, 3), (8, 4))


#: The scale of C44's scaled embedding: ``sqrt(width)``, as Gemma multiplies its embeddings by
#: ``sqrt(hidden_size)`` inside the embedding module (``embed_scale``).
EMBED_SCALE = 5**0.5


def _scored_model(embed_scale: float | None = None):
    """:func:`tiny_causal_lm` in float64, its parameters drawn from a fixed
    ``torch.Generator``, and a padded batch of 4 rows: ``(model, tokens, mask)``."""
    import torch

    gen = torch.Generator().manual_seed(4401)
    with torch.random.fork_rng(devices=[]):  # the modules' default init leaves no trace
        model = tiny_causal_lm(embed_scale).double()
    with torch.no_grad():
        for param in model.parameters():  # layer-norm scales and biases away from 1 and 0
            param.copy_(0.7 * torch.randn(param.shape, generator=gen, dtype=torch.float64))
    tokens = torch.randint(0, 9, (4, 7), generator=gen)  # (b, t)
    mask = torch.zeros(4, 7, dtype=torch.float64)
    mask[:, 3:] = 1.0
    mask[0, 5:] = 0.0  # padding after an end token
    return model, tokens, mask


def _model_full_scores(model, tokens, mask) -> np.ndarray:
    """Exact per-sample scores ``(b, d)`` by ``ustat_rl.scores.sketch.full_scores``."""
    from ..scores.sequence import sequence_log_probs
    from ..scores.sketch import full_scores

    params = {name: p.detach() for name, p in model.named_parameters()}

    def log_prob(p, sample):
        return sequence_log_probs(model, sample[0][None], sample[1][None], params=p)[0]

    model.eval()
    return full_scores(log_prob, params, (tokens, mask))


#: ``(k, blocks)`` of the exact comparisons on the model with a scaled embedding.
SCALED_EXACT_SIZES = ((12, 3),)


def _exact_sketches(model, tokens, mask, sizes):
    """``(kind, k, blocks, sketch (b, k), matrix (k, d))`` for each kind and each ``(k, blocks)``
    of ``sizes``: the factored sketch at seed 7 and the matrix it applies, materialised."""
    from ..scores.factored import factored_projection_matrix, factored_sketch_scores
    from ..scores.spec import FACTORED_KINDS, SketchSpec

    for kind in FACTORED_KINDS:
        for k, blocks in sizes:
            spec = SketchSpec(k, seed=7, blocks=blocks, kind=kind)
            sketch = factored_sketch_scores(model, tokens, mask, spec).numpy()
            yield kind, k, blocks, sketch, factored_projection_matrix(model, spec)


def _scaled_embedding_checks() -> list:
    """The exact identity on :func:`tiny_causal_lm` with a Gemma-style scaled embedding, and its
    negative control: the full scores with the embedding's block divided by the scale (what a
    sketch that drops the scale computes) are rejected by the same comparison."""
    from ..scores.coverage import parameter_coverage

    model, tokens, mask = _scored_model(EMBED_SCALE)
    full = _model_full_scores(model, tokens, mask)  # (b, d)
    sizes = {name: p.numel() for name, p in model.named_parameters()}
    start = sum(sizes[name] for name in list(sizes)[:list(sizes).index("embed.weight")])
    unscaled = full.copy()
    unscaled[:, start:start + sizes["embed.weight"]] /= EMBED_SCALE
    rule = parameter_coverage(model)["embed.weight"]
    checks = [check_true(f"scaled embedding (x sqrt(5), as Gemma's): covered by the embedding "
                         f"rule, got {rule!r}", rule == "embedding", float(rule == "embedding"))]
    rejected = []
    for kind, k, blocks, sketch, matrix in _exact_sketches(model, tokens, mask,
                                                           SCALED_EXACT_SIZES):
        checks.append(check_exact(f"scaled embedding, {kind}, k = {k}, {blocks} block(s): "
                                  f"sketch == full scores x R^T", full @ matrix.T, sketch,
                                  rtol=1e-10, atol=1e-12, note="float64 rounding"))
        rejected.append(not check_exact("", unscaled @ matrix.T, sketch, rtol=1e-10,
                                        atol=1e-12).passed)
    checks.append(check_true("negative control: scores with the embedding's scale dropped are "
                             "rejected by the same comparison", all(rejected),
                             float(sum(rejected)),
                             note="the embedding block divided by sqrt(5)"))
    return checks


def block_inner_products(sketch: np.ndarray, blocks: int, pairs) -> np.ndarray:
    """``m <P_i^g, P_j^g>`` per block ``g`` and pair ``(i, j)``: ``(m, n_pairs)``.

    Block ``g`` of a factored sketch is ``m^(-1/2) (A_g (x) B_g) W_i``, so ``m`` times its inner
    product is an unbiased estimate of ``<W_i, W_j>``, independent across blocks; their mean is
    the whole sketch's inner product.
    """
    s = sketch.reshape(sketch.shape[0], blocks, -1)  # (b, m, k/m)
    return np.stack([blocks * np.sum(s[i] * s[j], axis=-1) for i, j in pairs], axis=1)


@register("C44", "Beyond the paper: the pilot's default factored sketch is the full per-sample "
          "scores times its materialised matrix (a plain embedding and a Gemma-style scaled "
          "one), and its projected inner products are unbiased for the exact ones (the "
          "inner products of nearly orthogonal scores only to tens of percent: docs/power.md)",
          "derived (docs/theory.md C44; the sketches behind C31)",
          "factored_sketch_scores on a small float64 causal LM against ustat_rl.scores.sketch."
          "full_scores times factored_projection_matrix; block inner products over independent "
          "sketches against the exact <W_i, W_j>")
def check_c44(ctx) -> list:
    from ..scores.factored import (
        block_factors,
        factored_sketch_scores,
        uncovered_parameters,
    )
    from ..scores.spec import SketchSpec

    model, tokens, mask = _scored_model()
    full = _model_full_scores(model, tokens, mask)  # (b, d)
    checks = [check_true("every parameter is covered by a fast projector (no fallback)",
                         uncovered_parameters(model) == [], float(len(uncovered_parameters(model))))]
    for kind, k, blocks, sketch, matrix in _exact_sketches(model, tokens, mask,
                                                           SKETCH_EXACT_SIZES):
        checks.append(check_exact(f"{kind}, k = {k}, {blocks} block(s): sketch == full "
                                  f"scores x R^T", full @ matrix.T, sketch, rtol=1e-10,
                                  atol=1e-12, note="float64 rounding"))
    checks += _scaled_embedding_checks()
    k_out, k_in = SKETCH_BLOCK_SHAPE
    k = SKETCH_BLOCKS * k_out * k_in
    if block_factors(k_out * k_in) != SKETCH_BLOCK_SHAPE:  # kept under python -O
        raise RuntimeError(f"block_factors({k_out * k_in}) is not {SKETCH_BLOCK_SHAPE}")
    rows = SKETCH_PAIRS[-1][1] + 1
    exact = np.array([full[i] @ full[j] for i, j in SKETCH_PAIRS])
    rng = np.random.default_rng(ctx.seed_for("C44"))
    n_seeds = ctx.reps(*SKETCH_SEEDS)
    values = np.concatenate([
        block_inner_products(factored_sketch_scores(model, tokens[:rows], mask[:rows], SketchSpec(
            k, int(seed), blocks=SKETCH_BLOCKS)).numpy(), SKETCH_BLOCKS, SKETCH_PAIRS)
        for seed in rng.integers(0, 2**31 - 1, n_seeds)])  # (n_seeds m, n_pairs)
    mean = values.mean(axis=0)
    se = values.std(axis=0, ddof=1) / math.sqrt(values.shape[0])
    for (i, j), pred, got, err in zip(SKETCH_PAIRS, exact, mean, se):
        checks.append(check_close(f"<R W_{i}, R W_{j}> averaged over {values.shape[0]} blocks "
                                  f"= <W_{i}, W_{j}>", pred, got, err, z=Z_CHECK,
                                  note=f"{n_seeds} sketches of {SKETCH_BLOCKS} independent "
                                       f"{k_out} x {k_in} blocks"))
    # negative control: the same comparison rejects the projection with one factor unscaled
    # (the inner products' matrix part times k_i), on the squared norms, which are positive
    wrong = [abs(k_in * got - pred) > Z_CHECK * k_in * err
             for (i, j), pred, got, err in zip(SKETCH_PAIRS, exact, mean, se) if i == j]
    checks.append(check_true(f"negative control: squared norms {k_in} times too large (R times "
                             f"sqrt({k_in})) are rejected ({Z_CHECK:g} se)", all(wrong),
                             float(sum(wrong)), evidence="monte-carlo",
                             note="a power check: one factor unscaled multiplies the matrices' "
                                  "share of them by the same"))
    return checks
