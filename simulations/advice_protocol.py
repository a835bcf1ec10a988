"""The advice study's analysis, fixed before its runs (docs/advice_wins.md, "Protocol").

From a table of finished GRPO runs (one row per condition, phase, N, G, learning rate and seed,
with its final held-out reward) and the pilots' advice per (condition, N), it computes the
protocol's primary endpoint, its tests and its verdict, and the shape tests. Nothing here reads a
run's outcome to choose what is tested: the conditions, grids, seeds, rules and the pass/fail line
are the protocol's constants below.

* A *cell* is one (condition, N) at the protocol's learning rate ``PRIMARY_LR``.
* The *best grid G* of a cell is the size of highest mean final reward on the **exploration**
  seeds; every quantity is then scored on the **confirmation** seeds, so the best's winner's
  curse (its exploration mean is biased upward) does not enter the endpoint.
* The *regret* of a rule in a cell: the confirmation mean of the best grid G minus that of the
  rule's G. Rules: each advice (taken to the grid's nearest size on a log scale), G = 8 (TRL's
  default), G = 4, the grid's smallest G, and a random grid G (the regret averaged over the grid).
* The *primary endpoint*: the regret pooled over cells (their mean), with its 95% interval, for
  the primary advice and for each fixed rule; the *comparisons*: the pooled difference of regrets
  advice minus rule (the best's mean cancels: a difference of confirmation means), one-sided
  Welch-Satterthwaite t tests in both directions, Holm's adjustment over the four fixed rules.
* The *verdict* of an advice: ``"uninformative"`` when the negative control fails (the grid's
  worst size on exploration is not significantly below the best on confirmation, pooled,
  one-sided at 5%); else ``"fail"`` when the advice is significantly worse than some fixed rule;
  ``"pass"`` when it is significantly better than both G = 8 and the random grid G and worse than
  none; ``"inconclusive"`` otherwise.

Every interval and test treats runs as independent draws; a cell's mean over ``n`` seeds has
variance ``s^2/n`` from its seeds' spread, and a combination of cell means gets the
Welch-Satterthwaite degrees of freedom.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

#: The learning rate of the primary endpoint's cells.
PRIMARY_LR = 5e-4
#: Family-wise level of each advice's tests against the fixed rules (Holm), and of the negative
#: control; intervals are two-sided at 1 - ALPHA.
ALPHA = 0.05
#: The fixed rules the advice is compared with: name -> the G it picks from a grid.
FIXED_RULES = {"G=8": lambda grid: 8, "G=4": lambda grid: 4, "smallest G": min}
#: The advice columns of the pilots' table, primary first.
ADVICE = ("advice_trained_scale_free", "advice_trained_mse", "pilot_advice")
#: Permutations drawn for each shape test's rank correlation (p-value resolution 1e-4).
PERMUTATIONS = 10_000


def nearest_on_grid(grid, value: float) -> int:
    """The grid's size nearest ``value`` on a log scale (the smaller one on a tie)."""
    grid = np.asarray(sorted(grid), dtype=float)
    distance = np.abs(np.log(grid) - math.log(float(value)))
    return int(grid[int(np.argmin(distance))])


def _combination(weights: dict, means: dict, variances: dict, counts: dict):
    """``sum_j w_j mean_j``, its standard error and Welch-Satterthwaite degrees of freedom."""
    value = sum(w * means[j] for j, w in weights.items())
    parts = [w * w * variances[j] / counts[j] for j, w in weights.items() if w != 0.0]
    var = sum(parts)
    dfs = [counts[j] - 1 for j, w in weights.items() if w != 0.0]
    df = (var * var / sum(p * p / d for p, d in zip(parts, dfs) if d > 0)
          if var > 0 else math.inf)
    return float(value), math.sqrt(var), float(df)


def _check(runs: pd.DataFrame) -> None:
    needed = {"condition", "phase", "N", "G", "learning_rate", "seed", "final_reward"}
    missing = needed - set(runs.columns)
    if missing:
        raise ValueError(f"`runs` lacks the columns {sorted(missing)}")
    if not np.all(np.isfinite(runs["final_reward"].to_numpy(float))):
        raise ValueError("`runs`: a final reward is NaN (a run did not finish)")
    if set(runs["phase"]) - {"exploration", "confirmation"}:
        raise ValueError("`runs`: phase must be 'exploration' or 'confirmation'")


