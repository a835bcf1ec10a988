"""Beyond the paper: the answering routes no other claim ran (docs/theory.md C60-C64 and C80;
C65-C79 and C81-C84 are in :mod:`ustat_rl.claims.beyond_answers`).

* :mod:`.reductions`: C60, every loss reduction's per-completion weights against the
  framework's arithmetic written out token by token;
* :mod:`.monitor_entry`: C61, the framework-agnostic ``WindowMonitor`` with per-step loss
  weights against ``window_record`` on weighted scores;
* :mod:`.sharded`: C62, the factored sketch sharded by FSDP2 over two gloo processes against
  the unsharded model;
* :mod:`.small_pilot`: C63, the coverage of the pilot's intervals under 32 prompts;
* :mod:`.best_set`: C64, the level of the advice study's best-G set on planted tables;
* :mod:`.causal_lm_routes`: C80, a causal LM's pilot on every projection route: its sampler's
  law, its log-probability, its scores against autograd and each projection's law.

Each module registers its claims when imported (:func:`ustat_rl.claims.load_checks`).
"""
