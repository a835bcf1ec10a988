"""The route map of ``ustat-rl verify --quick``: which claims execute each public function.

``ustat-rl verify`` vouches for what the toolkit answers only where its claims run the code that
answers.  This command measures that reach.  It runs the ``verify --quick`` command itself
(``ustat_rl.interface.cli.main``, its defaults: root seed, one worker) under ``coverage``, with
one coverage *context* per claim: every claim passes through ``ustat_rl.claims.run_claim``, which
the command wraps while it measures so that ``Coverage.switch_context(claim_id)`` is called
before the claim starts.  Each executed line is so attributed to the claim that ran it.

**Routes.**  A route is a public function or method of the package, found by ``ast``: every
top-level function whose name does not start with ``_`` in a module whose dotted path has no
part starting with ``_`` (a package's ``__init__`` counts as the package), and every such
method of such a class (properties included).  A route is *executed by* a claim when a line of
its own body (the docstring and the ``def`` and decorator lines excluded: those run at import,
whatever imported the module) ran under that claim's context.

**Private helpers** are not routes: a bug in one reaches a user only through a public route, and
the map counts a public route as executed only when its own body runs, so a helper reached by
no executed public route is a helper of unclaimed routes.  The one exception is compiled code:
numba runs an ``@njit`` function's body as machine code, which no tracer sees, so a compiled
route counts as executed by a claim when a function of the package that the claim executed
(or a compiled one counted so) names it, in its own module or in one that imports it.

**Processes.**  ``verify`` runs its claims one after another in one process; the Monte Carlo
engine's workers are threads, which coverage follows by default.  Claims that start processes
(``multiprocessing``, ``torch.multiprocessing``, with ``spawn`` or ``fork``) are measured too: the
configuration turns on ``concurrency = multiprocessing`` and ``parallel``, a child reads the claim
running in its parent from the environment (``context = ${USTAT_ROUTE_CLAIM}`` in the written
``.coveragerc``) as its static context, and the data files are combined before they are read.

**Statuses.**  Every route gets one: ``claimed`` (executed by at least one claim), ``allowed``
(executed by none, with a reason of a kind that computes no answer: printing, I/O, plotting,
argument parsing, a declaration without a body) or ``unclaimed`` (executed by none, and it
computes an answer a user can get: the to-do list of docs/claims.md).  The reasons live in
``benchmarks/route_allowlist.py``; ``tests/scripts/test_route_map.py`` reads the committed JSON.

Usage (from the repository root; about three times the time of ``verify --quick``)::

    python benchmarks/route_map.py                  # writes docs/generated/route_map.json and
                                                    # the map section of docs/claims.md
    python benchmarks/route_map.py --only C1,C5     # a subset (not written unless --json given)
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import datetime
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from ustat_rl.interface.claims_markdown import ROUTE_MAP_BEGIN, ROUTE_MAP_END

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "ustat_rl"
MAP_JSON = ROOT / "docs" / "generated" / "route_map.json"
CLAIMS_MD = ROOT / "docs" / "claims.md"
ENV_CLAIM = "USTAT_ROUTE_CLAIM"
COMMAND = "python benchmarks/route_map.py"
_COMPILED = ("njit", "jit", "vectorize", "guvectorize", "cfunc")


@dataclasses.dataclass(frozen=True)
class Route:
    """One public function or method: its dotted name, file and the line span of its body.

    ``body`` is ``(first, last)``: the first statement after the docstring to the function's
    last line; ``names`` are the bare names its body refers to (calls and attributes), used
    only to attribute compiled code; ``compiled`` marks a numba-compiled function.
    """

    name: str
    path: str
    body: tuple[int, int]
    compiled: bool
    names: frozenset[str]


def _module_name(rel: Path) -> str | None:
    parts = rel.with_suffix("").parts
    if any(p.startswith("_") and p != "__init__" for p in parts):
        return None
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _body_span(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, int] | None:
    body = node.body
    if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)):
        body = body[1:]
    if all(isinstance(b, ast.Pass) or (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant)
                                       and b.value.value is Ellipsis) for b in body):
        return None
    return body[0].lineno, node.end_lineno


def _names(node: ast.AST) -> frozenset[str]:
    found = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.add(sub.attr)
    return frozenset(found)


def _is_compiled(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in _COMPILED:
            return True
    return False


def _functions(tree: ast.Module):
    """(qualified name in the module, node, public) for top-level functions and class methods."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node, not node.name.startswith("_")
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield (f"{node.name}.{sub.name}", sub,
                           not (node.name.startswith("_") or sub.name.startswith("_")))


