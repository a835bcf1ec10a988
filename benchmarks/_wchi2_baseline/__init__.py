"""The pre-compilation ``WeightedChiSquare`` (pure numpy, commit d64fd06), kept as the named baseline of bench_weighted_chi2.py.

The three modules are verbatim copies of ustat_rl/weighted_chi2/ at that commit, except that
``_distribution`` imports the input validator by its absolute name. Do not edit them: the
benchmark's "before" column is only meaningful while this is the code that was replaced.
"""

from ._distribution import WeightedChiSquare

__all__ = ["WeightedChiSquare"]
