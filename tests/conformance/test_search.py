"""The kits' search settings (:class:`ustat_rl.conformance.search.Search`): checked when built,
shared by both kits, and the same batches whether or not a failing one is shrunk."""

import numpy as np
import pytest

from ustat_rl.advantages.conventions import advantages
from ustat_rl.conformance import Search, check_conformance, check_multichannel_conformance

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("settings, name", [
    (dict(max_examples=0), "max_examples"), (dict(max_examples=True), "max_examples"),
    (dict(max_examples=2.0), "max_examples"), (dict(seed=1.5), "seed"),
    (dict(dtypes="float32"), "dtypes"), (dict(dtypes=()), "dtypes"),
    (dict(dtypes=("float16",)), "dtypes"), (dict(shrink=1), "shrink"),
])
def test_a_bad_setting_is_named_when_the_search_is_built(settings, name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        Search(**settings)


def test_the_settings_are_frozen_and_the_dtypes_a_tuple():
    search = Search(max_examples=3, seed=np.int64(4), dtypes=["float64"])
    assert search.dtypes == ("float64",)
    with pytest.raises(AttributeError):
        search.max_examples = 5  # type: ignore[misc]


@pytest.mark.parametrize("check", [check_conformance, check_multichannel_conformance])
def test_both_kits_take_only_a_search(check):
    with pytest.raises(TypeError, match="`search` must be a Search"):
        check(lambda *batch: None,
              "grpo" if check is check_conformance else "trl_sum_then_normalize",
              search={"max_examples": 3})


def test_the_batches_drawn_are_bounded_by_the_search():
    report = check_conformance(lambda z, ids: advantages("grpo", z, ids), "grpo",
                               search=Search(max_examples=7, dtypes=("float64",)))
    assert report.passed and report.n_examples == 7
