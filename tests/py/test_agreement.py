"""The margin rule of tests/agreement.py on hand-made tokens and logits."""

import numpy as np
import pytest

from tests.agreement import assert_greedy_agrees, first_mismatch, margins, max_logit_difference


def test_margins_are_top1_minus_top2():
    assert margins([[0.0, 3.0, 2.5], [1.0, -1.0, 1.0]]) == [0.5, 0.0]


def test_first_mismatch_counts_a_length_difference():
    assert first_mismatch([1, 2, 3], [1, 2, 3]) is None
    assert first_mismatch([1, 2, 4], [1, 2, 3]) == 2
    assert first_mismatch([1, 2], [1, 2, 3]) == 2


def test_equal_tokens_agree_whatever_the_margins():
    agreed = assert_greedy_agrees([5, 6, 7], [5, 6, 7], [0.0, 0.0, 0.0], 1e-3)
    assert (agreed.agreed, agreed.split) == (3, None)


def test_a_split_at_a_near_tie_is_allowed_and_later_tokens_are_not_compared():
    agreed = assert_greedy_agrees([5, 6, 9, 1], [5, 6, 7, 2], [3.0, 2.0, 0.0015, 4.0], 1e-3)
    assert (agreed.agreed, agreed.split, agreed.margin) == (2, 2, 0.0015)


def test_a_split_where_the_reference_was_decisive_fails():
    with pytest.raises(AssertionError, match=r"step 2 gives 9 where the reference gives 7.*margin.*0\.5000"):
        assert_greedy_agrees([5, 6, 9], [5, 6, 7], [0.0, 0.0, 0.5], 1e-3, "x")


def test_an_earlier_near_tie_does_not_excuse_a_later_decisive_split():
    with pytest.raises(AssertionError, match="step 2"):
        assert_greedy_agrees([5, 6, 9], [5, 6, 7], [0.0, 0.0001, 0.5], 1e-3)


def test_one_run_stopping_earlier_is_left_to_the_caller():
    assert assert_greedy_agrees([5, 6], [5, 6, 7], [1.0] * 3, 1e-3).split is None


def test_max_logit_difference_over_the_references_top_k():
    a = np.array([[0.0, 10.0, 5.0, -50.0]])
    b = np.array([[0.1, 10.2, 5.0, -40.0]])
    assert max_logit_difference(a, b) == pytest.approx(10.0)
    assert max_logit_difference(a, b, top=2) == pytest.approx(0.2)
