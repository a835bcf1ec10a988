"""Weighted chi-square law of Theorem 8 (docs/theory.md C20), with goodness-of-fit tests.

``WeightedChiSquare(weights)`` is the law of ``sum_k w_k Z_k^2``; ``goodness_of_fit_tests``
compares a sample with it (Kolmogorov-Smirnov, Cramer-von Mises, Anderson-Darling).
"""

from ._distribution import WeightedChiSquare
from ._gof import GofResult, anderson_darling_pvalue, goodness_of_fit_tests

__all__ = ["WeightedChiSquare", "GofResult", "goodness_of_fit_tests", "anderson_darling_pvalue"]
