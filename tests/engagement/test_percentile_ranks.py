"""The percentile rank of a score, read from the workspace's score histogram
(engagement.scoring.formula.percentile_ranks): the rule the read API, the pages, the admin,
segments and score syncs all show."""

from hypothesis import given
from hypothesis import strategies as st

from engagement.scoring.formula import SCORE_MAX, percentile_ranks


def histogram(**rows: int) -> list[int]:
    """Rows per score 0-100 from keywords like s37=2."""
    counts = [0] * (SCORE_MAX + 1)
    for key, count in rows.items():
        counts[int(key[1:])] = count
    return counts


def test_a_score_of_0_has_no_rank_and_lifts_nobody():
    ranks = percentile_ranks(histogram(s0=40, s36=1, s100=1))
    assert (ranks[0], ranks[36], ranks[100]) == (None, 0, 100)


def test_the_only_active_row_ranks_0():
    assert percentile_ranks(histogram(s0=100, s5=1))[5] == 0


def test_ties_share_the_share_of_rows_scoring_lower():
    # Scores 10, 29, 29, 67: ranked among the other 3 of 4.
    ranks = percentile_ranks(histogram(s10=1, s29=2, s67=1))
    assert (ranks[10], ranks[29], ranks[67]) == (0, 33.3, 100)


def test_ranks_round_to_one_decimal_halves_up():
    # 49 rows below of 400 others: 12.25 exactly, which a binary float would round down.
    assert percentile_ranks(histogram(s1=49, s2=352))[2] == 12.3
    # 1 of 8: 12.5 stays 12.5; 2 of 3: 66.666... rounds to 66.7.
    assert percentile_ranks(histogram(s1=1, s2=8))[2] == 12.5
    assert percentile_ranks(histogram(s1=2, s2=2))[2] == 66.7


def test_an_empty_or_short_histogram_ranks_every_score():
    assert percentile_ranks([]) == (None, *([0.0] * SCORE_MAX))
    assert len(percentile_ranks([3, 1])) == SCORE_MAX + 1


@given(st.lists(st.integers(min_value=0, max_value=1000), min_size=101, max_size=101))
def test_ranks_rise_with_the_score_and_stay_within_0_to_100(counts):
    ranked = [rank for rank in percentile_ranks(counts)[1:] if rank is not None]
    assert ranked == sorted(ranked)
    assert all(0 <= rank <= 100 for rank in ranked)
