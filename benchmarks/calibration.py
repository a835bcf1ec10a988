"""Calibration of ``ustat-rl verify``: how often each check fails on honest code, against its rate.

Every Monte Carlo comparison behind ``verify`` states a false-failure rate (``Z_CHECK = 4``
standard errors: 6.3e-5; a 99.99% interval: 1e-4; ...). This script runs a set of claims at
``S`` root seeds (default 20) and counts, per claim and per sub-check, the seeds at which a
required comparison failed, beside the number the stated rate predicts and the binomial tail
probability of seeing that many. A seed at which a check fails far more often than its rate
allows points at a check whose interval is not valid for its statistic (heavy tails, a bias
the interval ignores), which is a bug in the check, not bad luck.

Cells are ``(claim, seed)`` pairs run through :func:`ustat_rl.runs.sweeps.run_cells`; each finished
cell is written to ``<out>/calibration.csv`` at once, and a rerun skips the cells already there
(resumable: interrupting loses at most the cells in flight). A row also records a fingerprint
of its claim's check function, and rows whose check has changed since are run again.

Selections: ``--claims all`` (every registered claim), ``--claims monte-carlo`` (the claims
whose check used Monte Carlo evidence at the first seed, which therefore runs for every claim),
or a comma-separated list of IDs.

Usage (from the repository root)::

    nice -n 10 python benchmarks/calibration.py --claims monte-carlo --seeds 20
    nice -n 10 python benchmarks/calibration.py --claims all --seeds 5
    python benchmarks/calibration.py --report-only --markdown docs/calibration_table.md

The stated rate of a sub-check is read from its note (``false-failure rate X``); exact and
symbolic comparisons (rounding tolerance only) have rate 0; a Monte Carlo sub-check whose note
states no rate is reported as ``not stated``.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import inspect
import math
import re
import sys
import time
from pathlib import Path

import pandas as pd
from scipy.stats import beta, binom

from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.runs.sweeps import LocalExecutor, run_cells, write_csv_atomic

COLUMNS = ["claim", "seed", "index", "check", "passed", "required", "evidence", "stated_rate",
           "verdict", "seconds", "fingerprint"]
CSV_NAME = "calibration.csv"
DEFAULT_SEEDS = 20
UPPER_LEVEL = 0.95  # one-sided Clopper-Pearson upper bound on a measured failure rate
_RATE = re.compile(r"false-failure rate (?:of )?(?:about |~|<= ?|below )?"
                   r"([0-9]*\.?[0-9]+(?:e-?[0-9]+)?)")


def stated_rate(note: str, evidence: str) -> float:
    """The false-failure rate a sub-check's note states; 0 for exact comparisons, NaN if none."""
    found = _RATE.findall(note or "")
    if found:
        return float(sum(float(x) for x in found))  # several comparisons in one sub-check
    return 0.0 if evidence in ("symbolic", "exact-numeric") else float("nan")


@functools.lru_cache(maxsize=None)
def fingerprint(claim_id: str) -> str:
    """Short digest of the source of the claim's check function.

    Read once per process, when the check modules have just been imported, so an edit made
    while a run is under way does not relabel results of the code that was loaded. Only the
    check function's own text is hashed: after editing a helper it calls, delete the CSV (or
    its rows of that claim).
    """
    check = registry()[claim_id].check
    return hashlib.sha256(inspect.getsource(check).encode()).hexdigest()[:12]


def calibration_cell(claim_id: str, seed: int) -> list[dict]:
    """Run one claim at one root seed (quick sizes); one row per sub-check."""
    claim = registry()[claim_id]
    result = run_claim(claim, VerifyContext(seed=seed, quick=True, n_jobs=1))
    digest = fingerprint(claim_id)
    if result.verdict == "error":
        return [dict(claim=claim_id, seed=seed, index=-1, check="error: " + result.error[-200:],
                     passed=False, required=True, evidence="", stated_rate=0.0,
                     verdict="error", seconds=result.seconds, fingerprint=digest)]
    return [dict(claim=claim_id, seed=seed, index=i, check=c.name, passed=bool(c.passed),
                 required=bool(c.required and not c.refutes), evidence=c.evidence,
                 stated_rate=stated_rate(c.note, c.evidence), verdict=result.verdict,
                 seconds=result.seconds, fingerprint=digest)
            for i, c in enumerate(result.checks)]


def _load(path: Path) -> pd.DataFrame:
    if not path.exists():
        return pd.DataFrame(columns=COLUMNS)
    table = pd.read_csv(path)
    current = {cid: fingerprint(cid) for cid in table["claim"].unique() if cid in registry()}
    fresh = table["fingerprint"] == table["claim"].map(current)
    return table[fresh].reset_index(drop=True)


