"""The Monte Carlo half of C28: the law of a projected GRPO gradient against its Edgeworth law."""

from __future__ import annotations

import numpy as np
from scipy import stats

from ..montecarlo import bandit_statistics
from ..theory.edgeworth import edgeworth_cdf, projected_grpo_cumulants

#: Level of the KS test in C28: rejects the exact finite-G law with probability 1e-4.
NORMALITY_ALPHA = 1e-4


def normality_pvalues(ctx, bandit, prompt: int, group_size: int, n_reps: int):
    """KS p-values of the projection of sqrt(G)(U - g) onto g/|g| (C28).

    The first tests the law with the claimed limit N(0, 4 zeta1) (at the exact finite-G variance)
    and its two Edgeworth terms from the exact cumulants; the second the same replicates, with the
    same corrections, against the wrong limit N(0, 2 zeta2). A KS test against the bare normal is
    a test of a false hypothesis at finite G (skewness -0.24 at G = 256 here), not a 1e-4 test.
    """
    g_x = bandit.grad_per_prompt[prompt]
    u = g_x / np.linalg.norm(g_x)
    kappa = projected_grpo_cumulants(bandit.policy[prompt], bandit.reward_prob[prompt],
                                     bandit.score_table[prompt] @ u, bandit.reward_values,
                                     group_size)
    skew, kurt = kappa[2] / kappa[1] ** 1.5, kappa[3] / kappa[1] ** 2
    comp = bandit.hoeffding(prompt)
    wrong_var = 2 * float(comp.outcome_prob @ ((comp.kernel - comp.h0) @ u) ** 2
                          @ comp.outcome_prob) / group_size
    stat, _ = bandit_statistics(bandit, ("grpo",), (group_size,), prompt=prompt,
                                direction=bandit.embed(prompt, u))
    rng = np.random.default_rng(ctx.seed_for("C28", group_size))
    centred = stat(rng, n_reps)[:, 1] - kappa[0]
    return tuple(float(stats.kstest(centred / np.sqrt(var), edgeworth_cdf,
                                    args=(skew, kurt)).pvalue) for var in (kappa[1], wrong_var))
