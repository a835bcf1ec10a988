"""One word for an advantage rule in the public API: ``estimator``; and "rule" means nothing else.

The scan reads every library module's source (no imports) and lists each public function's,
method's and public class's (``__init__`` or dataclass field) parameters called ``rule``,
``advantage`` or ``convention``; each must be in :data:`ALLOWED`, where such a parameter means
something other than an advantage rule. A second scan lists every module, public parameter and
command-line flag whose name holds ``rule`` at all; each must be in :data:`ADVANTAGE_RULE_NAMES`,
where it names advantage rules: a group filter, an allocation or a sketch's projector is called
by its own word. Planted modules show each scan flags a name. The old keywords themselves are
gone (tests/test_old_names.py).
"""

from __future__ import annotations

import ast
import inspect
import pathlib
import re

import pytest

pytestmark = pytest.mark.fast

ROOT = pathlib.Path(__file__).resolve().parents[2] / "ustat_rl"
OLD_WORDS = ("rule", "advantage", "convention")

#: ``module:qualname(parameter)`` -> why that parameter is not an advantage rule.
ALLOWED = {
    "pilot/run_noise_definition.py:terms_by_loop(advantage)":
        "an array of advantages, one per sample",
    "pilot/run_noise.py:group_terms(advantage)": "an array of advantages, one per sample",
    "conformance/report.py:ConformanceReport(convention)":
        "a report's field (the name checked), read back as an attribute",
    "frameworks/grouped.py:GroupedRewards(advantage)": "the advantages a run logged, an array",
    "advantages/evaluate.py:Parts(advantage)": "an array of advantages, one per sample",
}


#: Every module, public parameter and flag whose name holds "rule" -> why it is an advantage rule.
ADVANTAGE_RULE_NAMES = {
    "advantages/rule.py": "AdvantageRule, what an advantage rule is",
    "montecarlo/batch_rules.py": "Monte Carlo of the advantage rules whose statistics are the batch's",
    "claims/beyond_frameworks/batch_rules.py": "the claim on the batch-statistic advantage rules",
    "claims/beyond_answers/user_rules.py": "the claim on a user's own advantage rule (C77)",
    "claims/beyond_answers/trl_config_rules.py": "the claim on the advantage rule a TRL config names (C84)",
    "frameworks/rewards_only.py:RewardsReport(logged_rule_matches)":
        "the registered advantage rules that reproduce a run's logged advantages",
    "frameworks/trajectory.py:WindowRecord(run_rule_advice_mse)":
        "the advice for the advantage rule the run trains, MSE target",
    "frameworks/trajectory.py:WindowRecord(run_rule_advice_scale_free)":
        "the advice for the advantage rule the run trains, scale-free target",
    "frameworks/trajectory.py:WindowRecord(run_rule_advice_note)":
        "why the run's advantage rule gets no advice",
}


def _is_record(node: ast.ClassDef) -> bool:
    """A dataclass or NamedTuple, whose annotated class attributes are ``__init__``'s."""
    words = [ast.unparse(d) for d in node.decorator_list] + [ast.unparse(b) for b in node.bases]
    return any("dataclass" in w or "NamedTuple" in w for w in words)


def _parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = fn.args
    return [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]


def old_word_parameters(root: pathlib.Path) -> set[str]:
    """``module:qualname(parameter)`` of every public parameter named by :data:`OLD_WORDS`."""
    return public_parameters(root, lambda name: name in OLD_WORDS)


def rule_names(root: pathlib.Path) -> set[str]:
    """Every module (its path), public parameter (``module:qualname(parameter)``) and
    command-line flag (``module:--flag``) whose name holds ``rule``."""
    found = public_parameters(root, lambda name: "rule" in name)
    for path in sorted(root.rglob("*.py")):
        module = path.relative_to(root).as_posix()
        if "rule" in path.stem:
            found.add(module)
        flags = re.findall(r"add_argument\(\s*\"(--[\w-]+)\"", path.read_text(encoding="utf-8"))
        found.update(f"{module}:{flag}" for flag in flags if "rule" in flag)
    return found


def public_parameters(root: pathlib.Path, named) -> set[str]:
    """``module:qualname(parameter)`` of every public parameter whose name ``named`` accepts."""
    found = set()
    for path in sorted(root.rglob("*.py")):
        module = path.relative_to(root).as_posix()

        def visit(node, prefix: str, private: bool, module: str = module):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.ClassDef):
                    hidden = private or child.name.startswith("_")
                    if not hidden and _is_record(child):
                        for item in child.body:
                            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) \
                                    and named(item.target.id):
                                found.add(f"{module}:{prefix}{child.name}({item.target.id})")
                    visit(child, f"{prefix}{child.name}.", hidden, module)
                elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    public = not private and (not child.name.startswith("_")
                                              or (child.name == "__init__" and prefix))
                    if public:
                        name = (prefix[:-1] if child.name == "__init__"
                                else f"{prefix}{child.name}")
                        found.update(f"{module}:{name}({p})" for p in _parameters(child)
                                     if named(p))

        visit(ast.parse(path.read_text(encoding="utf-8")), "", False)
    return found