def cell_regrets(runs: pd.DataFrame, advice: pd.DataFrame, lr: float = PRIMARY_LR):
    """Per cell: the best grid G on exploration, each rule's G, and per G the confirmation mean,
    variance and count. Returns ``(cells, stats)``: ``cells`` a DataFrame (one row per cell),
    ``stats`` a dict cell -> (means, variances, counts) by G."""
    _check(runs)
    chosen = runs[np.isclose(runs["learning_rate"], lr)]
    rows, moments = [], {}
    for (condition, N), cell in chosen.groupby(["condition", "N"]):
        explore = cell[cell["phase"] == "exploration"].groupby("G")["final_reward"]
        confirm = cell[cell["phase"] == "confirmation"].groupby("G")["final_reward"]
        grid = sorted(set(explore.groups) & set(confirm.groups))
        if len(grid) < 2:
            continue
        e_mean = explore.mean()
        if np.ptp(cell["final_reward"].to_numpy(float)) == 0.0:
            raise ValueError(f"every run of cell ({condition}, N = {N}) ended with the same final "
                             "reward: the cell cannot tell sizes apart, no best G is named")
        best = max(grid, key=lambda G: (e_mean[G], -G))
        worst = min(grid, key=lambda G: (e_mean[G], G))
        means = {G: float(confirm.mean()[G]) for G in grid}
        variances = {G: float(confirm.var(ddof=1)[G]) for G in grid}
        counts = {G: int(confirm.count()[G]) for G in grid}
        row = dict(condition=condition, N=int(N), grid=" ".join(map(str, grid)), best_G=best,
                   worst_G=worst, best_mean=means[best])
        match = advice[(advice["condition"] == condition) & (advice["N"] == N)]
        for column in ADVICE:
            if len(match) and column in match and math.isfinite(float(match[column].iloc[0])):
                row[column] = nearest_on_grid(grid, float(match[column].iloc[0]))
        for name, pick in FIXED_RULES.items():
            row[name] = nearest_on_grid(grid, pick(grid))
        rows.append(row)
        moments[(condition, int(N))] = (means, variances, counts)
    if not rows:
        raise ValueError("`runs` holds no cell with two or more sizes in both phases at the "
                         f"learning rate {lr:g}")
    return pd.DataFrame(rows), moments


def _rule_weights(row, rule: str, grid) -> dict:
    """Weights on the confirmation means whose sum is the rule's regret in the cell."""
    if rule == "random G":
        weights = {G: -1.0 / len(grid) for G in grid}
    else:
        weights = {G: 0.0 for G in grid}
        weights[int(row[rule])] = -1.0
    weights[int(row["best_G"])] = weights.get(int(row["best_G"]), 0.0) + 1.0
    return weights


def _pooled(cells: pd.DataFrame, moments: dict, weights_of) -> tuple[float, float, float]:
    """Mean over cells of a per-cell combination: value, standard error, Satterthwaite df."""
    values, parts, dfs = [], [], []
    for row in cells.to_dict("records"):
        means, variances, counts = moments[(row["condition"], row["N"])]
        grid = sorted(means)
        value, se, df = _combination(weights_of(row, grid), means, variances, counts)
        values.append(value)
        parts.append(se * se)
        dfs.append(df)
    k = len(values)
    var = sum(parts) / k**2
    df = (var * var / sum((p / k**2) ** 2 / d for p, d in zip(parts, dfs) if math.isfinite(d)
                          and d > 0)) if var > 0 else math.inf
    return float(np.mean(values)), math.sqrt(var), float(df)


def _interval(value, se, df, level=1 - ALPHA):
    half = stats.t.ppf(0.5 + level / 2, df) * se if se > 0 and math.isfinite(df) else (
        stats.norm.ppf(0.5 + level / 2) * se)
    return value - half, value + half


def _p_below(value, se, df) -> float:
    """One-sided p-value of ``value < 0``."""
    if se == 0:
        return 0.0 if value < 0 else 1.0
    return float(stats.t.cdf(value / se, df if math.isfinite(df) else 1e9))


