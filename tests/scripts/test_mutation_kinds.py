"""The planted kinds of benchmarks/mutation.py (``--kinds``): the draw, the planting, the controls.

The draw is over every candidate site ``ast`` finds and depends on the seed alone; a planted
bug changes its module at its site and nowhere else, and the copy is restored after each bug.
``--kinds --quick`` runs the two controls and one drawn bug: the control that adds the
leave-one-out baseline instead of subtracting it must be caught by its test and by C1.loo, and
the neutral control (the same difference written ``-b + a``, equal in floating point) by
neither; a machinery that reported every bug caught, or none, fails one of them.
"""

import ast
import json

import pytest
from script_loader import ROOT, load_script

pytestmark = pytest.mark.integration  # script: benchmarks/mutation.py --kinds --quick (pytest and verify runs)

mutation = load_script("benchmarks/mutation.py", "mutation_script")
MAP = json.loads((ROOT / "docs" / "generated" / "route_map.json").read_text(encoding="utf-8"))


def test_draw_depends_on_the_seed_alone_and_respects_each_kind():
    sites = mutation.candidate_sites(MAP)
    assert all(sites[k] for k in mutation.KINDS if k != "route no claim runs")
    first = mutation.draw_sites(sites, 3, seed=1)
    assert first == mutation.draw_sites(mutation.candidate_sites(MAP), 3, seed=1)
    assert first != mutation.draw_sites(sites, 3, seed=2)
    for site in first:
        entry = MAP["routes"][site.route]
        assert mutation._eligible(site.kind, site.route, entry)
        if site.kind == "route no claim runs":
            assert entry["status"] == "unclaimed" and not entry["claims"]
        else:
            assert entry["claims"] and not site.route.startswith(mutation._EDGE)


def test_a_planted_bug_changes_its_site_alone():
    for site in mutation.draw_sites(mutation.candidate_sites(MAP), 2, seed=7):
        clean = (ROOT / site.path).read_text(encoding="utf-8")
        planted = mutation.plant(clean, site)
        before, after = clean.splitlines(), planted.splitlines()
        line, _, end_line, _ = site.span
        assert before[:line - 1] == after[:line - 1]
        assert before[end_line:] == after[len(after) - (len(before) - end_line):]
        assert ast.dump(ast.parse(planted)) != ast.dump(ast.parse(clean))


SOURCE = "def f(a, b, c, x):\n    return (a + b) / c if x.shape[0] >= a - b else x.sum(axis=-1)\n"


def _planted_functions():
    """``f`` as written and with each mutation of each kind at every node of ``SOURCE``."""
    import numpy as np

    tree = ast.parse(SOURCE)
    out = {}
    for kind in mutation.KINDS:
        for node in ast.walk(tree):
            for before, after in mutation._mutations(node, kind):
                span = (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)
                site = mutation.Site(kind, "f", "f.py", span, before, after)
                namespace = {"np": np}
                exec(compile(mutation.plant(SOURCE, site), "f.py", "exec"), namespace)
                out[(kind, before)] = namespace["f"]
    return out


def test_each_mutation_is_the_bug_its_kind_names():
    import numpy as np

    planted = _planted_functions()
    x = np.ones((2, 3))
    assert planted[("power", "(a + b) / c")](1.0, 2.0, 3.0, x) == 3.0 / (3.0 * mutation.BIAS)
    assert planted[("shared code", "a + b")](1.0, 2.0, 4.0, x) == -0.25
    assert planted[("shared code", "a - b")](5.0, 3.0, 1.0, x).shape == (2,)  # 2 >= 8 is false
    assert planted[("boundary", "x.shape[0] >= a - b")](4.0, 2.0, 1.0, x).shape == (2,)
    assert planted[("shape", "x.shape[0]")](4.0, 1.0, 1.0, x) == 5.0  # 3 >= 3
    assert planted[("shape", "axis=-1")](5.0, 0.0, 1.0, np.ones((2, 3))).shape == (3,)
    # negative control: the mutation written as text, without the tree, moves the parentheses
    wrong = "(a + b / (c * 1.01))"
    assert eval(wrong, {"a": 1.0, "b": 2.0, "c": 3.0}) != 3.0 / (3.0 * mutation.BIAS)


def test_quick_mode_catches_the_planted_control_and_not_the_neutral_one(tmp_path):
    out = tmp_path / "kinds.json"
    clean = {p: (ROOT / p).read_bytes() for p in ("ustat_rl/advantages/gradients.py",)}
    assert mutation.main(["--kinds", "--quick", "--seed", "3", "--out", str(out)]) == 0
    results = json.loads(out.read_text())["results"]
    by_kind = {r["site"]["kind"]: r for r in results}
    planted, neutral = by_kind["control: planted"], by_kind["control: neutral"]
    assert (planted["tests_outcome"], planted["verify_outcome"]) == ("caught", "caught")
    assert (neutral["tests_outcome"], neutral["verify_outcome"]) == ("missed", "missed")
    drawn = [r for r in results if not r["site"]["kind"].startswith("control")]
    assert len(drawn) == 1 and drawn[0]["site"]["kind"] == list(mutation.KINDS)[3 % 5]
    assert all((ROOT / p).read_bytes() == b for p, b in clean.items())