def scan(root: Path = ROOT) -> tuple[dict[str, Route], list[Route], dict[str, set[str]]]:
    """Every public route of the package under ``root``, every private function (for compiled
    attribution) and, per file, the names it imports from elsewhere.

    A public function without a body beyond its docstring, ``...`` or ``pass`` (a protocol's
    declaration) is a route too: it appears with ``body = (0, 0)``, executed by nothing.
    """
    routes: dict[str, Route] = {}
    private: list[Route] = []
    imports: dict[str, set[str]] = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        rel = path.relative_to(root)
        module = _module_name(rel)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(rel))
        imports[str(rel)] = {a.asname or a.name for n in ast.walk(tree)
                             if isinstance(n, ast.ImportFrom) for a in n.names}
        for qual, node, public in _functions(tree):
            span = _body_span(node) or (0, 0)
            route = Route(f"{module}.{qual}" if module else f"{rel}:{qual}", str(rel), span,
                          _is_compiled(node), _names(node))
            if public and module is not None:
                routes[route.name] = route
            else:
                private.append(route)
    return routes, private, imports


# ------------------------------------------------------------------------------ measuring
def _rcfile(folder: Path) -> Path:
    rc = folder / ".coveragerc"
    rc.write_text(
        "[run]\n"
        f"source = {PACKAGE}\n"
        "branch = False\n"
        "parallel = True\n"
        "concurrency = thread, multiprocessing\n"
        f"data_file = {folder / '.coverage'}\n"
        f"context = ${{{ENV_CLAIM}}}\n",
        encoding="utf-8")
    return rc


def measure(only: str | None = None, seed: int | None = None) -> tuple[dict, dict]:
    """Run ``ustat-rl verify --quick`` (``--only``/``--seed`` when given) under coverage.

    Returns ``(lines, outcome)``: ``lines[claim_id][relative file]`` is the set of executed line
    numbers, and ``outcome`` holds the command's exit status, seconds and claims run.
    """
    import coverage

    argv = ["verify"] + ([] if only is None else ["--only", only])
    argv += [] if seed is None else ["--seed", str(seed)]
    with tempfile.TemporaryDirectory(prefix="route_map_") as tmp:
        folder = Path(tmp)
        rc = _rcfile(folder)
        os.environ.pop(ENV_CLAIM, None)
        cov = coverage.Coverage(config_file=str(rc))
        cov.start()
        from ustat_rl import claims as claims_package
        from ustat_rl.interface import cli

        original = claims_package.run_claim
        ran: list[str] = []

        def run_claim(claim, ctx):
            ran.append(claim.claim_id)
            os.environ[ENV_CLAIM] = claim.claim_id
            cov.switch_context(claim.claim_id)
            try:
                return original(claim, ctx)
            finally:
                cov.switch_context("")
                os.environ.pop(ENV_CLAIM, None)

        claims_package.run_claim = run_claim
        start = time.perf_counter()
        try:
            status = cli.main(argv)
        finally:
            claims_package.run_claim = original
            cov.stop()
            cov.save()
        seconds = time.perf_counter() - start
        if not ran:
            raise RuntimeError("verify ran no claim through ustat_rl.claims.run_claim: the route "
                               "map's per-claim contexts need that entry")
        combiner = coverage.Coverage(config_file=str(rc))
        combiner.combine([str(folder)])
        data = combiner.get_data()
        lines: dict[str, dict[str, set[int]]] = {}
        for filename in data.measured_files():
            rel = str(Path(filename).resolve().relative_to(ROOT))
            for lineno, contexts in data.contexts_by_lineno(filename).items():
                for context in contexts:
                    claim = next((p for p in reversed(context.split("|")) if p), "")
                    if claim:
                        lines.setdefault(claim, {}).setdefault(rel, set()).add(lineno)
    return lines, {"status": status, "seconds": seconds, "claims": ran}


def executed_routes(routes: dict[str, Route], private: list[Route], imports: dict[str, set[str]],
                    lines: dict[str, dict[str, set[int]]]) -> dict[str, list[str]]:
    """``route name -> claims`` that execute it (see the module docstring for the rule)."""
    every = list(routes.values()) + private
    claims_of: dict[str, list[str]] = {name: [] for name in routes}
    for claim, files in lines.items():
        ran = {r.name: r for r in every if r.body[0] and files.get(r.path, set())
               & set(range(r.body[0], r.body[1] + 1))}
        compiled = [r for r in every if r.compiled and r.name not in ran]
        grew = True
        while grew:
            grew = False
            short = {r.name.rsplit(".", 1)[-1].rsplit(":", 1)[-1]: r for r in compiled
                     if r.name not in ran}
            for name, target in short.items():
                if any(name in r.names and (r.path == target.path or name in imports[r.path])
                       for r in ran.values()):
                    ran[target.name] = target
                    grew = True
        for name in ran:
            if name in claims_of:
                claims_of[name].append(claim)
    return {name: sorted(set(c), key=_claim_order) for name, c in claims_of.items()}


