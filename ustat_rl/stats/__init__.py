"""General statistics the theory and the checks are measured with, none of them GRPO's own.

* :mod:`.ustatistics`: order-2 U-statistics, their Hoeffding decomposition and variance;
* :mod:`.rates`: ``MSE(G) = a/G + b/G^2`` fits and log-log slopes, weighted by the Monte Carlo
  uncertainty;
* :mod:`.intervals`: percentile intervals and the verdict of a ratio's interval, with an index
  of where the library's other intervals live;
* :mod:`.coverage_band`: whether a coverage study's measured rate lies in the band of its
  nominal level, within binomial standard errors;
* :mod:`.best_set`: Welch's two-sample comparison and a study's best-G confidence set (the
  sizes not significantly below the empirically best, Bonferroni over the others);
* :mod:`.nonnegative`: a lower margin for a mean of non-negative, heavy-tailed replicates
  (Maurer's bound) from their exact second moments.

The weighted chi-square law of Theorem 8 has a package of its own,
:mod:`ustat_rl.weighted_chi2`, in the layer above. Nothing is imported here, so that
``import ustat_rl.stats.intervals`` does not load scipy or statsmodels.
"""
