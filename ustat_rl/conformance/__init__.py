"""The conformance kit: does an implementation compute an advantage rule? (``ustat-rl conformance``)

A layer above the rules it checks (:mod:`ustat_rl.advantages`), and importing nothing else of
the library:

* :mod:`.kit`: the single-reward kit, :func:`check_conformance` and :func:`check_batch` against
  a named convention, with the tolerance every correct implementation meets (:func:`tolerance`);
* :mod:`.multichannel`: the same for multi-reward rules (``fn(rewards (n, K), group_ids,
  weights)``);
* :mod:`.adapters`: verl-style and TRL-style functions turned into the kit's form, and
  ``module:function`` targets loaded;
* :mod:`.search`: the hypothesis search both kits run (its settings one :class:`Search`), and
  the command's exit codes.

hypothesis is imported only when a search runs.
"""

from .kit import (
    CONVENTION_NAMES,
    INDEX_KINDS,
    SIGNATURES,
    ConformanceFailure,
    ConformanceReport,
    TargetError,
    adapt,
    check_batch,
    check_conformance,
    load_function,
    run_command,
    tolerance,
)
from .multichannel import (
    check_multichannel_conformance,
    multichannel_tolerance,
    run_multichannel_command,
)
from .search import Search

__all__ = ["CONVENTION_NAMES", "SIGNATURES", "INDEX_KINDS", "ConformanceFailure",
           "ConformanceReport", "Search", "TargetError", "check_conformance", "check_batch",
           "tolerance", "adapt", "load_function", "run_command", "check_multichannel_conformance",
           "multichannel_tolerance", "run_multichannel_command"]