def run(claims, seeds, out: Path, workers: int = 1, progress: bool = True,
        exclude=()) -> pd.DataFrame:
    """Run every ``(claim, seed)`` cell not yet in ``out/calibration.csv``; return the table.

    ``claims`` is ``"all"``, ``"monte-carlo"`` or a list of claim IDs; ``seeds`` a list of ints.
    """
    known = registry()
    for cid in known:
        fingerprint(cid)
    seeds = [int(s) for s in seeds]
    if not seeds or any(s < 0 for s in seeds):
        raise ValueError(f"`seeds` must be a non-empty list of integers >= 0, got {seeds}")
    out.mkdir(parents=True, exist_ok=True)
    path = out / CSV_NAME
    table = _load(path)
    rows = [table]

    def on_result(key, result):
        rows.append(pd.DataFrame(result, columns=COLUMNS))
        write_csv_atomic(pd.concat(rows, ignore_index=True), path)

    def missing(ids, which):
        done = set(zip(pd.concat(rows)["claim"], pd.concat(rows)["seed"]))
        return {(c, s): (c, s) for s in which for c in ids if (c, s) not in done}

    executor = LocalExecutor(workers)
    if claims in ("all", "monte-carlo"):
        ids = list(known)
    else:
        ids = list(claims)
        unknown = [c for c in ids if c not in known]
        if unknown:
            raise ValueError(f"`claims`: unknown claim ID(s) {unknown}; known: {list(known)}")
    ids = [c for c in ids if c not in set(exclude)]
    if claims == "monte-carlo":
        run_cells(missing(ids, seeds[:1]), calibration_cell, on_result, executor,
                  progress=progress, desc=f"seed {seeds[0]}, every claim")
        first = pd.concat(rows)
        first = first[first["seed"] == seeds[0]]
        ids = sorted(set(first.loc[first["evidence"] == "monte-carlo", "claim"]),
                     key=list(known).index)
    run_cells(missing(ids, seeds), calibration_cell, on_result, executor, progress=progress,
              desc="claims x seeds")
    table = pd.concat(rows, ignore_index=True)
    return table[table["claim"].isin(ids) & table["seed"].isin(seeds)].reset_index(drop=True)


def upper_bound(failures: int, trials: int, level: float = UPPER_LEVEL) -> float:
    """One-sided Clopper-Pearson upper bound on a failure probability."""
    return 1.0 if failures >= trials else float(beta.ppf(level, failures + 1, trials - failures))


