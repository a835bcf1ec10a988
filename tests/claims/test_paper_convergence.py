"""The worst case of Lemma 14's hypotheses (ustat_rl/claims/paper_convergence.py, C16): a
linear programme over every sequence meeting them, which keeps the bound when B >= A^2/4 and
breaks the literal statement at B = 0 with a large A."""

from __future__ import annotations

import pytest

from ustat_rl.claims.paper_convergence import _lemma14_worst

pytestmark = pytest.mark.fast


def test_lemma14_worst_case_linear_programme():
    # B >= A^2/4: the bound holds; B = 0 with large A: the literal statement fails
    assert _lemma14_worst(2.0, 1.0, 1.0, 0.5, 1.0, 25)[0] <= 1 + 1e-9
    assert _lemma14_worst(10.0, 0.0, 1.0, 0.1, 1.0, 25)[0] > 1.0
