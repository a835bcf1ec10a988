"""Beyond the paper: the monitor inside a training run (docs/theory.md C47-C49, C53).

* :mod:`.trainer`: C47, the gradient the trainer computes;
* :mod:`.window`: C48, C49, a monitored window and the trajectory's verdict;
* :mod:`.run_noise`: C53, the variance and MSE at the run's own G.

Each module registers its claims when imported (:func:`ustat_rl.claims.load_checks`).
"""