def test_no_public_parameter_uses_an_old_word_for_an_advantage_rule():
    found = old_word_parameters(ROOT)
    assert found - set(ALLOWED) == set(), "call an advantage rule `estimator`"
    assert set(ALLOWED) - found == set(), "an allow-list entry no longer exists: drop it"


def test_the_scan_flags_a_planted_module(tmp_path):
    (tmp_path / "planted.py").write_text(
        "from dataclasses import dataclass\n"
        "def score(rule, z):\n    return z\n"
        "def _private(rule):\n    return rule\n"
        "class Public:\n    def __init__(self, convention):\n        pass\n"
        "    def fit(self, *, advantage=None):\n        pass\n"
        "@dataclass\nclass Record:\n    advantage: str\n"
        "class _Hidden:\n    def fit(self, rule):\n        pass\n")
    assert old_word_parameters(tmp_path) == {
        "planted.py:score(rule)", "planted.py:Public(convention)",
        "planted.py:Public.fit(advantage)", "planted.py:Record(advantage)"}


def test_rule_names_only_advantage_rules():
    found = rule_names(ROOT)
    assert found - set(ADVANTAGE_RULE_NAMES) == set(), "give a rule that is not an advantage rule " \
        "its own word (group filter, allocation, projector, ...)"
    assert set(ADVANTAGE_RULE_NAMES) - found == set(), "an entry no longer exists: drop it"


def test_the_rule_scan_flags_a_planted_module_parameter_and_flag(tmp_path):
    (tmp_path / "keep_rules.py").write_text(
        "from dataclasses import dataclass\n"
        "def keep_probability(value, keep_rule=None):\n    return value\n"
        "def _private(keep_rule):\n    return keep_rule\n"
        "@dataclass\nclass Loop:\n    keep_rule: str = 'verl'\n"
        "def add_arguments(parser):\n"
        "    parser.add_argument(\"--keep-rule\", default=None)\n"
        "    parser.add_argument(\"--group-filter\", default=None)\n")
    (tmp_path / "group_filters.py").write_text("def keep_mask(group_filter, group_size):\n"
                                               "    return group_size\n")
    assert rule_names(tmp_path) == {"keep_rules.py", "keep_rules.py:keep_probability(keep_rule)",
                                    "keep_rules.py:Loop(keep_rule)", "keep_rules.py:--keep-rule"}


def test_the_signatures_show_the_one_word():
    from ustat_rl.advantages import get_rule, rule_gradient
    from ustat_rl.conformance.kit import check_conformance
    from ustat_rl.theory.advantage import advantage_moments

    assert get_rule("grpo") is get_rule(estimator="grpo")
    for fn in (get_rule, rule_gradient, check_conformance, advantage_moments):
        names = list(inspect.signature(fn).parameters)
        assert "estimator" in names and not set(OLD_WORDS) & set(names), fn.__name__


def _conformance_cli(capsys, flag, target):
    from ustat_rl.interface import cli

    try:
        code = cli.main(["conformance", target, flag, "grpo", "--max-examples", "20"])
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    return code, capsys.readouterr().err


def test_the_command_line_flag_is_estimator(tmp_path, capsys):
    (tmp_path / "advmod.py").write_text(
        "import numpy as np\n\n\n"
        "def centred(rewards, group_ids):\n"
        "    r, g = np.asarray(rewards, float), np.asarray(group_ids)\n"
        "    out = np.empty_like(r)\n"
        "    for k in np.unique(g):\n"
        "        z = r[g == k]\n"
        "        out[g == k] = z - (z.sum() - z) / max(len(z) - 1, 1) if len(z) > 1 else 0.0\n"
        "    return out\n\n\n"
        "def wrong(rewards, group_ids):\n"
        "    return np.asarray(rewards, float)\n")
    right, wrong = f"{tmp_path / 'advmod.py'}:centred", f"{tmp_path / 'advmod.py'}:wrong"
    assert _conformance_cli(capsys, "--estimator", right)[0] == 0
    assert _conformance_cli(capsys, "--estimator", wrong)[0] == 1
    code, err = _conformance_cli(capsys, "--convention", right)
    assert code == 2 and "--estimator" in err  # the old flag is gone: a usage error
