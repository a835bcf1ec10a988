"""Each bandit claim's check rejects a deliberately wrong input (negative controls run through the
same comparison code), and the verify command line. That the claims pass is ``ustat-rl verify``'s
own job (CI runs ``verify --quick``); tests/interface/test_compare_runs.py pins their verdicts and
predictions against a reference run."""

import json

import numpy as np
import pytest

from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.claims._common import mc_errors
from ustat_rl.claims.paper_group_size import _mc_argmin
from ustat_rl.claims.paper_ustatistic.lemma1 import unbiasedness_checks
from ustat_rl.claims.paper_ustatistic.mse import exact_vs_enumeration, rate_checks
from ustat_rl.claims.registry import check_close
from ustat_rl.interface.cli import main
from ustat_rl.policies.examples import arithmetic_bandit, interior_optimum_bandit, small_bandit
from ustat_rl.tolerances import Z_STRICT, strict_reps

pytestmark = pytest.mark.integration  # whole claims through the verify command line (JSON reproducibility), and negative controls at the claims' Monte Carlo sizes

CTX = VerifyContext(seed=123, quick=True)


def test_negative_control_fullmean_treated_as_unbiased():
    checks = unbiasedness_checks(CTX, "C3", "fullmean", 200_000)
    assert not all(c.passed for c in checks)
    assert not checks[0].passed  # the Monte Carlo comparison itself rejects it


@pytest.mark.parametrize("kwargs", [dict(oracle_exponent=-2.0), dict(degenerate_exponent=-1.0)])
def test_negative_control_wrong_exponent(kwargs):
    checks = rate_checks(CTX, "C5", arithmetic_bandit(2.8), 5, 30_000, **kwargs)
    assert not all(c.passed for c in checks[:2])


def test_negative_control_perturbed_mse_formula():
    bandit = small_bandit()

    def dropped_term(est, g):  # drops the 1/(G(G-1)) term of Theorem 2's exact form
        return bandit.exact_mse_per_prompt("oracle" if est == "grpo" else est, g)

    assert not all(c.passed for c in exact_vs_enumeration(bandit, dropped_term))
    assert all(c.passed for c in exact_vs_enumeration(bandit, bandit.exact_mse_per_prompt))


def test_negative_control_prompt_variance_from_wrong_estimator():
    bandit = arithmetic_bandit(2.8)
    c1 = bandit.scaling_constants().c1
    est = mc_errors(CTX, "C6", bandit, (4,), strict_reps(20_000), batch_size=2)  # as C6 does
    m, se = est.get(("grpo", 4))
    within = bandit.prompt_prob @ bandit.exact_mse_per_prompt("grpo", 4)
    assert check_close("right", c1, 2 * m - within, 2 * se, z=Z_STRICT).passed
    wrong = bandit.prompt_prob @ bandit.exact_mse_per_prompt("vanilla", 4)
    assert not check_close("wrong", c1, 2 * m - wrong, 2 * se, z=Z_STRICT).passed


def test_negative_control_wrong_optimal_group_size():
    bandit = interior_optimum_bandit()
    assert all(c.passed for c in _mc_argmin(CTX, bandit, 48, bandit.optimal_group_size()))
    assert not _mc_argmin(CTX, bandit, 48, 40.0)[0].passed


def test_cli_json_is_reproducible_apart_from_timings(tmp_path, capsys):
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    for path in paths:
        assert main(["verify", "--quick", "--only", "C1,C9", "--seed", "5", "--json", str(path)]) == 0
    a, b = (json.loads(p.read_text()) for p in paths)
    for doc in (a, b):
        doc.pop("seconds")  # total wall time of the run
        for r in doc["results"]:
            r.pop("seconds")
    assert a == b
    assert [r["claim_id"] for r in a["results"]] == ["C1", "C9"]
    out = capsys.readouterr().out
    assert "summary: 2 pass, 0 refuted, 0 differs, 0 fail, 0 error" in out


def test_cli_rejects_unknown_claim(capsys):
    assert main(["verify", "--only", "C99"]) == 2
    assert "unknown claim" in capsys.readouterr().err


def test_cli_list(capsys):
    assert main(["list"]) == 0
    assert "C17" in capsys.readouterr().out


def test_failing_check_makes_verify_exit_nonzero(monkeypatch, capsys):
    import ustat_rl.claims as claims_pkg
    from ustat_rl.claims.registry import Claim, check_true

    claims = dict(registry())
    claims["C1"] = Claim("C1", "forced failure", "test", "test",
                         lambda ctx: [check_true("always false", False)])
    monkeypatch.setattr(claims_pkg, "registry", lambda: claims)
    assert main(["verify", "--only", "C1"]) == 1
    assert "FAIL always false" in capsys.readouterr().out