def _claim_order(claim_id: str):
    head, _, tail = claim_id.partition(".")
    return (int(head[1:]) if head[1:].isdigit() else 10**6, head, tail)


# ------------------------------------------------------------------------------ statuses
def allow_reason(name: str, allow: dict[str, str]) -> str | None:
    """The allow-list's reason for ``name``: an exact entry, else the longest prefix entry that
    ends at a dot (a module or class), else None."""
    if name in allow:
        return allow[name]
    best = None
    for key in allow:
        if name.startswith(key + ".") and (best is None or len(key) > len(best)):
            best = key
    return None if best is None else allow[best]


def allowlist():
    """``benchmarks/route_allowlist.py``, loaded from beside this file."""
    import importlib.util

    path = Path(__file__).resolve().parent / "route_allowlist.py"
    spec = importlib.util.spec_from_file_location("route_allowlist", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


DECLARATION = "declaration: no body beyond its docstring (a protocol's or an abstract method)"


def statuses(claims_of: dict[str, list[str]], allow: dict[str, str],
             declarations: frozenset[str] = frozenset()) -> dict[str, dict]:
    """Each route's entry of the JSON: its claims, status and (when executed by none) reason;
    ``declarations`` are the routes without a body (:func:`scan`'s ``body == (0, 0)``)."""
    unclaimed = allowlist().UNCLAIMED
    out = {}
    for name, claims in claims_of.items():
        if claims:
            out[name] = {"claims": claims, "status": "claimed"}
            continue
        reason = DECLARATION if name in declarations else allow_reason(name, allow)
        if reason is None:
            out[name] = {"claims": [], "status": "unlisted",
                         "reason": "executed by no claim and not on the allow-list"}
        else:
            status = "unclaimed" if reason.startswith(unclaimed) else "allowed"
            out[name] = {"claims": [], "status": status, "reason": reason}
    return out


def figures(entries: dict[str, dict]) -> dict[str, int]:
    """Counts of the map: routes, claimed, allowed per reason kind, unclaimed, unlisted."""
    reason_kind = allowlist().reason_kind
    counts = {"public routes": len(entries),
              "executed by >= 1 claim": sum(e["status"] == "claimed" for e in entries.values()),
              "unclaimed answering routes": sum(e["status"] == "unclaimed"
                                                for e in entries.values()),
              "unlisted": sum(e["status"] == "unlisted" for e in entries.values())}
    for e in entries.values():
        if e["status"] == "allowed":
            key = f"allowed: {reason_kind(e['reason'])}"
            counts[key] = counts.get(key, 0) + 1
    return counts


# ------------------------------------------------------------------------------ writing
BEGIN, END = ROUTE_MAP_BEGIN, ROUTE_MAP_END


def markdown(entries: dict[str, dict], meta: dict) -> str:
    """The map section of docs/claims.md, markers included."""
    counts = figures(entries)
    by_claim: dict[str, list[str]] = {}
    for name, e in entries.items():
        for c in e["claims"]:
            by_claim.setdefault(c, []).append(name)
    out = [BEGIN, "", "## Route map: the public functions each claim executes", "",
           f"Measured {meta['date']} by `{meta['command']}` on {meta['machine']}: "
           f"`ustat-rl verify --quick` (seed {meta['seed']}, {meta['verify_seconds']:.0f} s "
           f"under coverage) with one coverage context per claim. A route is a public function or "
           f"method of `ustat_rl`; it is executed by a claim when a line of its own body ran "
           f"during that claim (benchmarks/route_map.py says how private helpers and compiled "
           f"code count). `tests/scripts/test_route_map.py` fails when an answering route is "
           f"executed by no claim and not on `benchmarks/route_allowlist.py`, and when this map "
           f"misses a public function of the package.", ""]
    out += [f"- {k}: {v}" for k, v in counts.items()]
    out += ["", "### Answering routes no claim executes (the to-do list)", "",
            f"Each with the reason `{allowlist().UNCLAIMED}`, by module:", ""]
    todo = sorted(n for n, e in entries.items() if e["status"] in ("unclaimed", "unlisted"))
    out += [f"- `{module}`: {names}" for module, names in _by_module(todo)] or ["(none)"]
    out += ["", "### Claim -> routes", "",
            "The package's routes each claim executes, by module (the claims' own modules and "
            "verify's registry left out: every claim runs its own check).", "",
            "| claim | routes |", "|---|---|"]
    for c in sorted(by_claim, key=_claim_order):
        names = [n for n in by_claim[c] if not n.startswith(f"{PACKAGE}.claims.")]
        cell = "; ".join(f"`{m}`: {ns}" for m, ns in _by_module(names))
        out.append(f"| {c} | {cell} |")
    out += ["", "### Route -> claims", "", "| module | route | claims, or why none |",
            "|---|---|---|"]
    for name in sorted(entries):
        e = entries[name]
        module, short = _split(name)
        cell = ", ".join(e["claims"]) if e["claims"] else f"none ({e['reason']})"
        out.append(f"| `{module}` | `{short}` | {cell} |")
    out += ["", END, ""]
    return "\n".join(out)


def _split(name: str) -> tuple[str, str]:
    """``(module, function or Class.method)`` of a route name, by the package's files."""
    parts = name.split(".")
    for k in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:k])
        base = ROOT.joinpath(*parts[:k])
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            return module, ".".join(parts[k:])
    return parts[0], ".".join(parts[1:])