def summarise(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-sub-check and per-claim counts: failures, seeds, expected failures, binomial tail.

    A sub-check's expected count is ``seeds x stated rate``; ``p_tail`` is
    ``P(Binomial(seeds, rate) >= failures)``, the chance of at least that many failures if the
    stated rate held. A claim fails at a seed when one of its required sub-checks fails (or the
    check raised); its stated rate is the sum of its sub-checks' (union bound).
    """
    req = table[table["required"].astype(bool)]
    sub = (req.groupby(["claim", "index"], sort=False)
           .agg(check=("check", "first"), seeds=("seed", "nunique"),
                failures=("passed", lambda p: int((~p.astype(bool)).sum())),
                stated_rate=("stated_rate", "max"))
           .reset_index())
    sub["expected"] = sub["seeds"] * sub["stated_rate"]
    sub["p_tail"] = [_tail(f, n, r) for f, n, r in
                     zip(sub["failures"], sub["seeds"], sub["stated_rate"])]
    per_seed = (table.groupby(["claim", "seed"], sort=False)
                .agg(failed=("verdict", lambda v: bool(v.isin(["fail", "error"]).any())),
                     seconds=("seconds", "first"))
                .reset_index())
    claims = (per_seed.groupby("claim", sort=False)
              .agg(seeds=("seed", "nunique"), failures=("failed", "sum"),
                   mean_seconds=("seconds", "mean"))
              .reset_index())
    rate = sub.groupby("claim", sort=False)["stated_rate"].sum(min_count=1)
    claims["stated_rate"] = claims["claim"].map(rate).fillna(0.0)
    claims.loc[claims["claim"].map(sub.groupby("claim")["stated_rate"]
                                   .apply(lambda r: r.isna().any())).fillna(False),
               "stated_rate"] = float("nan")
    claims["expected"] = claims["seeds"] * claims["stated_rate"]
    claims["p_tail"] = [_tail(f, n, r) for f, n, r in
                        zip(claims["failures"], claims["seeds"], claims["stated_rate"])]
    claims["upper95"] = [upper_bound(int(f), int(n)) for f, n in
                         zip(claims["failures"], claims["seeds"])]
    return sub, claims


def _tail(failures: int, seeds: int, rate: float) -> float:
    if not math.isfinite(rate):
        return float("nan")
    return float(binom.sf(int(failures) - 1, int(seeds), rate)) if failures else 1.0


def family_wise(table: pd.DataFrame, claims: pd.DataFrame) -> dict:
    """Per-run false-failure rate of a whole run of the claims in ``table``.

    ``stated`` is the union bound ``sum of the required sub-checks' stated rates`` over those
    that state one (``unstated`` counts the Monte Carlo sub-checks that do not); ``runs`` and ``failed_runs`` count the seeds at which
    every claim ran and the seeds at which at least one failed; ``claim_runs`` and
    ``failed_claim_runs`` pool the claims over all their seeds.
    """
    sub, _ = summarise(table)
    full = table.groupby("seed")["claim"].nunique()
    seeds = full[full == table["claim"].nunique()].index
    bad = table[table["seed"].isin(seeds) & table["verdict"].isin(["fail", "error"])]
    return dict(stated=float(sub["stated_rate"].sum()),  # NaN (unstated) rates skipped
                unstated=int(sub["stated_rate"].isna().sum()), runs=len(seeds),
                failed_runs=int(bad["seed"].nunique()),
                claim_runs=int(claims["seeds"].sum()),
                failed_claim_runs=int(claims["failures"].sum()))


def render(table: pd.DataFrame) -> str:
    """Markdown tables: per claim, then each sub-check that failed or states no rate."""
    if table.empty:
        return "No finished cells for this selection."
    sub, claims = summarise(table)
    fw = family_wise(table, claims)

    def rate(x):
        return "not stated" if not math.isfinite(x) else (f"{x:.1e}" if x else "0 (exact)")

    lines = ["| claim | seeds | failures | stated rate per run | expected failures | "
             "P(>= failures) | 95% upper bound on rate | mean s |", "|---|---|---|---|---|---|---|---|"]
    for r in claims.itertuples():
        lines.append(f"| {r.claim} | {r.seeds} | {r.failures} | {rate(r.stated_rate)} | "
                     f"{'' if not math.isfinite(r.expected) else f'{r.expected:.1e}'} | "
                     f"{'' if not math.isfinite(r.p_tail) else f'{r.p_tail:.2g}'} | "
                     f"{r.upper95:.3f} | {r.mean_seconds:.1f} |")
    flagged = sub[(sub["failures"] > 0) | sub["stated_rate"].isna()]
    lines += ["", "Sub-checks that failed at some seed or state no rate:", ""]
    if flagged.empty:
        lines.append("none.")
    else:
        lines += ["| claim | sub-check | seeds | failures | stated rate | expected | "
                  "P(>= failures) |", "|---|---|---|---|---|---|---|"]
        for r in flagged.itertuples():
            name = str(r.check).replace("|", "/")[:90]
            lines.append(f"| {r.claim} | {name} | {r.seeds} | {r.failures} | "
                         f"{rate(r.stated_rate)} | "
                         f"{'' if not math.isfinite(r.expected) else f'{r.expected:.1e}'} | "
                         f"{'' if not math.isfinite(r.p_tail) else f'{r.p_tail:.2g}'} |")
    lines += ["", f"Whole runs (every selected claim at one seed): {fw['failed_runs']} of "
              f"{fw['runs']} had a failing claim; stated family-wise rate (union bound over "
              f"{len(sub)} required sub-checks) "
              f"{rate(fw['stated'])}"
              f"{'' if not fw['unstated'] else ', not counting ' + str(fw['unstated']) + ' with no stated rate'}. "
              f"Claim-runs pooled: {fw['failed_claim_runs']} failing of {fw['claim_runs']}."]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", default="monte-carlo",
                        help="'all', 'monte-carlo' (default) or comma-separated claim IDs")
    parser.add_argument("--exclude", default="", help="comma-separated claim IDs to leave out")
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS,
                        help=f"number of root seeds, 0..S-1 (default {DEFAULT_SEEDS})")
    parser.add_argument("--first-seed", type=int, default=0, help="first root seed (default 0)")
    parser.add_argument("--out", type=Path, default=Path("results", "calibration"),
                        help="folder of calibration.csv (default results/calibration)")
    parser.add_argument("--workers", type=int, default=1, help="cells run at once (processes)")
    parser.add_argument("--report-only", action="store_true",
                        help="summarise the CSV already in --out without running anything")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the tables here")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be an integer >= 1, got {args.seeds}")
    if args.first_seed < 0:
        parser.error(f"--first-seed must be an integer >= 0, got {args.first_seed}")
    if args.workers < 1:
        parser.error(f"--workers must be an integer >= 1, got {args.workers}")
    claims = args.claims if args.claims in ("all", "monte-carlo") else [
        c.strip() for c in args.claims.split(",") if c.strip()]
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    start = time.perf_counter()
    if args.report_only:
        table = _load(args.out / CSV_NAME)
        if claims not in ("all", "monte-carlo"):
            table = table[table["claim"].isin(claims)]
        table = table[table["seed"].isin(seeds)]
    else:
        try:
            table = run(claims, seeds, args.out, args.workers,
                        exclude=[c.strip() for c in args.exclude.split(",") if c.strip()])
        except ValueError as err:
            parser.error(str(err))
    text = render(table)
    print(text)
    print(f"\n{time.perf_counter() - start:.0f} s", file=sys.stderr)
    if args.markdown is not None:
        args.markdown.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
