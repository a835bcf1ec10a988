"""The old spellings that 0.1.x kept alive are gone in 0.2.0 (CHANGELOG.md lists each one).

The lists are read from CHANGELOG.md, so a rename recorded there is checked here: an old module
path raises ``ModuleNotFoundError`` (or is a module of its own at that path, never another module
served under the old name), an old keyword is an unexpected keyword (``TypeError``), a name a
package used to re-export is an ``AttributeError``, and an old command-line flag is a usage error.
Planted controls put a shim back (an alias finder, a keyword-translating wrapper, a package
``__getattr__``) and show each check catches it.
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import inspect
import re
import sys

import pytest
from script_loader import ROOT

import ustat_rl

pytestmark = pytest.mark.fast

CHANGELOG = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
LIBRARY = ROOT / "ustat_rl"


def _section(title: str) -> str:
    """The text of the 0.2.0 section headed ``### {title}`` (up to the next heading)."""
    release = CHANGELOG.split("## 0.2.0", 1)[1].split("\n## ", 1)[0]
    return release.split(f"### {title}", 1)[1].split("\n### ", 1)[0]


OLD_MODULES = dict(re.findall(r"^- `([\w.]+)` -> `([\w.]+)`$", _section("Module paths"), re.M))
OLD_ATTRIBUTES = re.findall(r"^- `([\w.]+)\.(\w+)` -> `[\w.]+`$",
                            _section("Names a package no longer re-exports"), re.M)
OLD_KEYWORDS = [(path, old, new) for path, renames in
                re.findall(r"^- `([\w.]+)`: (.*)$", _section("Keywords"), re.M)
                for old, new in re.findall(r"`(\w+)=` -> `(\w+)=`", renames)]
REGROUPED = _section("Signatures")
OLD_FLAGS = re.findall(r"^- `ustat-rl (\w+) (--[\w-]+)` -> `ustat-rl \w+ (--[\w-]+)`",
                       _section("Command line"), re.M)


def test_the_changelog_lists_every_kind_of_old_name():
    assert ustat_rl.__version__ == "0.2.0"
    assert len(OLD_MODULES) == 66 and len(OLD_ATTRIBUTES) == 12
    assert len(OLD_KEYWORDS) == 74 and len(OLD_FLAGS) == 4


# ---------------------------------------------------------------------------- module paths
def _served_elsewhere(old: str) -> str | None:
    """The name of the module an import of ``old`` gives, when it is not a module at ``old``."""
    try:
        module = importlib.import_module(old)
    except ModuleNotFoundError as exc:
        assert exc.name is not None and old.startswith(exc.name), exc
        return None
    return None if module.__name__ == old else module.__name__


@pytest.mark.parametrize("old", sorted(OLD_MODULES))
def test_an_old_module_path_is_not_served(old):
    assert _served_elsewhere(old) is None


class _PlantedAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """A finder that answers one old path with its new module: the shim 0.1.x had."""

    def __init__(self, old: str, new: str):
        self.old, self.new = old, new

    def find_spec(self, fullname, path=None, target=None):
        return importlib.machinery.ModuleSpec(fullname, self) if fullname == self.old else None

    def create_module(self, spec):
        return importlib.import_module(self.new)

    def exec_module(self, module):
        pass


def test_the_module_check_catches_a_planted_alias():
    old = "ustat_rl.rates"
    finder = _PlantedAlias(old, OLD_MODULES[old])
    sys.meta_path.insert(0, finder)
    try:
        assert _served_elsewhere(old) == "ustat_rl.stats.rates"
    finally:
        sys.meta_path.remove(finder)
        sys.modules.pop(old, None)
    assert _served_elsewhere(old) is None


def test_no_library_module_keeps_the_alias_machinery():
    words = ("renamed_keywords", "_moved", "DeprecationWarning", "REMOVED_IN", "moved_attribute")
    found = sorted(f"{p.relative_to(ROOT)}: {w}" for p in LIBRARY.rglob("*.py")
                   for w in words if re.search(rf"\b{w}\b", p.read_text(encoding="utf-8")))
    assert found == []


