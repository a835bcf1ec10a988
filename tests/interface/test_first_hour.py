"""A practitioner's first hour (issue 46): what a user types gets the right answer or a one-line
refusal in their words, never a silent wrong answer, a hang or a traceback.

Each case runs the command as a user would (``ustat_rl.interface.cli.main``) and checks its exit
code and the first line of its output, so a regression of each kind fails here.

``tests/data/trl_g4_trainer_state.json`` is the ``trainer_state.json`` of a real TRL 1.16.0 run
(:func:`ustat_rl.frameworks.demo.demo_trainer` with ``num_generations`` 4, 8 prompts per step,
16 steps, ``logging_steps`` 1, saved at step 16).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading

import numpy as np
import pytest
from script_loader import DATA, ROOT

from ustat_rl.interface.cli import main

pytestmark = pytest.mark.fast

TRL_G4 = DATA / "trl_g4_trainer_state.json"


def _run(capsys, *argv):
    """Exit code, stdout and stderr of ``ustat-rl argv``."""
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _first(text: str) -> str:
    return text.splitlines()[0] if text else ""


# ------------------------------------------------------- logs: the group size the logs fit
@pytest.mark.parametrize("wrong,why", [
    (2, "17 successes cannot fill 14 mixed groups of 2 and 2 all-equal ones"),
    (3, "its 32 rewards do not split into groups of 3"),
    (8, "is not a whole number of its 4 groups of 8"),
    (16, "is not a whole number of its 2 groups of 16"),
])
def test_logs_refuses_a_group_size_the_logs_contradict(capsys, wrong, why):
    code, out, err = _run(capsys, "logs", TRL_G4, "--group-size", wrong)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert _first(err).startswith(f"ustat-rl logs: error: `--group-size` {wrong} contradicts "
                                  "the logs: at step 1")
    assert why in err and err.rstrip().endswith("the logs are consistent with G = 4")


def test_logs_accepts_the_run_s_own_group_size(capsys):
    code, out, err = _run(capsys, "logs", TRL_G4, "--group-size", 4, "--window", 4)
    assert code == 0, err
    assert out.splitlines()[1].startswith("run's G: 4 (the batch size and all-equal fraction "
                                          "of 16 of 16 logged steps agree)")


def test_logs_group_size_check_reads_the_batch_from_reward_std():
    from ustat_rl.frameworks.logs import batch_counts, consistent_group_sizes, read_trainer_state

    history = read_trainer_state(TRL_G4)
    n, k = batch_counts(history)
    assert n.tolist() == [32] * 16  # 8 prompts x 4 completions per step
    assert k.tolist() == [round(32 * r) for r in history.reward]
    assert consistent_group_sizes(history) == [4]


# ------------------------------------------------------------ report: a verdict needs evidence
@pytest.mark.parametrize("results,words", [
    ([], "'results' is empty: no claim was checked"),
    ([{"claim_id": "C1", "verdict": "pass"}], "(C1) says 'pass' with no evidence"),
    ([{"claim_id": "C1", "verdict": "fail", "checks": []}], "(C1) says 'fail' with no evidence"),
])
def test_report_refuses_a_verify_json_without_evidence(tmp_path, capsys, results, words):
    verify = tmp_path / "v.json"
    verify.write_text(json.dumps({"summary": {}, "results": results}))
    code, out, err = _run(capsys, "report", verify, "--out", tmp_path / "r.html")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert _first(err).startswith("ustat-rl report: error:") and words in err
    assert not (tmp_path / "r.html").exists()


def test_no_verdict_beside_the_check_raised():
    from ustat_rl.interface.claims_display import row_cells

    raised = row_cells({"claim_id": "C1", "verdict": "error", "checks": []}).compared
    assert raised == "no comparison (the check raised)"
    for verdict in ("pass", "refuted", "differs", "fail", "skipped"):
        assert "raised" not in row_cells({"claim_id": "C1", "verdict": verdict}).compared


# ------------------------------------------------------------------- a zero is printed as 0
def _binary_rollouts(path, groups=64, group_size=8, seed=0):
    rng = np.random.default_rng(seed)
    p = rng.beta(1.0, 1.0, groups)
    reward = (rng.random((groups, group_size)) < p[:, None]).astype(float).ravel()
    np.savez(path, prompt_id=np.repeat(np.arange(groups), group_size), reward=reward)
    return path


def test_replace_ratio_near_one_prints_zero_copies(tmp_path, capsys):
    # at rho = 0.99 a used batch has every group good: no copy, exactly
    code, out, err = _run(capsys, "rewards", _binary_rollouts(tmp_path / "r.npz"), "--budget",
                          64, "--dynamic-sampling", "--replace-ratio", 0.99)
    assert code == 0, err
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("POLARIS replace"))
    assert lines[head + 1].split()[-1] == "copies"
    rows = lines[head + 2:head + 8]
    assert [row.split()[0] for row in rows] == ["2", "4", "8", "16", "32", "64"]
    assert [row.split()[-1] for row in rows] == ["0"] * 6


def test_the_number_formatter_prints_zero_of_either_sign_as_zero():
    from ustat_rl.formatting import format_number

    assert format_number(-0.0) == format_number(0.0) == "0"
    assert format_number(-1.8e-14) == "-1.8e-14"  # a value that is not zero keeps its sign


# ------------------------------------------------------------------------- bounded work
def test_allocate_caps_the_budget_before_the_pilot_is_read(tmp_path, capsys, monkeypatch):
    import ustat_rl.pilot.rollouts as rollouts

    def no_work(*args, **kwargs):
        raise AssertionError("the pilot was read although the budget is past the cap")

    monkeypatch.setattr(rollouts, "load_rollouts", no_work)
    pilot = _binary_rollouts(tmp_path / "pilot.npz")
    code, out, err = _run(capsys, "allocate", pilot, "--budget", 100_000_000)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert _first(err) == ("ustat-rl allocate: error: `--budget` must be <= 16777216 (the "
                           "group-size search evaluates every G in 2..N in memory), got "
                           "100000000")


# ------------------------------------------------ conformance: a target that never returns
HANG = '''
import threading

def forever(rewards, group_ids):
    threading.Event().wait()  # never set: the call never returns
'''


def test_conformance_refuses_a_target_that_never_returns(tmp_path):
    # a subprocess, so the abandoned worker thread ends with it; the 600 s are only a guard
    # against a regression that hangs, the assertions are about the exit code and the line
    (tmp_path / "hang.py").write_text(HANG)
    done = subprocess.run([sys.executable, "-m", "ustat_rl.interface.cli", "conformance",
                           "hang.py:forever", "--estimator", "trl_group", "--timeout", "1"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.count("\n") == 1
    assert _first(done.stderr).startswith("ustat-rl conformance: forever did not return within "
                                          "1 s on a batch of ")
    assert "(--timeout 1): a function that does not return cannot be tested" in done.stderr


def test_conformance_help_states_the_default_timeout(capsys):
    from ustat_rl.conformance.search import DEFAULT_TIMEOUT

    with pytest.raises(SystemExit):
        main(["conformance", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"--timeout SECONDS seconds one call of the function may take before the run stops " \
           f"with exit 2 (default {DEFAULT_TIMEOUT:g})" in text


def test_conformance_prints_progress_on_a_long_search(tmp_path, capsys, monkeypatch):
    import ustat_rl.conformance.search as search

    monkeypatch.setattr(search, "PROGRESS_EVERY", 0.0)  # a line after every call
    monkeypatch.setattr(search, "_on_terminal", lambda: True)  # as on a user's terminal
    (tmp_path / "good.py").write_text(
        "from ustat_rl.advantages.conventions import advantages\n\n"
        "def good(rewards, group_ids):\n"
        "    return advantages('trl_group', rewards, group_ids)\n")
    code, out, err = _run(capsys, "conformance", f"{tmp_path / 'good.py'}:good", "--estimator",
                          "trl_group", "--max-examples", 5)
    assert code == 0, err
    lines = err.splitlines()
    assert len(lines) >= 5 and all(line.startswith("ustat-rl conformance: good: ")
                                   for line in lines)
    assert lines[0].split(": ")[2].startswith("1 calls in ")
    assert "(up to 5 batches, then shrinking a failing one)" in lines[0]
    # in a log or a pipe: the report alone, however long the search took
    monkeypatch.setattr(search, "_on_terminal", lambda: False)
    code, out, err = _run(capsys, "conformance", f"{tmp_path / 'good.py'}:good", "--estimator",
                          "trl_group", "--max-examples", 5)
    assert code == 0 and err == "" and out.startswith("CONFORMS")


def test_bounded_calls_passes_results_and_errors_through():
    from ustat_rl.conformance.search import TargetTimeout, bounded_calls

    seen = []
    double = bounded_calls(lambda x: 2 * x, 600, lambda calls, s: seen.append(calls), every=0)
    assert double(3) == 6 and double(4) == 8 and seen == [1, 2]
    with pytest.raises(ZeroDivisionError):
        bounded_calls(lambda: 1 / 0, 600)()
    release = threading.Event()
    stuck = bounded_calls(lambda x: release.wait(), 0.01)
    with pytest.raises(TargetTimeout, match="did not return within 0.01 s on a batch of 3"):
        stuck(np.zeros(3))
    release.set()  # the abandoned worker ends here
    with pytest.raises(ValueError, match="`timeout` must be a number of seconds > 0"):
        bounded_calls(len, 0)


# ------------------------------------------ the extras' entry points name the extra on import
@pytest.mark.parametrize("entry,module,blocked,extra", [
    ("GroupSizeMonitor", "ustat_rl.frameworks.trl_monitor", "transformers", "trl"),
    # the verl entries import torch alone at import time (verl and ray when called: below)
    ("WindowMonitor", "ustat_rl.frameworks.entry", "torch", None),
])
def test_an_extra_s_entry_names_the_extra_when_its_package_is_missing(monkeypatch, entry,
                                                                     module, blocked, extra):
    import ustat_rl.frameworks as frameworks

    monkeypatch.setitem(sys.modules, blocked, None)  # as on an install without the package
    monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(ModuleNotFoundError) as info:
        getattr(frameworks, entry)
    what, how = ((f"the optional package {blocked!r}", f"'ustat-rl[{extra}]'") if extra
                 else (f"the package {blocked!r}", blocked))
    assert str(info.value) == (f"{entry} needs {what}, which is not installed: pip install {how}")


def test_from_import_of_the_trl_monitor_names_the_extra(tmp_path):
    # the very line a user types, on an interpreter where transformers cannot be imported
    code = ("import sys; sys.modules['transformers'] = None\n"
            "from ustat_rl.frameworks import GroupSizeMonitor\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        "ModuleNotFoundError: GroupSizeMonitor needs the optional package 'transformers', which "
        "is not installed: pip install 'ustat-rl[trl]'")


def test_the_verl_task_runner_names_the_extra_without_ray(monkeypatch):
    from ustat_rl.frameworks import verl_task_runner

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ModuleNotFoundError, match=r"^the verl hook needs the optional package "
                                                  r"'ray' \(installed with verl\), which is not "
                                                  r"installed: pip install 'ustat-rl\[verl\]'$"):
        verl_task_runner()


def test_the_verl_task_runner_names_the_extra_without_verl(monkeypatch):
    from ustat_rl.frameworks import verl_task_runner

    for name in [m for m in sys.modules if m == "verl" or m.startswith("verl.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "verl", None)
    with pytest.raises(ImportError, match=r"^the verl hook needs verl \(the `verl` extra: pip "
                                          r"install 'ustat-rl\[verl\]'\) and its worker's "
                                          r"imports: "):
        verl_task_runner()


# ------------------------------------------------------- refusals in the user's words
def test_a_mistyped_estimator_gets_did_you_mean_and_the_listing(tmp_path, capsys):
    pilot = _binary_rollouts(tmp_path / "pilot.npz")
    code, out, err = _run(capsys, "gstar", pilot, "--budget", 64, "--estimator", "grpp")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert _first(err).startswith("ustat-rl gstar: error: `--estimator` must be one of the ")
    assert "got 'grpp' (did you mean 'grpo'?); `ustat-rl list --estimators` lists them" in err
    assert len(err) < 250  # the closest names, not every name
    code, out, _ = _run(capsys, "list", "--estimators")
    from ustat_rl.advantages import rule_names

    assert code == 0 and [line.split()[0] for line in out.splitlines()[:len(rule_names())]] \
        == list(rule_names())


def test_rewards_mistyped_estimator_gets_did_you_mean(tmp_path, capsys):
    code, _, err = _run(capsys, "rewards", _binary_rollouts(tmp_path / "r.npz"), "--budget", 64,
                        "--estimator", "trl_grup")
    assert code == 2 and "got 'trl_grup' (did you mean 'trl_group'" in _first(err)


def test_allocate_mistyped_estimator_gets_did_you_mean(tmp_path, capsys):
    code, _, err = _run(capsys, "allocate", _binary_rollouts(tmp_path / "p.npz"), "--budget",
                        64, "--estimator", "verl_grpo_vectorised")
    assert code == 2 and err.count("\n") == 1
    assert "`--estimator` must be one of the" in err and "(did you mean 'verl_grpo_vectorized'" \
        in err and "'fullmean'" not in err


def test_gstar_with_remax_says_why_in_the_user_s_words(interior_pilot, tmp_path, capsys):
    pilot = interior_pilot(24, 8, 20260301, 1).save(tmp_path / "pilot.npz")
    code, out, err = _run(capsys, "gstar", pilot, "--budget", 96, "--estimator", "verl_remax")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert _first(err).startswith("ustat-rl gstar: error: `--estimator` 'verl_remax' subtracts "
                                  "a baseline b(x) drawn apart from the group")
    assert "`statistic`" not in err


def test_allocate_enumeration_refusal_in_readable_numbers(interior_pilot, tmp_path, capsys):
    pilot = interior_pilot(24, 8, 20260301, 1).save(tmp_path / "pilot.npz")
    code, out, err = _run(capsys, "allocate", pilot, "--budget", 192, "--estimator", "trl_group")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert _first(err) == ("ustat-rl allocate: error: `--budget` 192: the exact split (a biased "
                           "rule, prompts not orthogonal) tries all 2.83e+29 splits over 24 "
                           "prompts (at most 200000): give a budget of at most 29")
    assert not re.search(r"\d{10}", err)  # no number too long to read


@pytest.mark.parametrize("command", ["gstar", "allocate", "rewards"])
def test_a_text_file_named_npz_is_refused_without_numpy_s_advice(tmp_path, capsys, command):
    fake = tmp_path / "rollouts.npz"
    fake.write_text("prompt_id,reward\n0,1\n")
    code, out, err = _run(capsys, command, fake, "--budget", 64)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "is not a .npz archive of arrays" in _first(err)
    assert "allow_pickle" not in err and "pickle.load" not in err


@pytest.mark.parametrize("argv,first", [
    (["--budget", 64, "--dynamic-sampling", "--max-gen-batches", 10**12],
     "ustat-rl rewards: error: `--max-gen-batches` must be <= 16777216 (the cost of every batch "
     "count up to it is evaluated in memory; omit it for no cap), got 1000000000000"),
    (["--budget", 2**24],
     "ustat-rl rewards: error: `--budget` 16777216 over 64 prompts: the VIP split evaluates "
     "each prompt's term at 16777089 group sizes, 1073733696 values (at most 16777216 are held "
     "in memory): give a budget of at most 262271"),
])
def test_rewards_refuses_sizes_that_explode_before_building_them(tmp_path, capsys, argv, first):
    code, out, err = _run(capsys, "rewards", _binary_rollouts(tmp_path / "r.npz"), *argv)
    assert code == 2 and err.count("\n") == 1 and _first(err) == first


def test_conformance_refuses_a_timeout_that_is_not_positive(tmp_path, capsys):
    (tmp_path / "f.py").write_text("def f(rewards, group_ids):\n    return rewards\n")
    code, out, err = _run(capsys, "conformance", f"{tmp_path / 'f.py'}:f", "--estimator",
                          "grpo", "--timeout", 0)
    assert code == 2 and out == ""
    assert err == "ustat-rl conformance: --timeout must be a number of seconds > 0, got 0.0\n"