def test_result_json_has_no_nan_literals(tmp_path, monkeypatch):
    import ustat_rl.claims as claims_pkg
    from ustat_rl.claims.registry import Claim, check_true

    claims = dict(registry())  # a check with no measured value (NaN), written by to_dict
    claims["C11"] = Claim("C11", "nothing measured", "test", "test",
                          lambda ctx: [check_true("no value", True)])
    monkeypatch.setattr(claims_pkg, "registry", lambda: claims)
    path = tmp_path / "r.json"
    main(["verify", "--only", "C11", "--json", str(path)])
    text = path.read_text()
    assert "NaN" not in text
    (result,) = json.loads(text)["results"]
    assert result["checks"][0]["measured"] is None  # the NaN written as null
    assert np.isfinite(result["seconds"])


def test_cli_usage_errors_come_before_any_work(tmp_path, capsys, monkeypatch):
    import ustat_rl.claims as claims_pkg

    def no_work(*args, **kwargs):
        raise AssertionError("a claim ran although the arguments were invalid")

    monkeypatch.setattr(claims_pkg, "run_claim", no_work)
    with pytest.raises(SystemExit) as exc:
        main(["verify", "--seed", "-1"])
    assert exc.value.code == 2 and "--seed" in capsys.readouterr().err
    assert main(["verify", "--only", ","]) == 2
    assert "--only needs at least one claim ID" in capsys.readouterr().err
    assert main(["verify", "--only", "C1", "--json", str(tmp_path)]) == 2  # a directory
    assert "is a directory" in capsys.readouterr().err
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["verify", "--only", "C1", "--json", str(blocker / "r.json")]) == 2
    assert "cannot create" in capsys.readouterr().err


def test_json_writes_nan_as_null_and_inf_as_a_string():
    from ustat_rl.claims.registry import _jsonable

    out = _jsonable({"a": float("nan"), "b": float("inf"), "c": np.float64(-np.inf), "d": 1.5})
    assert out == {"a": None, "b": "inf", "c": "-inf", "d": 1.5}
    assert "NaN" not in json.dumps(out, allow_nan=False)


def test_verify_catches_a_planted_bug_in_the_torch_backend(monkeypatch):
    """C6.torch runs the torch Monte Carlo backend; a statistic 3% too large must fail it."""
    from ustat_rl.claims.paper_ustatistic import minibatch
    from ustat_rl.montecarlo import bandit_squared_errors

    ctx = VerifyContext(seed=11, quick=True)
    bandit = arithmetic_bandit(2.8)
    assert all(c.passed for c in minibatch._torch_backend_checks(ctx, bandit))

    def planted(*args, **kwargs):
        stat, labels = bandit_squared_errors(*args, **kwargs)
        return (lambda rng, n: 1.03 * stat(rng, n)), labels

    monkeypatch.setattr(minibatch, "bandit_squared_errors", planted)
    assert not all(c.passed for c in minibatch._torch_backend_checks(ctx, bandit))


# the whole claim C25: verify's exit code accepts any of pass/differs
def test_c25_claim_differs_only_through_the_kl_direction():
    """All required checks pass; the one unmet, non-required check is the K3 direction floor."""
    from ustat_rl.claims import VerifyContext, registry, run_claim

    result = run_claim(registry()["C25"], VerifyContext(seed=123, quick=True))
    assert result.verdict == "differs", result.error
    unmet = [c for c in result.checks if not c.passed]
    assert len(unmet) == 1 and not unmet[0].required and unmet[0].measured > 1e-4


# the whole claim C31, against a biased value it must reject
def test_negative_control_c31_comparison_rejects_a_biased_value():
    result = run_claim(registry()["C31"], CTX)
    (c1,) = [c for c in result.checks if c.name == "full scores: mean estimate of c1 = exact"]
    se = (c1.ci_high - c1.measured) / Z_STRICT  # C31 compares at Z_STRICT
    # the plug-in ||g_hat(x)||^2 adds E||WZ - g(x)||^2/n to E||g(X)||^2, and so to c1 (exact
    # moments of the bandit C31 uses, n = 8 samples per prompt)
    m = interior_optimum_bandit().moments()
    biased = c1.predicted + float(m.prompt_prob @ (m.score_sq_reward_sq - m.grad_sq)) / 8
    assert not check_close("plug-in c1", biased, c1.measured, se, z=Z_STRICT).passed


# the whole claim C26.train, with a wrong prediction it must reject
def test_c26_training_distinguishes_finite_g_from_the_limit():
    """Negative control: at G = 8 the trained point is not the G -> infinity maximiser.

    The same 4-se interval around the std-normalised runs' mean that contains the exact
    finite-G fixed point excludes argmax E[2 arcsin sqrt V] - tau KL (the limit), so the check
    compares against the right prediction and has the power to tell the two apart.
    """
    from ustat_rl.claims import VerifyContext, registry, run_claim
    from ustat_rl.policies.examples import arcsin_conflict_bandit
    from ustat_rl.training.std import mean_field_root

    result = run_claim(registry()["C26.train"], VerifyContext(seed=123, quick=True))
    assert result.verdict == "pass", (result.error, [c.name for c in result.checks
                                                     if not c.passed])
    (train,) = [c for c in result.checks if c.name.startswith("trl_group training at")]
    assert train.passed
    theta_arcsin = mean_field_root(arcsin_conflict_bandit(), "arcsin")
    assert not train.ci_low <= theta_arcsin <= train.ci_high
