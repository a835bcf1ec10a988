"""``--dynamic-sampling`` of ``ustat-rl gstar`` and ``ustat-rl rewards``: options and text.

Formatting only: every number comes from
:class:`ustat_rl.pilot.dynamic_sampling.DynamicSamplingReport`. A point MSE estimate that is not
positive is printed as ``<= 0`` and never chosen as a best ``G`` worth stating: the search has no
interval, so the text says "point estimates" wherever it names a ``G``.
"""

from __future__ import annotations

from ..formatting import format_number

__all__ = ["HELP", "add_arguments", "check_arguments", "format_dynamic_sampling",
           "format_replace_sampling", "variance_filter_name"]

#: The --dynamic-sampling help: what is reported, for which rule, and the plug-in bias.
HELP = ("also report DAPO's dynamic sampling as verl runs it (algorithm.filter_groups: groups "
        "whose rewards are all equal are dropped and generation batches of b = B prompts are "
        "drawn until B groups are kept), binary rewards only: at each G the keep probability r, "
        "the expected generation batches and generated rollouts per step, GRPO's kept-batch "
        "mean g/r (its bias Q/r of |g|, Q = 1 - r)"
        " and, from a pilot with scores (gstar), the kept batch's MSE and the best G when the "
        "budget counts generated against accepted rollouts. The plug-in p = m/n in p^G + "
        "(1-p)^G is biased (r low, costs high); only the per-group all-equal indicator is "
        "unbiased, shown as 'r unbiased' where G <= the pilot's group sizes")


def _group_filter(name: str) -> str:
    """``--group-filter``'s value, checked against the registered group filters when it is given
    (the filters live in :mod:`ustat_rl.theory`, whose import costs seconds: ``--help`` does not
    pay it)."""
    import argparse

    from ..theory.group_filters import GROUP_FILTERS
    from ..theory.variance_filter import VARIANCE_FILTERS

    if name not in GROUP_FILTERS and name not in VARIANCE_FILTERS:
        raise argparse.ArgumentTypeError(f"unknown group filter {name!r}; choose from "
                                         f"{', '.join(GROUP_FILTERS)} (or a filter of the batch: "
                                         f"{', '.join(VARIANCE_FILTERS)})")
    return name


def add_arguments(parser) -> None:
    """``--dynamic-sampling``, ``--max-gen-batches`` and ``--group-filter`` on an ``argparse``
    parser."""
    parser.add_argument("--dynamic-sampling", action="store_true", help=HELP)
    parser.add_argument("--group-filter", type=_group_filter, default=None, metavar="FILTER",
                        help="with --dynamic-sampling (beyond the paper): which groups are kept, "
                             "as a function of the success count k of G: verl (default; std > 0), "
                             "slime (std > 1e-6), openrlhf (0 < k/G < 1), roll (ROLL's "
                             "difficulty_mask, 0.1 < k/G < 0.95); docs/theory.md section 7. "
                             "Or RAGEN-2's reward-variance filter of the batch, "
                             "reward_variance_top_p or reward_variance_top_k (without "
                             "--dynamic-sampling; its parameter in --group-filter-param)")
    parser.add_argument("--group-filter-param", type=float, default=None, metavar="X",
                        help="with --group-filter reward_variance_top_p: top_p in (0, 1] (default "
                             "0.9); with reward_variance_top_k: k, groups kept per batch")
    parser.add_argument("--replace-ratio", type=float, default=None, metavar="RHO",
                        help="with --dynamic-sampling (beyond the paper): also report SkyRL's "
                             "POLARIS replace (dynamic_sampling.type replace, min_replace_ratio "
                             "RHO; SkyRL's default 0.3): a batch of B prompts whose groups with "
                             "rewards not all equal number more than RHO B is used, its other "
                             "groups overwritten by copies of those; else it is redrawn. Not a "
                             "group filter (the copies are not independent groups): its own "
                             "section; "
                             "--max-gen-batches is then also SkyRL's max_sample_batches")
    parser.add_argument("--max-gen-batches", type=int, default=None, metavar="K",
                        help="with --dynamic-sampling: verl's algorithm.max_num_gen_batches, "
                             "the generation batches after which a step without B kept groups "
                             "raises; also report the chance of hitting it (default: no cap)")


def variance_filter_name(args):
    """The reward-variance filter's name when ``--group-filter`` names one, else ``None``."""
    from ..theory.variance_filter import VARIANCE_FILTERS

    rule = getattr(args, "group_filter", None)
    return rule if rule in VARIANCE_FILTERS else None


