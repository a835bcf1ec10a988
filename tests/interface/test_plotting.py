"""Tests of ustat_rl.interface.plotting: no global side effects, shapes, validation, files written."""

from __future__ import annotations

import importlib
import subprocess
import sys

import matplotlib
import numpy as np
import pandas as pd
import pytest

pytestmark = pytest.mark.fast


def test_import_changes_no_global_state():
    rc_before = dict(matplotlib.rcParams)
    backend_before = matplotlib.get_backend()
    sys.modules.pop("ustat_rl.interface.plotting", None)
    importlib.import_module("ustat_rl.interface.plotting")
    assert dict(matplotlib.rcParams) == rc_before
    assert matplotlib.get_backend() == backend_before


def test_import_does_not_load_pyplot():
    # pyplot holds global figure state and picks a backend; a fresh interpreter shows whether
    # importing the module pulls it in
    code = "import sys, ustat_rl.interface.plotting; print('matplotlib.pyplot' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def _tidy():
    rows = []
    for fam in ("a", "b"):
        for est in ("vanilla", "grpo"):
            for g in (2, 4, 8):
                mse = (1.0 if est == "vanilla" else 0.5) / g
                rows.append({"family": fam, "policy": "p", "estimator": est, "group_size": g,
                             "mse_mc": mse, "ci_low": 0.9 * mse, "ci_high": 1.1 * mse,
                             "mse_exact": mse})
    return pd.DataFrame(rows)


def test_plot_mse_grid_layout_and_save(tmp_path):
    from ustat_rl.interface.plotting import plot_mse_grid, save_figure

    table = _tidy()
    fig = plot_mse_grid(table, table, row="family", col="policy", estimators=("vanilla", "grpo"))
    axes = np.array(fig.axes).reshape(2, 1)
    assert axes.shape == (2, 1)
    assert axes[0, 0].get_xscale() == "log" and axes[0, 0].get_yscale() == "log"
    # one exact line per estimator in every panel
    assert all(len(ax.get_lines()) >= 2 for ax in axes.ravel())
    paths = save_figure(fig, tmp_path / "sub" / "fig")
    assert [p.suffix for p in paths] == [".png", ".pdf"]
    assert all(p.stat().st_size > 1000 for p in paths)


def test_plot_mse_grid_names_missing_column():
    from ustat_rl.interface.plotting import plot_mse_grid

    with pytest.raises(ValueError, match="ci_low"):
        plot_mse_grid(_tidy().drop(columns="ci_low"), row="family", col="policy",
                      estimators=("grpo",))


def test_new_figure_validates_grid():
    from ustat_rl.interface.plotting import new_figure

    fig, axes = new_figure(2, 3)
    assert axes.shape == (2, 3)
    with pytest.raises(ValueError, match="n_rows"):
        new_figure(0, 1)
