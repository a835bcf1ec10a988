"""Beyond the paper: the frameworks' conventions and logs (docs/theory.md C45, C46, C51, C52,
C55, C56, C57).

* :mod:`.adapters`: C45, C45.trl, the verl and TRL adapters and the rewards-only report;
* :mod:`.batch_rules`: C57, the rules with batch statistics at a finite batch on both backends;
* :mod:`.conventions`: C46, every registered convention's exact moments and literal formula;
* :mod:`.dynamic_sampling`: C51, DAPO's dynamic sampling against verl's loop;
* :mod:`.group_filters`: C55, C55.polaris, other frameworks' group filters and SkyRL's POLARIS replace
  against their loops;
* :mod:`.logs`: C56, ``ustat-rl logs``' bounds against the exact all-equal fraction;
* :mod:`.multireward`: C52, the multi-reward rules' exact moments.

Each module registers its claims when imported (:func:`ustat_rl.claims.load_checks`).
"""