def check_arguments(args) -> int:
    """``K`` (0 for no cap) once the options are parsed, or one ``ValueError``."""
    K = args.max_gen_batches
    if K is not None and not args.dynamic_sampling:
        raise ValueError("`--max-gen-batches` applies only with --dynamic-sampling")
    from ..theory.variance_filter import VARIANCE_FILTERS, get_variance_filter

    group_filter = getattr(args, "group_filter", None)
    param = getattr(args, "group_filter_param", None)
    if group_filter in VARIANCE_FILTERS:  # top_p or k checked before the pilot is read
        try:
            get_variance_filter(group_filter, param)
        except (ValueError, TypeError) as exc:
            text = str(exc).replace("`top_p`", "top_p").replace("`param`", "it")
            raise ValueError(f"`--group-filter-param` for {group_filter}: {text}") from None
    elif param is not None:
        raise ValueError("`--group-filter-param` applies only with --group-filter "
                         "reward_variance_top_p or reward_variance_top_k")
    elif group_filter is not None and not args.dynamic_sampling:
        raise ValueError("`--group-filter` applies only with --dynamic-sampling")
    ratio = getattr(args, "replace_ratio", None)
    if ratio is not None and not args.dynamic_sampling:
        raise ValueError("`--replace-ratio` applies only with --dynamic-sampling")
    if ratio is not None and not 0.0 <= ratio < 1.0:
        raise ValueError(f"`--replace-ratio` must lie in [0, 1) (at 1 no batch is ever used), "
                         f"got {ratio:g}")
    if K is not None and K < 1:
        raise ValueError(f"`--max-gen-batches` must be an integer >= 1 (omit it for no cap), "
                         f"got {K}")
    from ..theory.group_size import MAX_BUDGET

    if K is not None and K > MAX_BUDGET:  # the cost law holds one entry per batch count
        raise ValueError(f"`--max-gen-batches` must be <= {MAX_BUDGET} (the cost of every batch "
                         f"count up to it is evaluated in memory; omit it for no cap), got {K}")
    return 0 if K is None else K


def _fmt(value) -> str:
    return format_number(value)


def _mse(value: float, resolved: bool = True) -> str:
    if not resolved:
        return "unresolved"
    return _fmt(value) if value > 0.0 else "<= 0"


def _best_lines(report) -> list[str]:
    from ..pilot.dynamic_sampling import CAP_RISK

    words = {"generated": "counts generated rollouts", "accepted": "counts accepted rollouts",
             "unfiltered": "no dynamic sampling"}
    K = report.max_gen_batches
    cap = (f"cap K = {K}: only G whose chance of hitting it is at most {CAP_RISK:g} per step, "
           "where verl raises" if K else "no cap")
    lines = [f"best G at N = {report.budget} for {report.estimator} (point estimates, no interval; "
             f"b = B, {cap}; against g | the batch times r, i.e. a learning rate times r):"]
    for accounting, targets in report.best.items():
        parts = []
        for got in targets.values():
            if got is None:
                parts.append("none (" + (f"every G risks the cap K = {K}, or " if K else "")
                             + "no G affords a kept batch within N generated rollouts)"
                             if accounting == "generated" else
                             f"none (every G risks the cap K = {K}; raise --max-gen-batches)")
                continue
            shown = got["mse"] > 0.0 and got.get("resolved", True)
            text = (f"G = {got['group_size']}, B = {got['batch_size']}" if shown
                    else "unresolved (a point MSE estimate is not positive, or a G whose MSE "
                         "the pilot does not resolve may be best)")
            if shown and accounting == "accepted":
                text += f" ({_fmt(got['rollouts'])} generated)"
            if shown and K and accounting != "unfiltered":
                text += f" (P(cap) {_fmt(got['cap_probability'])})"
            parts.append(text)
        lines.append(f"  {words[accounting] + ':':<28}" + " | ".join(parts))
    return lines


