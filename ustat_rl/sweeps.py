"""Saving sweep results so an interrupted run loses nothing it finished.

Simulation scripts rewrite their tidy CSV after every finished cell; writing to a temporary
file and renaming it over the old one means an interruption leaves either the old table or
the new one, never a half-written file.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

__all__ = ["write_csv_atomic"]


def write_csv_atomic(table: pd.DataFrame, path, index: bool = False) -> None:
    """Write ``table`` to ``path`` as CSV through a temporary file and an atomic rename."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    table.to_csv(tmp, index=index)
    os.replace(tmp, path)
