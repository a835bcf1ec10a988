"""benchmarks/bench_sketch.py --quick: the large model's factored pilot goes through gstar."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration  # script: benchmarks/bench_sketch.py --quick


def test_quick_benchmark_pilot_of_the_large_model_goes_through_gstar(tmp_path, capsys):
    """benchmarks/bench_sketch.py --quick: a factored pilot of the 38.4M-parameter GPT-2 built
    from a config, saved, and read back by ``ustat-rl gstar``."""
    from script_loader import load_script

    from ustat_rl.interface.cli import main as cli_main
    from ustat_rl.pilot.rollouts import load_rollouts

    bench = load_script("benchmarks/bench_sketch.py", "bench_sketch_script")
    out = tmp_path / "pilot.npz"
    res = bench.main(["--quick", "--out", str(out)])
    assert res["pilot"]["gstar_exit"] == 0 and "rows" not in res
    pilot = load_rollouts(out)
    assert (pilot.sketch_route, pilot.sketch_blocks, pilot.sketch_dim) == ("factored", 16, 64)
    assert pilot.param_dim > 30_000_000 and pilot.n_prompts == bench.PILOT["prompts"]
    capsys.readouterr()
    assert cli_main(["gstar", str(out), "--budget", "32"]) == 0
    assert "G*" in capsys.readouterr().out
