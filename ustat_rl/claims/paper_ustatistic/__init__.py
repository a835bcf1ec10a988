"""The GRPO gradient as a U-statistic: Lemma 1, Theorem 2, Proposition 3, Corollaries 4 and 5 and
the gradient-MSE figure (Figure 4), with the U-statistic CLT and the reward scaling (C1-C11, C28,
C30; docs/theory.md C1-C11).

* :mod:`.lemma1`: C1, C1.loo, C2, C2.kit, C3, C3.enum, C4, C28;
* :mod:`.mse`: C5, C5.tf, C7, C30;
* :mod:`.minibatch`: C6, C6.engine, C6.torch;
* :mod:`.baselines`: C8, C9, C10, C11, C11.tf.

Each module registers its claims when imported (:func:`ustat_rl.claims.load_checks`).
"""
