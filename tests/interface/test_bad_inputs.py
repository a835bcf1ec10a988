"""Bad input to the commands and simulation scripts: one line naming the option, exit 2, before
any work (issue 22's cases), and the shared rules behind it (output paths, --only, --device).

Each case either monkeypatches the expensive step to fail the test if it is reached, or is
rejected while the arguments are parsed, before a script's main body runs.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from script_loader import ROOT, load_script

from ustat_rl._paths import check_output, output_problem
from ustat_rl.interface._commands import resolve_claim_ids
from ustat_rl.interface._report_html import csv_table_html, table_cell
from ustat_rl.interface.cli import main

pytestmark = pytest.mark.fast

SCRIPTS = ["gradient_mse", "limit_law", "optimal_group_size", "transformer_gradient_mse",
           "transformer_group_size", "transformer_aggregation_bias", "make_transformer_policies"]
DEVICE_SCRIPTS = ["transformer_gradient_mse", "transformer_group_size",
                  "make_transformer_policies"]
UNWRITABLE = Path("/proc/ustat-rl-test.json")  # procfs refuses new files, even to root


def one_line_error(capsys, *words):
    """The one error line of stderr (after argparse's usage block, if any) names ``words``."""
    err = capsys.readouterr().err.strip()
    lines = [line for line in err.splitlines()
             if not (line.startswith("usage:") or line.startswith(" "))]  # argparse's usage
    assert len(lines) == 1 and "Traceback" not in err, err
    for word in words:
        assert word in lines[0], err
    return lines[0]


def parse(script: str, argv):
    """Run a script's argument parsing (its ``parse_args`` or, without one, ``main``)."""
    module = load_script(f"simulations/{script}.py", f"{script}_bad_inputs")
    entry = getattr(module, "parse_args", None) or module.main
    return entry(argv)


# ------------------------------------------------------------------------------ output paths
def test_output_problem_finds_every_unwritable_path_and_creates_nothing(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert "is a directory" in output_problem(tmp_path)
    assert "is a file, not a directory" in output_problem(blocker, "folder")
    assert "cannot create" in output_problem(blocker / "sub" / "x.json")
    if Path("/proc/self").exists():
        assert "not writable" in output_problem(UNWRITABLE)
    deep = tmp_path / "a" / "b" / "x.json"
    assert output_problem(deep) is None and not (tmp_path / "a").exists()
    assert output_problem(tmp_path / "new", "folder") is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]  # the probe left nothing
    with pytest.raises(ValueError, match="^--json: "):
        check_output(tmp_path, "--json")
    with pytest.raises(ValueError, match="^`out`: "):
        check_output(tmp_path, "out")


@pytest.mark.parametrize("argv, option", [
    (["verify", "--only", "C1", "--json", "{dir}"], "--json"),
    (["verify", "--only", "C1", "--json", "{file}/x.json"], "--json"),
    (["list", "--out", "{dir}"], "--out"),
    (["list", "--out", "{file}/x.txt"], "--out"),
    (["report", "{verify}", "--out", "{file}/r.html"], "--out"),
    (["gstar", "{pilot}", "--budget", "64", "--json", "{dir}/"], "--json"),
    (["gstar", "{pilot}", "--budget", "64", "--plot", "{file}/p.png"], "--plot"),
])
def test_commands_refuse_unwritable_outputs_before_any_work(tmp_path, capsys, monkeypatch,
                                                            argv, option):
    import ustat_rl.claims as claims_pkg
    import ustat_rl.interface.report as report
    import ustat_rl.pilot.report as pilot_report

    def no_work(*args, **kwargs):
        raise AssertionError("work started although an output path was unwritable")

    monkeypatch.setattr(claims_pkg, "run_claim", no_work)
    monkeypatch.setattr(report, "render_report", no_work)
    monkeypatch.setattr(pilot_report, "gstar_report", no_work)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    verify = tmp_path / "v.json"
    verify.write_text(json.dumps({"results": [{"claim_id": "C1", "verdict": "pass"}]}))
    pilot = tmp_path / "pilot.npz"
    pilot.write_bytes(b"")
    values = {"dir": str(tmp_path), "file": str(blocker), "verify": str(verify),
              "pilot": str(pilot)}
    assert main([a.format(**values) for a in argv]) == 2
    one_line_error(capsys, option)


# ------------------------------------------------------------------------------ verify
def test_only_follows_one_rule_blanks_and_case_ignored():
    known = ["C1", "C2", "C5", "C20.sym", "C20"]
    assert resolve_claim_ids(" C2", known) == ["C2"]
    assert resolve_claim_ids("c5", known) == ["C5"]
    assert resolve_claim_ids(" c20.SYM , C2,c2", known) == ["C20.sym", "C2"]
    with pytest.raises(ValueError, match=r"did you mean .*C5"):
        resolve_claim_ids("C55", known)
    with pytest.raises(ValueError, match="at least one claim ID"):
        resolve_claim_ids(" , ", known)


def test_errata_alone_runs_no_claim(capsys, monkeypatch, tmp_path):
    import ustat_rl.claims as claims_pkg
    import ustat_rl.interface._commands as commands

    def no_claims(*args, **kwargs):
        raise AssertionError("a claim ran although only the errata were asked for")

    monkeypatch.setattr(claims_pkg, "run_claim", no_claims)
    monkeypatch.setattr(commands, "errata", lambda: "# Errata (stand-in)")
    assert main(["verify", "--errata"]) == 0
    assert "# Errata (stand-in)" in capsys.readouterr().out
    assert main(["verify", "--errata", "--json", str(tmp_path / "v.json")]) == 2
    one_line_error(capsys, "--json", "--only")


def test_unknown_claim_lists_near_matches(capsys):
    assert main(["verify", "--only", "C59"]) == 2  # no claim C59
    one_line_error(capsys, "--only", "did you mean", "C5")


# ------------------------------------------------------------------------------ report
def test_report_rejects_an_unknown_verdict(tmp_path, capsys):
    bad = tmp_path / "v.json"
    bad.write_text(json.dumps({"results": [{"claim_id": "C1", "verdict": "banana"}]}))
    assert main(["report", str(bad), "--out", str(tmp_path / "r.html")]) == 2
    one_line_error(capsys, "banana", "pass, refuted, differs, fail, error")
    assert not (tmp_path / "r.html").exists()


def test_report_says_what_it_left_out(tmp_path):
    from ustat_rl.interface.report import write_report

    verify = tmp_path / "v.json"
    check = {"name": "c", "predicted": 1.0, "measured": 1.0, "passed": True}
    verify.write_text(json.dumps({"results": [{"claim_id": "C1", "verdict": "pass",
                                               "checks": [check]}]}))
    results = tmp_path / "results"
    results.mkdir()
    (results / "broken.png").write_bytes(b"not a png")
    (results / "x.run.json").write_text("{truncated")
    summary = write_report(tmp_path / "r.html", verify, results, errata="# none")
    assert sorted(line.split(":")[0] for line in summary.dropped) == ["broken.png",
                                                                      "x.run.json"]
    html = (tmp_path / "r.html").read_text()
    assert "Left out as unreadable" in html and "broken.png" in html and "x.run.json" in html


def test_report_tables_round_and_scroll(tmp_path):
    assert table_cell("0.12345678901234567") == "0.123457"
    assert table_cell("123456789") == "123456789"  # integers are exact
    assert table_cell("grpo") == "grpo" and table_cell("nan") == "nan"
    csv = tmp_path / "t.csv"
    csv.write_text("a,b\n0.30000000000000004,7\n")
    html = csv_table_html(csv, "t.csv", "x", 40, 14)
    assert '<div class="wide"><table>' in html and "0.3</td>" in html
    assert "0.30000000000000004" not in html  # negative control of the rounding


# ------------------------------------------------------------------------------ simulations
@pytest.mark.parametrize("argv, option", [
    (["--quick", "--groups", "3"], "--groups"),  # odd G: no budget of the sweep has a cell
    (["--quick", "--budgets", "-4"], "--budgets"),
    (["--quick", "--seeds", "0"], "--seeds"),
    (["--quick", "--iters", "0"], "--iters"),
    (["--quick", "--lr", "nan"], "--lr"),
])
def test_group_size_grid_errors(capsys, argv, option):
    with pytest.raises(SystemExit) as info:
        parse("transformer_group_size", argv)
    assert info.value.code == 2
    one_line_error(capsys, option)


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_checks_seed_and_out(script, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    if script != "transformer_aggregation_bias":  # it has no seed
        with pytest.raises(SystemExit) as info:
            parse(script, ["--quick", "--seed", "-1"])
        assert info.value.code == 2
        one_line_error(capsys, "--seed")
    with pytest.raises(SystemExit) as info:
        parse(script, ["--quick", "--out", str(blocker)])
    assert info.value.code == 2
    one_line_error(capsys, "--out", "is a file")


@pytest.mark.parametrize("script", DEVICE_SCRIPTS)
def test_every_device_script_checks_the_device(script, capsys):
    with pytest.raises(SystemExit) as info:
        parse(script, ["--quick", "--device", "tpu9"])
    assert info.value.code == 2
    one_line_error(capsys, "--device", "tpu9")
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit) as info:
            parse(script, ["--quick", "--device", "cuda"])
        assert info.value.code == 2
        one_line_error(capsys, "--device", "needs CUDA")


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs the ray extra")
def test_ray_addresses_without_a_cluster_are_one_line(capsys):
    with pytest.raises(SystemExit) as info:
        parse("optimal_group_size", ["--quick", "--ray-address", "auto"])
    assert info.value.code == 2
    one_line_error(capsys, "--ray-address", "ray start --head")
    if importlib.util.find_spec("grpc") is None:
        with pytest.raises(SystemExit) as info:
            parse("optimal_group_size", ["--quick", "--ray-address", "ray://127.0.0.1:1"])
        assert info.value.code == 2
        one_line_error(capsys, "--ray-address", "ray[client]")


# ------------------------------------------------------------------------------ start-up
def test_version_and_help_do_not_load_torch_or_numba():
    code = ("import sys\nfrom ustat_rl.interface.cli import main\n"
            "for argv in (['--version'], ['--help'], ['verify', '--help']):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            "heavy = [m for m in ('torch', 'numba', 'scipy', 'statsmodels') if m in sys.modules]\n"
            "print('HEAVY', heavy)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr


def test_the_package_still_exports_everything_lazily():
    import ustat_rl

    for name in ustat_rl.__all__:
        assert getattr(ustat_rl, name) is not None
    assert ustat_rl.runs.__name__ == "ustat_rl.runs"  # submodules too
    with pytest.raises(AttributeError):
        ustat_rl.no_such_name  # noqa: B018


# ------------------------------------------------------------------------------ quick modes
def test_the_two_scripts_without_a_quick_mode_now_have_one(tmp_path):
    policies = load_script("simulations/make_transformer_policies.py", "make_policies_quick")
    policies.main(["--quick", "--out", str(tmp_path / "p"), "--device", "cpu"])
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == ["medium.pt", "strong.pt",
                                                                    "weak.pt"]
    bias = load_script("simulations/transformer_aggregation_bias.py", "bias_quick")
    table = bias.main(["--quick", "--out", str(tmp_path / "b")])
    assert set(table["policy"]) == {"weak"} and table["prompt"].nunique() == 1
    assert (tmp_path / "b" / "transformer_aggregation_bias.csv").is_file()
