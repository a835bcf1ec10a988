"""The face of the library: the ``ustat-rl`` command line, the HTML report and the plots.

* :mod:`.cli`: the ``ustat-rl`` console script;
* :mod:`.report`: the self-contained HTML report of a verify run and of figures;
* :mod:`.plotting`, :mod:`.plotting_training`, :mod:`.plotting_pilot`: matplotlib figures;
* :mod:`.claims_display`, :mod:`.claims_markdown`, :mod:`.claims_compare`: a verify run's rows,
  the claims table (docs/claims.md) and the comparison of two runs' JSON.

Nothing below this layer imports it.
"""