def holm(pvalues) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error at any level)."""
    p = np.asarray(pvalues, dtype=float)
    order = np.argsort(p)
    adjusted = np.empty_like(p)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (p.size - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def endpoint(runs: pd.DataFrame, advice: pd.DataFrame, lr: float = PRIMARY_LR):
    """The primary endpoint and its tests for every advice column, and the verdicts.

    Returns ``(cells, table, verdicts)``: the per-cell choices; per (advice, rule) the pooled
    regret with its interval and the pooled difference advice - rule with its Holm-adjusted
    one-sided p-values (``p_better``: the advice's regret is lower; ``p_worse``: higher); per
    advice its verdict, with the negative control's pooled regret of the worst size.
    """
    cells, moments = cell_regrets(runs, advice, lr)
    rules = list(FIXED_RULES) + ["random G"]
    rows, verdicts = [], []
    control = _pooled(cells, moments, lambda row, grid: _rule_weights(
        dict(row, worst=row["worst_G"]), "worst", grid))
    control_p = _p_below(-control[0], control[1], control[2])  # is the worst's regret > 0?
    for column in ADVICE:
        if column not in cells or cells[column].isna().any():
            continue
        regret = _pooled(cells, moments, lambda row, grid: _rule_weights(row, column, grid))
        low, high = _interval(*regret)
        block = []
        for rule in rules:
            level = _pooled(cells, moments, lambda row, grid: _rule_weights(row, rule, grid))

            def difference(row, grid, rule=rule):
                a, b = _rule_weights(row, column, grid), _rule_weights(row, rule, grid)
                return {G: a.get(G, 0.0) - b.get(G, 0.0) for G in grid}

            diff = _pooled(cells, moments, difference)
            d_low, d_high = _interval(*diff)
            r_low, r_high = _interval(*level)
            block.append(dict(advice=column, rule=rule, advice_regret=regret[0],
                              advice_low=low, advice_high=high, rule_regret=level[0],
                              rule_low=r_low, rule_high=r_high, difference=diff[0],
                              difference_low=d_low, difference_high=d_high,
                              p_better=_p_below(*diff),
                              p_worse=_p_below(-diff[0], diff[1], diff[2])))
        better = holm([b["p_better"] for b in block])
        worse = holm([b["p_worse"] for b in block])
        for b, pb, pw in zip(block, better, worse):
            b.update(p_better_holm=float(pb), p_worse_holm=float(pw))
        rows.extend(block)
        by_rule = {b["rule"]: b for b in block}
        if not control_p < ALPHA:
            verdict = "uninformative"
        elif any(b["p_worse_holm"] < ALPHA for b in block):
            verdict = "fail"
        elif (by_rule["G=8"]["p_better_holm"] < ALPHA
              and by_rule["random G"]["p_better_holm"] < ALPHA):
            verdict = "pass"
        else:
            verdict = "inconclusive"
        verdicts.append(dict(advice=column, verdict=verdict, regret=regret[0], low=low,
                             high=high, cells=len(cells), control_regret=control[0],
                             control_p=control_p,
                             advised_sizes=" ".join(str(int(v)) for v in cells[column])))
    return cells, pd.DataFrame(rows), pd.DataFrame(verdicts)


def _rank_correlation(x, y, rng) -> tuple[float, float]:
    """Spearman's correlation of ``x`` and ``y`` and its one-sided permutation p-value
    (``PERMUTATIONS`` shuffles of ``y``'s ranks, the observed order counted once)."""
    rx = stats.rankdata(x) - (len(x) + 1) / 2.0
    ry = stats.rankdata(y) - (len(y) + 1) / 2.0
    scale = math.sqrt(float(rx @ rx) * float(ry @ ry))
    rho = float(rx @ ry) / scale
    shuffled = rng.permuted(np.tile(ry, (PERMUTATIONS, 1)), axis=1)  # (PERMUTATIONS, k)
    draws = shuffled @ rx / scale
    return rho, float((1 + np.sum(draws >= rho - 1e-12)) / (PERMUTATIONS + 1))


def shape_tests(runs: pd.DataFrame, predicted: pd.DataFrame, lr: float = PRIMARY_LR,
                seed: int = 0) -> pd.DataFrame:
    """Per (condition, N, target): the predicted error curve against the observed confirmation
    curve over the grid.

    ``predicted`` has columns condition, N, target, G, error (a pilot's predicted error, lower
    is better). ``rho``: Spearman's correlation of ``-error`` with the mean final reward, its
    one-sided permutation p-value (``PERMUTATIONS`` draws from ``seed``); the asymmetry test:
    the law names the worse end of the grid (smallest or largest G, the larger predicted
    error), and a one-sided Welch t test asks whether that end's reward is lower
    (``p_asymmetry``).
    """
    _check(runs)
    rng = np.random.default_rng(seed)
    chosen = runs[np.isclose(runs["learning_rate"], lr) & (runs["phase"] == "confirmation")]
    rows = []
    for (condition, N, target), curve in predicted.groupby(["condition", "N", "target"]):
        cell = chosen[(chosen["condition"] == condition) & (chosen["N"] == N)]
        observed = cell.groupby("G")["final_reward"]
        grid = sorted(set(observed.groups) & set(curve["G"]))
        if len(grid) < 3:
            continue
        error = curve.set_index("G")["error"].reindex(grid).to_numpy(float)
        mean = observed.mean().reindex(grid).to_numpy(float)
        rho, p_rho = _rank_correlation(-error, mean, rng)
        small, large = grid[0], grid[-1]
        worse, other = (small, large) if error[0] > error[-1] else (large, small)
        a = cell[cell["G"] == worse]["final_reward"].to_numpy(float)
        b = cell[cell["G"] == other]["final_reward"].to_numpy(float)
        t = stats.ttest_ind(a, b, equal_var=False, alternative="less")
        rows.append(dict(condition=condition, N=int(N), target=target, rho=float(rho),
                         p_rho=p_rho, predicted_worse_end=int(worse),
                         observed_gap=float(a.mean() - b.mean()), p_asymmetry=float(t.pvalue)))
    return pd.DataFrame(rows)


def tuned_rate_endpoint(runs: pd.DataFrame, advice: pd.DataFrame, budget: int = 48):
    """The secondary endpoint: :func:`endpoint` at ``budget`` with each (condition, G) run at its
    own rate, the one of highest mean final reward on the exploration seeds (the rate is chosen
    on exploration alone, so the confirmation scores carry no selection)."""
    _check(runs)
    at = runs[runs["N"] == budget]
    explore = at[at["phase"] == "exploration"]
    means = explore.groupby(["condition", "G", "learning_rate"])["final_reward"].mean()
    best = means.groupby(level=["condition", "G"]).idxmax()  # (condition, G) -> full index
    keep = {key: index[2] for key, index in best.items()}
    chosen = at[[keep.get((c, G)) == lr for c, G, lr in
                 zip(at["condition"], at["G"], at["learning_rate"])]]
    tuned = chosen.assign(learning_rate=PRIMARY_LR)
    cells, table, verdicts = endpoint(tuned, advice, PRIMARY_LR)
    rates = pd.DataFrame([dict(condition=c, G=G, learning_rate=lr) for (c, G), lr in
                          keep.items()])
    return cells, table, verdicts, rates


def plateau(runs: pd.DataFrame, cells: pd.DataFrame, last: int = 120, before: int = 100):
    """Per cell of :func:`endpoint`, at its best grid G on the confirmation seeds at
    ``PRIMARY_LR``: the mean held-out reward at steps ``before`` and ``last`` and their gap (the
    protocol's plateau report; a descriptive number, no test)."""
    _check(runs)
    columns = [f"reward_{before}", f"reward_{last}"]
    if not set(columns) <= set(runs.columns):
        raise ValueError(f"`runs` lacks the checkpoints {columns}")
    confirm = runs[(runs["phase"] == "confirmation") & np.isclose(runs["learning_rate"],
                                                                 PRIMARY_LR)]
    rows = []
    for cell in cells.to_dict("records"):
        at = confirm[(confirm["condition"] == cell["condition"]) & (confirm["N"] == cell["N"])
                     & (confirm["G"] == cell["best_G"])]
        a, b = (float(at[c].mean()) for c in columns)
        rows.append(dict(condition=cell["condition"], N=cell["N"], best_G=cell["best_G"],
                         **{columns[0]: a, columns[1]: b}, gap=b - a))
    return pd.DataFrame(rows)
