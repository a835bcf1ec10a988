"""Tests of the pilot rollouts schema: validation with one-line errors naming the field, and
lossless, atomic ``.npz`` and Parquet round trips."""

from __future__ import annotations

import numpy as np
import pytest

from ustat_rl.pilot.rollouts import Rollouts, load_rollouts

pytestmark = pytest.mark.fast

pyarrow = pytest.importorskip("pyarrow", reason="Parquet round trips need the optional pyarrow")


def _rollouts(**overrides):
    rng = np.random.default_rng(0)
    n = 10  # ragged groups: 3, 3, 4
    kwargs = dict(prompt_id=np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 2]),
                  reward=rng.random(n), score=rng.normal(size=(n, 3)))
    kwargs.update(overrides)
    return Rollouts(**kwargs)


@pytest.mark.parametrize("suffix", [".npz", ".parquet"])
@pytest.mark.parametrize("with_meta", [False, True])
def test_round_trip_is_lossless(tmp_path, suffix, with_meta):
    extra = {}
    if with_meta:
        extra = dict(prompt_weight=np.repeat([0.2, 0.3, 0.5], [3, 3, 4]), sketch_kind="gaussian",
                     sketch_seed=11, param_dim=50, model_name="tiny")
    r = _rollouts(prompt_id=np.repeat(["q-a", "q-b", "q-c"], [3, 3, 4]) if with_meta
                  else np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 2]), **extra)
    path = r.save(tmp_path / f"pilot{suffix}")
    back = load_rollouts(path)
    for name in ("prompt_id", "reward", "score", "prompt_weight"):
        a, b = getattr(r, name), getattr(back, name)
        assert (a is None and b is None) or np.array_equal(a, b), name
    for name in ("sketch_kind", "sketch_seed", "param_dim", "model_name"):
        assert getattr(r, name) == getattr(back, name)
    assert [p.name for p in tmp_path.iterdir()] == [f"pilot{suffix}"]  # no temporary left


def test_fields_are_read_only_copies():
    reward = np.arange(9.0)
    r = _rollouts(prompt_id=np.repeat([0, 1, 2], 3), reward=reward, score=np.ones((9, 2)))
    reward[0] = 99.0
    assert r.reward[0] == 0.0
    with pytest.raises(ValueError):
        r.reward[0] = 1.0


@pytest.mark.parametrize("overrides, field", [
    (dict(prompt_id=np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 9])), "prompt_id"),  # a group of 1
    (dict(reward=np.r_[np.ones(9), np.nan]), "reward"),
    (dict(reward=np.ones(9)), "reward"),
    (dict(score=np.ones((10, 0))), "score"),
    (dict(score=np.ones((9, 2))), "score"),
    (dict(score=np.where(np.eye(10, 3) > 0, np.inf, 0.0)), "score"),
    (dict(prompt_weight=-np.ones(10)), "prompt_weight"),
    (dict(prompt_weight=np.arange(10.0) + 1), "prompt_weight"),
    (dict(sketch_kind="sparse"), "sketch_kind"),
    (dict(param_dim=7), "param_dim"),
    (dict(prompt_id=np.array([0.5] * 10)), "prompt_id"),
])
def test_bad_input_names_the_field_in_one_line(overrides, field):
    with pytest.raises((ValueError, TypeError)) as info:
        _rollouts(**overrides)
    message = str(info.value)
    assert f"`{field}`" in message and "\n" not in message


def test_small_group_error_names_the_prompt():
    with pytest.raises(ValueError, match=r"prompt 'b' has 2 samples"):
        Rollouts(prompt_id=np.array(["a"] * 3 + ["b"] * 2), reward=np.zeros(5),
                 score=np.ones((5, 1)))


def test_save_rejects_bad_paths_before_writing(tmp_path):
    r = _rollouts()
    with pytest.raises(ValueError, match="`path`"):
        r.save(tmp_path / "pilot.csv")
    with pytest.raises(FileNotFoundError, match="`path`"):
        r.save(tmp_path / "missing" / "pilot.npz")
    with pytest.raises(FileNotFoundError, match="`path`"):
        load_rollouts(tmp_path / "absent.npz")
    assert list(tmp_path.iterdir()) == []


def test_failed_write_leaves_no_file(tmp_path, monkeypatch):
    import ustat_rl.pilot.rollouts as module

    def broken(r, handle):
        handle.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(module, "_write_npz", broken)
    with pytest.raises(OSError):
        _rollouts().save(tmp_path / "pilot.npz")
    assert list(tmp_path.iterdir()) == []


def test_unknown_field_in_file_is_rejected(tmp_path):
    path = tmp_path / "odd.npz"
    np.savez(path, prompt_id=np.repeat([0], 3), reward=np.zeros(3), score=np.ones((3, 1)),
             extra=np.zeros(3))
    with pytest.raises(ValueError, match="`extra`"):
        load_rollouts(path)