# ---------------------------------------------------------------------------- re-exported names
def _attribute_served(package: str, name: str) -> bool:
    try:
        getattr(importlib.import_module(package), name)
    except AttributeError:
        return False
    return True


@pytest.mark.parametrize(("package", "name"), OLD_ATTRIBUTES)
def test_a_moved_name_is_not_re_exported(package, name):
    assert not _attribute_served(package, name)


def test_the_attribute_check_catches_a_planted_package_getattr(monkeypatch):
    package, name = "ustat_rl.claims._common", "enumerate_prompt_estimates"
    module = importlib.import_module(package)
    monkeypatch.setattr(module, "__getattr__", lambda attr: getattr(
        importlib.import_module("ustat_rl.policies.enumeration"), attr), raising=False)
    assert _attribute_served(package, name)


# ---------------------------------------------------------------------------- keywords
def _function(path: str):
    module, name = path.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


def _rejects(fn, old: str) -> bool:
    """Whether ``fn(old=...)`` fails as an unexpected keyword, before the body runs."""
    try:
        fn(**{old: object()})
    except TypeError as exc:
        return f"unexpected keyword argument '{old}'" in str(exc)
    except Exception:  # the body ran on the value: something took the old keyword
        return False
    return False


@pytest.mark.parametrize(("path", "old", "new"), OLD_KEYWORDS,
                         ids=[f"{p.rsplit('.', 1)[1]}({o})" for p, o, _ in OLD_KEYWORDS])
def test_an_old_keyword_is_a_type_error(path, old, new):
    fn = _function(path)
    # the new keyword, unless the function's settings moved into a config object since
    assert new in inspect.signature(fn).parameters or f"`{path}(" in REGROUPED
    assert _rejects(fn, old)


def _planted_shim(old: str, new: str):
    """The keyword shim 0.1.x had, written again: ``old=`` passed on as ``new=``."""
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if old in kwargs:
                kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)
        return wrapper
    return decorate


def test_the_keyword_check_catches_a_planted_shim():
    from ustat_rl.advantages.registry import get_rule

    assert _rejects(get_rule, "rule")
    assert not _rejects(_planted_shim("rule", "estimator")(get_rule), "rule")


# ---------------------------------------------------------------------------- command line
def _cli(argv, capsys) -> tuple[int, str, str]:
    from ustat_rl.interface import cli

    try:
        code = cli.main(argv)
    except SystemExit as exc:  # argparse's usage errors and --help
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(("command", "old", "new"), OLD_FLAGS)
def test_an_old_flag_is_a_usage_error(command, old, new, capsys, tmp_path):
    required = {"rewards": [str(tmp_path), "--budget", "8"],
                "gstar": [str(tmp_path), "--budget", "8"],
                "conformance": ["m:f", "--estimator", "grpo"]}[command]
    code, _, err = _cli([command, *required, old, "grpo"], capsys)
    assert code == 2 and f"unrecognized arguments: {old} grpo" in err
    code, out, _ = _cli([command, "--help"], capsys)
    assert code == 0 and new in out and old not in out


def test_the_command_line_uses_one_word_for_the_advantage_rule():
    """Every subcommand that takes an advantage rule calls it ``--estimator``."""
    flags = set()
    for path in (LIBRARY / "interface").glob("*.py"):
        flags.update(re.findall(r"add_argument\(\s*\"(--[\w-]+)\"", path.read_text()))
    assert "--estimator" in flags
    assert not flags & {"--rule", "--convention", "--advantage"}


# ---------------------------------------------------------------------------- other renames
RENAMED = re.findall(r"^- `(ustat_rl[\w.]*)\.([A-Z_]+)` -> `([A-Z_]+)`", _section("Other names"),
                     re.M)


@pytest.mark.parametrize(("module", "old", "new"), RENAMED)
def test_a_renamed_constant_has_its_new_name_only(module, old, new):
    owner = importlib.import_module(module)
    assert hasattr(owner, new) and not hasattr(owner, old)
    assert new in owner.__all__ and old not in owner.__all__