def _by_module(names: list[str]) -> list[tuple[str, str]]:
    """``(module, "a, b, C.m")`` for the routes ``names``, modules sorted."""
    grouped: dict[str, list[str]] = {}
    for name in names:
        module, short = _split(name)
        grouped.setdefault(module, []).append(short)
    return [(m, ", ".join(sorted(grouped[m]))) for m in sorted(grouped)]


def write_section(path: Path, section: str) -> None:
    """Replace the map section of ``path`` (or append it) and leave the rest as it is."""
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    if BEGIN in text:
        head, _, rest = text.partition(BEGIN)
        _, _, tail = rest.partition(END)
        tail = tail.lstrip("\n")
        text = head + section + tail
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text, encoding="utf-8")


def _machine() -> str:
    return (f"{platform.machine()} {platform.system()}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}")


def declarations(routes: dict[str, Route]) -> frozenset[str]:
    """The routes without a body to execute."""
    return frozenset(n for n, r in routes.items() if r.body == (0, 0))


def restatus(allow: dict[str, str]) -> int:
    """``--restatus``: the committed map's claims with the allow-list's current reasons."""
    payload = json.loads(MAP_JSON.read_text(encoding="utf-8"))
    routes, _, _ = scan()
    claims_of = {n: e["claims"] for n, e in payload["routes"].items()}
    payload["routes"] = statuses(claims_of, allow, declarations(routes))
    payload["figures"] = figures(payload["routes"])
    write_outputs(payload, MAP_JSON, markdown_too=True)
    return 0


def write_outputs(payload: dict, out_json: Path, markdown_too: bool) -> None:
    """The JSON map, and (``markdown_too``) the map section of docs/claims.md."""
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out_json}")
    if markdown_too:
        write_section(CLAIMS_MD, markdown(payload["routes"], payload["meta"]))
        print(f"wrote the map section of {CLAIMS_MD}")
    for k, v in payload["figures"].items():
        print(f"{k}: {v}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=None, help="claim IDs to run (default: all)")
    parser.add_argument("--seed", type=int, default=None, help="verify's root seed")
    parser.add_argument("--json", type=Path, default=None,
                        help=f"output JSON (default {MAP_JSON.relative_to(ROOT)} for a full run)")
    parser.add_argument("--no-markdown", action="store_true",
                        help="leave docs/claims.md as it is")
    parser.add_argument("--restatus", action="store_true",
                        help="measure nothing: recompute the statuses of the committed map from "
                             "the allow-list as it is now, and rewrite the map and its section")
    args = parser.parse_args(argv)
    allow = allowlist().ALLOW
    if args.restatus:
        return restatus(allow)
    if args.only is not None and args.json is None:
        parser.error("--only measures part of verify: give --json for its map")
    out_json = args.json or MAP_JSON
    routes, private, imports = scan()
    lines, outcome = measure(args.only, args.seed)
    claims_of = executed_routes(routes, private, imports, lines)
    entries = statuses(claims_of, allow, declarations(routes))
    from ustat_rl.claims import VerifyContext

    meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
            "command": COMMAND + ("" if args.only is None else f" --only {args.only}"),
            "machine": _machine(), "seed": VerifyContext().seed if args.seed is None else args.seed,
            "verify_seconds": outcome["seconds"], "verify_status": outcome["status"],
            "claims_run": outcome["claims"]}
    payload = {"meta": meta, "figures": figures(entries), "routes": entries}
    write_outputs(payload, out_json, markdown_too=args.only is None and not args.no_markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
