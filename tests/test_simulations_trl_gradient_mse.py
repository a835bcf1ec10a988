"""Quick run of simulations/trl_gradient_mse.py: the monitor's predicted variance of the gradient
against the gradient the real TRL GRPOTrainer computes (docs/theory.md, "Against a real
trainer").

Two cells (dapo with scale_rewards="group" at G = 8, dr_grpo with "batch" at G = 4), 16 batches
each at learning rate 0. Each cell's z is (measured - predicted) / se, the se combining a
jackknife over the 16 batches and one over the sketch's 16 blocks. Measured at seeds 1-20 (40
z's): mean 0.29, standard deviation 1.27, largest |z| 2.77 (the jackknife at 16 batches is a
little small). Taking z as 1.27 times a t with 15 degrees of freedom, ``|z| <= Z_TRAINER = 6``
fails with probability 2 P(t_15 > 4.72) = 2.7e-4 per cell when the prediction is right (5.4e-4
for the two). Negative control: the prediction in the paper's units (scores not weighted as the
trainer's loss weighs them) is rejected by the same comparison (|z| >= 47.7 at those seeds).
"""

from __future__ import annotations

import pytest
from script_loader import load_script

pytest.importorskip("trl")

Z_TRAINER = 6.0


def test_quick_run_agrees_with_the_trainer_and_rejects_paper_units(tmp_path):
    script = load_script("simulations/trl_gradient_mse.py", "trl_gradient_mse_script")
    table = script.main(["--quick", "--out", str(tmp_path), "--no-progress"])
    assert len(table) == 2 and (tmp_path / "trl_gradient_mse.csv").exists()
    assert (table["z"].abs() <= Z_TRAINER).all(), table[["loss_type", "z"]]
    assert (table["z_paper_units"].abs() > Z_TRAINER).all(), table[["loss_type", "z_paper_units"]]
    assert (table["units"].str.startswith("trainer")).all()
    again = script.main(["--quick", "--out", str(tmp_path), "--no-progress"])  # resumes
    assert again.equals(table)
