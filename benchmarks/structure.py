"""The package's shape: folders, layers, import arrows between folders, import cycles.

The figures come from the scans of ``tests/test_layers.py`` (its import resolution, layer
order and cycle searches), applied to the package at ``--root``, so the numbers printed here are
the ones the layer test enforces. Run on two checkouts to compare a layout before and after::

    python benchmarks/structure.py                         # this checkout's ustat_rl/
    python benchmarks/structure.py --root /other/ustat_rl  # another checkout's package

Counts: *folders* are the package's top-level folders with an ``__init__.py`` (nested
subpackages counted apart); *layers* those of the layer order that exist, the root modules'
``base`` included; an *arrow* is an ordered pair of different layers with at least one import
(deferred ones too) from the first to the second; *up* arrows point against the layer order;
*folder cycles* and *module cycles* are circles of imports between folders and between modules.
*Lower-layer test files importing claims* are test files in a test folder of a layer below
``claims`` that import ``ustat_rl.claims``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from script_loader import load_module  # noqa: E402

layers_test = load_module(ROOT / "tests" / "test_layers.py", "_structure_test_layers")


def measure(root: Path, tests: Path | None = None) -> dict:
    """The figures of the package at ``root`` (and of its test folder ``tests``, if given)."""
    t = layers_test
    modules = list(t._modules(root))
    lengths = {name: len(path.read_text().splitlines()) for path, name in modules}
    folders = sorted(p.name for p in root.iterdir() if (p / "__init__.py").is_file())
    nested = sorted({name.rsplit(".", 1)[0] for path, name in modules
                     if path.name != "__init__.py" and name.count(".") >= 3})
    root_modules = sorted(p.stem for p in root.glob("*.py") if p.stem != "__init__")
    rooms = {name: t._room(root, name) for _, name in modules}
    arrows = set()
    for name, other in t._resolved_imports(root):
        here, there = rooms.get(name), other and t._room(root, other)
        if here and there and here != there:
            arrows.add((here, there))
    order = t.LAYERS
    up = sorted((a, b) for a, b in arrows if order.index(b) > order.index(a))
    figures = {
        "folders": len(folders),
        "nested subpackages": len(nested),
        "root modules besides __init__": len(root_modules),
        "layers": len({r for r in rooms.values() if r}),
        "modules": len(modules),
        "lines": sum(lengths.values()),
        "modules over 600 lines": sum(n > 600 for n in lengths.values()),
        "modules of 360-400 lines": sum(360 <= n <= 400 for n in lengths.values()),
        "arrows between layers": len(arrows),
        "arrows pointing up": len(up),
        "folder cycles": len(t._folder_cycles(root)),
        "module cycles": len(t._module_cycles(root)),
    }
    if tests is not None:
        figures["lower-layer test files importing claims"] = len(t._lower_claims_importers(tests))
    details = {"root modules": root_modules, "module cycles": t._module_cycles(root),
               "long modules": sorted((n, m) for m, n in lengths.items() if n > 600)}
    return figures, details


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--root", type=Path, default=ROOT / "ustat_rl",
                        help="the package folder to measure (default: this checkout's)")
    args = parser.parse_args(argv)
    tests = args.root.resolve().parent / "tests"
    figures, details = measure(args.root.resolve(), tests if tests.is_dir() else None)
    width = max(map(len, figures))
    for key, value in figures.items():
        print(f"{key:<{width}}  {value}")
    for key, value in details.items():
        print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