def format_dynamic_sampling(report) -> str:
    """The plain-text ``--dynamic-sampling`` section."""
    cap = (f"cap K = {report.max_gen_batches} generation batches" if report.max_gen_batches
           else "no cap")
    from ..theory.group_filters import DEFAULT_GROUP_FILTER, GROUP_FILTERS

    kept = getattr(report, "group_filter", DEFAULT_GROUP_FILTER)
    filter_name = ("verl filter_groups" if kept == DEFAULT_GROUP_FILTER
                   else f"group filter {kept}, {GROUP_FILTERS[kept].provenance.split(' ')[0]}")
    lines = [f"dynamic sampling ({filter_name}; generation batch b = B, {cap}; binary "
             f"rewards, {report.n_prompts} groups):",
             f"  {'G':>5} {'B':>6} {'r':>8} {'r unbiased':>11} {'gen batches':>12} "
             f"{'rollouts':>10}" + (f" {'P(cap)':>8}" if report.cap_probability else "")
             + f" {'GRPO mean':>10} {'|bias|/|g|':>11}"]
    for i, G in enumerate(report.group_sizes):
        unbiased = report.keep_prob_unbiased[i]
        mark = "" if report.cost_uses_unbiased[i] else "*"
        row = (f"  {G:>5} {report.batch_sizes[i]:>6} {_fmt(report.keep_prob[i]):>8} "
               f"{'-' if unbiased is None else _fmt(unbiased):>11} "
               f"{_fmt(report.expected_gen_batches[i]) + mark:>12} "
               f"{_fmt(report.expected_rollouts[i]) + mark:>10}")
        if report.cap_probability:
            row += f" {_fmt(report.cap_probability[i]) + mark:>8}"
        if report.grpo_mean_scale[i] is None:  # the filter is not verl's at this G
            row += f" {'-':>10} {'-':>11}"
        else:
            row += (f" {_fmt(report.grpo_mean_scale[i]) + ' g' + mark:>10} "
                    f"{_fmt(report.grpo_relative_bias[i]) + mark:>11}")
        lines.append(row)
    lines.append("GRPO's kept batch estimates g/r, not g: the direction of g, 1/r times as long "
                 "(bias (Q/r) g, Q = 1 - r); rollouts = G b E[generation batches], discarded "
                 "groups and the overflow included; costs and 1/r use 'r unbiased' where it "
                 "exists, * = the plug-in r" + ("; P(cap): verl raises 'Generated too many'"
                                                 if report.cap_probability else ""))
    if report.mse is not None:
        lines.append(f"{report.estimator} kept batch at N = {report.budget} (point estimates, no "
                     "interval):")
        lines.append(f"  {'G':>5} {'B':>6} {'bias^2':>11} {'variance':>11} {'MSE':>11} "
                     f"{'MSE x r':>11} {'unfiltered':>11}")
        for i, G in enumerate(report.group_sizes):
            # a variance <= 0 or a negative squared bias leaves the MSEs built on it unresolved
            shown = {"bias_sq": True, "variance": report.mse["variance"][i] > 0.0,
                     "mse": report.resolved["grad"][i],
                     "mse_rescaled": report.resolved["rescaled"][i],
                     "unfiltered_mse": True}
            lines.append(f"  {G:>5} {report.batch_sizes[i]:>6} " + " ".join(
                f"{_mse(report.mse[key][i], ok):>11}" for key, ok in shown.items()))
        if not all(map(all, report.resolved.values())) or min(report.mse["variance"]) <= 0.0:
            lines.append("unresolved: the kept batch's plug-in variance is not positive there "
                         "(or its squared bias is negative), so neither it nor an MSE built on "
                         "it (at least the squared bias and the variance) is shown")
        lines += _best_lines(report)
    else:
        lines.append("the kept batch's MSE and the best G need scores: `ustat-rl gstar PILOT "
                     "--budget N --dynamic-sampling` on a rollouts file with scores")
    lines.append(f"note: {report.note}")
    if kept != DEFAULT_GROUP_FILTER:
        lines.append(f"note: group filter {kept} (beyond the paper): r sums Binomial(G, p) over the "
                     "kept success counts; where it drops groups verl keeps, GRPO's kept batch "
                     "is not g/r ('-') and 'r unbiased' is not computed")
    if report.mse is not None:
        lines.append("note: the kept batch's MSEs and the best G evaluate section 7's exact "
                     "moments at the pilot's moments made binary (binary_projection), so p = m/n "
                     "enters polynomials of degree G and they are biased like r; their "
                     "'unfiltered' column is the same computation without the filter: where it "
                     "differs from the unbiased predicted minibatch MSE of GRPO (C6), trust C6")
    return "\n".join(lines)


def format_replace_sampling(report) -> str:
    """The plain-text section of ``--replace-ratio`` (a :class:`~ustat_rl.pilot.replace_sampling.ReplaceReport`)."""
    K = report.max_sample_batches
    lines = [f"POLARIS replace as SkyRL runs it (min_replace_ratio {report.min_replace_ratio:g}, "
             + (f"cap K = {K} batches" if K else "no cap") + "; beyond the paper):",
             f"  {'G':>5} {'B':>6} {'r':>8} {'P(used)':>8} {'batches':>9} {'rollouts':>10}"
             + (f" {'P(cap)':>8}" if K else "") + f" {'copies':>7}"
             + (f" {'bias^2':>11} {'MSE':>11}" if report.mse is not None else "")]
    for i, G in enumerate(report.group_sizes):
        copies = report.expected_copies[i]
        row = (f"  {G:>5} {report.batch_sizes[i]:>6} {_fmt(report.keep_prob[i]):>8} "
               f"{_fmt(report.replace_prob[i]):>8} {_fmt(report.expected_gen_batches[i]):>9} "
               f"{_fmt(report.expected_rollouts[i]):>10}")
        if K:
            row += f" {_fmt(report.cap_probability[i]):>8}"
        row += f" {'-' if copies is None else _fmt(copies):>7}"
        if report.mse is not None:
            row += "".join(f" {'-' if v is None else _mse(v):>11}"
                           for v in (report.bias_sq[i], report.mse[i]))
        lines.append(row)
    lines.append("P(used): the chance a batch has more than min_replace_ratio B groups with rewards "
                 "not all equal (std > 0), else SkyRL redraws it; copies: E[groups overwritten "
                 "by copies | used]; batches and rollouts = G B E[batches] per step"
                 + ("; P(cap): SkyRL raises after K batches" if K else ""))
    if report.mse is not None:
        lines.append("note: GRPO (leave-one-out) on the replaced batch, copies merged with their "
                     "source by prompt id as SkyRL computes advantages; point estimates at the "
                     "pilot's moments made binary (biased like the plug-in r), no interval; a "
                     "value that is not positive is shown as <= 0")
    return "\n".join(lines)
