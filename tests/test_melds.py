"""Meld evaluation (RULES.md §1.7-§1.9, §5.4, §10.5-§10.6; A.7 item 6, A.9 items 1-3, A.10 item 5).

The public vectors pin the totals; these tests also pin the entries a meld answer lists, the run
options, the meld table built from ``meld_values``, and the checks on a declared ``melds`` list.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import referee.rules
from referee.rules.cards import (
    CLUBS,
    DIAMONDS,
    HEARTS,
    SPADES,
    counts_of,
    format_cards,
    parse_cards,
    parse_suit,
)
from referee.rules.melds import (
    CLASS_OF,
    MELD_NAMES,
    Meld,
    MeldError,
    MeldResult,
    MeldTable,
    best_meld,
    build_meld_table,
    meld_total,
    one_set,
    score_declared,
    single_sets,
)

OPTIONS_JSON = Path(referee.rules.__file__).parent / "options.json"
MELD_VECTORS = Path(__file__).parent / "vectors" / "meld.jsonl"


@cache
def _meld_value_defaults() -> dict[str, Any]:
    options = json.loads(OPTIONS_JSON.read_text())["options"]
    entry = next(o for o in options if o["name"] == "meld_values")
    defaults: dict[str, Any] = entry["default"]
    return defaults


def default_lists(variant: str, deck: int | None = None) -> dict[str, list[int]]:
    """The variant's default ``meld_values`` (double-deck: per deck size, 80 by default)."""
    lists = _meld_value_defaults()[variant]
    if variant == "double-deck":
        lists = lists[f"deck{deck or 80}"]
    return dict(lists)


def table_for(variant: str, options: Mapping[str, Any] | None = None) -> MeldTable:
    """The table a game of ``variant`` with ``options`` uses (as the options layer builds it)."""
    options = options or {}
    lists = default_lists(variant, options.get("deck"))
    lists.update(options.get("meld_values", {}))
    return build_meld_table(
        lists,
        per_set=variant == "two-handed",
        run_counts_its_royal_marriage=options.get("run_counts_its_royal_marriage", False),
        run_shares_marriage_cards=options.get("run_shares_marriage_cards", False),
    )


def cards(text: str) -> tuple[int, ...]:
    return parse_cards(text.split())


def listing(result: MeldResult) -> list[tuple[str, int, int, str]]:
    """Entries as (name, level, points, cards in A.3 notation) for readable assertions."""
    return [(m.name, m.level, m.points, " ".join(format_cards(m.cards))) for m in result.melds]


PARTNERSHIP = table_for("partnership")
DD80 = table_for("double-deck")


def _vectors() -> list[dict[str, Any]]:
    return [json.loads(line) for line in MELD_VECTORS.read_text().splitlines() if line.strip()]


# ------------------------------------------------------------------------------------------------
# Public vectors


class TestVectors:
    @pytest.mark.parametrize("case", _vectors(), ids=lambda case: case["name"])
    def test_vector_total(self, case: dict[str, Any]) -> None:
        """Every meld.jsonl vector gives its expected total, by both entry points."""
        query = case["query"]
        table = table_for(query["variant"], query.get("options"))
        hand = parse_cards(query["hand"])
        trump = parse_suit(query["trump"])
        result = best_meld(hand, trump, table)
        assert result.total == case["expect"]["total"]
        assert meld_total(counts_of(hand), trump, table) == case["expect"]["total"]
        assert sum(m.points for m in result.melds) == result.total

    def test_every_variant_has_vectors(self) -> None:
        variants = {case["query"]["variant"] for case in _vectors()}
        assert {"partnership", "two-handed", "double-deck"} <= variants


# ------------------------------------------------------------------------------------------------
# Entries of best_meld


class TestBestMeldEntries:
    def test_query_example_from_game_record(self) -> None:
        """GAME_RECORD.md §3's example answer: run, a royal marriage beside it, and the dix."""
        result = best_meld(cards("AH 10H KH QH JH KH QH 9H"), HEARTS, PARTNERSHIP)
        assert result.total == 200
        assert listing(result) == [
            ("run", 1, 150, "AH 10H KH QH JH"),
            ("royal_marriage", 1, 40, "KH QH"),
            ("dix", 1, 10, "9H"),
        ]
        assert result.dix_points() == 10

    def test_roundhouse_is_emergent_and_ordered(self) -> None:
        """M6: royal marriage, three marriages (suits in S H D C order), kings, queens = 240."""
        result = best_meld(cards("QC KC QD KD QH KH QS KS"), SPADES, PARTNERSHIP)
        assert listing(result) == [
            ("royal_marriage", 1, 40, "KS QS"),
            ("marriage", 1, 20, "KH QH"),
            ("marriage", 1, 20, "KD QD"),
            ("marriage", 1, 20, "KC QC"),
            ("kings_around", 1, 80, "KS KH KD KC"),
            ("queens_around", 1, 60, "QS QH QD QC"),
        ]
        assert result.total == 240

    def test_roundhouse_bonus_paid_once_whatever_the_level(self) -> None:
        """A.9 item 2: the bonus is one entry of level 1, even for a double roundhouse."""
        lists = default_lists("double-deck") | {"roundhouse_bonus": [50]}
        table = build_meld_table(lists, per_set=False)
        double = cards("KS KS QS QS KH KH QH QH KD KD QD QD KC KC QC QC")
        result = best_meld(double, HEARTS, table)
        assert result.total == 160 + 50
        assert listing(result)[-1] == ("roundhouse_bonus", 1, 50, "KS QS KH QH KD QD KC QC")
        assert sum(m.name == "roundhouse_bonus" for m in result.melds) == 1
        # One suit without a queen: no bonus.
        short = best_meld(cards("KS QS KH QH KD QD KC"), HEARTS, table)
        assert all(m.name != "roundhouse_bonus" for m in short.melds)

    def test_queen_of_spades_serves_in_three_classes(self) -> None:
        """§1.9: QS counts in a marriage, in pinochle and in queens around at once."""
        result = best_meld(cards("KS QS JD QH QD QC"), CLUBS, PARTNERSHIP)
        assert listing(result) == [
            ("marriage", 1, 20, "KS QS"),
            ("queens_around", 1, 60, "QS QH QD QC"),
            ("pinochle", 1, 40, "QS JD"),
        ]

    def test_double_entries_list_their_copies(self) -> None:
        result = best_meld(cards("QS QS JD JD AS AS AH AH AD AD AC AC"), CLUBS, PARTNERSHIP)
        assert listing(result) == [
            ("aces_around", 2, 1000, "AS AS AH AH AD AD AC AC"),
            ("pinochle", 2, 300, "QS QS JD JD"),
        ]

    def test_triple_run_80_cards(self) -> None:
        hand = cards("AH 10H KH QH JH") * 3
        assert listing(best_meld(hand, HEARTS, DD80)) == [
            ("run", 3, 225, "AH AH AH 10H 10H 10H KH KH KH QH QH QH JH JH JH"),
        ]

    def test_trump_changes_the_meld(self) -> None:
        """The same cards meld differently by trump (M11: meld needs trump)."""
        hand = cards("KH QH 9H 9S")
        assert best_meld(hand, HEARTS, PARTNERSHIP).total == 40 + 10
        assert best_meld(hand, SPADES, PARTNERSHIP).total == 20 + 10

    def test_empty_hand_and_order_independence(self) -> None:
        assert best_meld((), HEARTS, PARTNERSHIP) == MeldResult(0, ())
        hand = cards("JD QS AH 10H KH QH JH 9H")
        assert best_meld(hand, HEARTS, PARTNERSHIP) == best_meld(
            tuple(reversed(hand)), HEARTS, PARTNERSHIP
        )

    def test_zero_valued_entries_are_still_listed(self) -> None:
        """Only level 0 is omitted: a meld worth 0 in a custom table is still shown."""
        table = build_meld_table(default_lists("partnership") | {"dix": [0]}, per_set=False)
        result = best_meld(cards("9H"), HEARTS, table)
        assert listing(result) == [("dix", 1, 0, "9H")]
        assert result.total == 0

    def test_two_handed_scores_each_set_at_its_single_value(self) -> None:
        """A.10 item 5 / A.9 item 3: a two-handed query counts two sets as twice the single."""
        table = table_for("two-handed")
        result = best_meld(cards("AH 10H KH QH JH") * 2, HEARTS, table)
        assert listing(result) == [("run", 2, 300, "AH AH 10H 10H KH KH QH QH JH JH")]


# ------------------------------------------------------------------------------------------------
# The run options (A.2, A.9 item 1, A.10 item 5)

RUN = "AH 10H KH QH JH"


class TestRunOptions:
    @pytest.mark.parametrize(
        ("hand", "shares", "counts", "expected"),
        [
            (RUN, False, False, [("run", 1, 150)]),
            (RUN, True, False, [("run", 1, 150)]),
            (RUN, False, True, [("run", 1, 190)]),
            (RUN, True, True, [("run", 1, 190)]),
            (RUN + " KH", False, False, [("run", 1, 150)]),
            (RUN + " KH", True, False, [("run", 1, 150), ("royal_marriage", 1, 40)]),
            (RUN + " QH", True, False, [("run", 1, 150), ("royal_marriage", 1, 40)]),
            (RUN + " KH", False, True, [("run", 1, 190)]),
            (RUN + " KH", True, True, [("run", 1, 190), ("royal_marriage", 1, 40)]),
            (RUN + " KH QH", False, False, [("run", 1, 150), ("royal_marriage", 1, 40)]),
            (RUN + " KH QH", True, False, [("run", 1, 150), ("royal_marriage", 2, 80)]),
            (RUN + " KH QH", False, True, [("run", 1, 190), ("royal_marriage", 1, 40)]),
            (RUN + " KH QH", True, True, [("run", 1, 190), ("royal_marriage", 2, 80)]),
            (RUN + " " + RUN, False, False, [("run", 2, 1500)]),
            (RUN + " " + RUN, True, False, [("run", 2, 1500)]),
            (RUN + " " + RUN, False, True, [("run", 2, 1580)]),
        ],
    )
    def test_partnership_table(
        self, hand: str, shares: bool, counts: bool, expected: list[tuple[str, int, int]]
    ) -> None:
        """§1.9 / §10.5 M1-M4 with every combination of the two run options."""
        table = table_for(
            "partnership",
            {"run_shares_marriage_cards": shares, "run_counts_its_royal_marriage": counts},
        )
        result = best_meld(cards(hand), HEARTS, table)
        assert [(m.name, m.level, m.points) for m in result.melds] == expected
        assert result.total == sum(points for _, _, points in expected)

    def test_shared_marriage_lists_one_king_and_one_queen_each(self) -> None:
        table = table_for("partnership", {"run_shares_marriage_cards": True})
        result = best_meld(cards(RUN + " KH QH"), HEARTS, table)
        assert listing(result)[1] == ("royal_marriage", 2, 80, "KH KH QH QH")

    def test_run_counts_lists_no_separate_marriage_for_its_own_pair(self) -> None:
        """A.10 item 5: the run is listed at its full value, no royal_marriage entry for it."""
        table = table_for("partnership", {"run_counts_its_royal_marriage": True})
        assert listing(best_meld(cards(RUN), HEARTS, table)) == [("run", 1, 190, "AH 10H KH QH JH")]

    def test_double_deck_options_use_the_x1_table(self) -> None:
        """A.2: the options use the table's royal_marriage value (4 on the x1 table)."""
        hand = cards(RUN + " KH QH")
        assert best_meld(hand, HEARTS, DD80).total == 19  # DD1
        shares = table_for("double-deck", {"run_shares_marriage_cards": True})
        assert best_meld(hand, HEARTS, shares).total == 15 + 8
        counts = table_for("double-deck", {"run_counts_its_royal_marriage": True})
        assert best_meld(hand, HEARTS, counts).total == 15 + 4 + 4

    def test_double_run_with_an_extra_king_80_cards(self) -> None:
        """Double run + KH: no pair by default; under shares the extra K marries a run Q."""
        hand = cards(RUN + " " + RUN + " KH")
        assert best_meld(hand, HEARTS, DD80).total == 150
        shares = table_for("double-deck", {"run_shares_marriage_cards": True})
        assert listing(best_meld(hand, HEARTS, shares))[1] == ("royal_marriage", 1, 4, "KH QH")


def _max_royal_marriages(run: int, extra_k: int, extra_q: int, shares: bool) -> int:
    """Brute force: the most K-Q pairs of trump outside the runs' own pairs.

    Kings are ``run`` run kings + ``extra_k`` others, queens likewise. x pairs use two extra
    cards; under ``shares`` the extra kings left may marry run queens and the extra queens left
    run kings (each run card once); two run cards never pair.
    """
    best = 0
    for x in range(min(extra_k, extra_q) + 1):
        pairs = x
        if shares:
            pairs += min(extra_k - x, run) + min(extra_q - x, run)
        best = max(best, pairs)
    return best


class TestRoyalMarriageFormula:
    @given(
        run=st.integers(0, 4),
        extra_k=st.integers(0, 4),
        extra_q=st.integers(0, 4),
        shares=st.booleans(),
        counts=st.booleans(),
    )
    def test_a9_item1_matches_brute_force(
        self, run: int, extra_k: int, extra_q: int, shares: bool, counts: bool
    ) -> None:
        """A.9 item 1: min(k, q); with shares min(L+k, L+q, k+q); run_counts adds L more."""
        extra_k = min(extra_k, 4 - run)
        extra_q = min(extra_q, 4 - run)
        hand = cards(RUN) * run + cards("KH") * extra_k + cards("QH") * extra_q
        table = table_for(
            "double-deck",
            {"run_shares_marriage_cards": shares, "run_counts_its_royal_marriage": counts},
        )
        result = best_meld(hand, HEARTS, table)
        royal = sum(m.level for m in result.melds if m.name == "royal_marriage")
        assert royal == _max_royal_marriages(run, extra_k, extra_q, shares)
        inside_run = run if counts else 0
        royal_points = result.total - (table.value("run", run) if run else 0)
        assert royal_points == 4 * (royal + inside_run)  # the x1 table: 4 per royal marriage


# ------------------------------------------------------------------------------------------------
# best_meld == meld_total, and the §1.9 sketch, on random hands


def _hand_from_counts(counts: Sequence[int]) -> tuple[int, ...]:
    return tuple(face for face, n in enumerate(counts) for _ in range(n))


# Count vectors rather than deals: every face at 0..2 (48 cards) or 0..4 (80 cards, no nines)
# makes runs, doubles and roundhouses common enough to be exercised on every run.
counts48 = st.lists(st.integers(0, 2), min_size=24, max_size=24)
counts80 = st.lists(st.integers(0, 4), min_size=24, max_size=24).map(
    lambda cs: [0 if face % 6 == 5 else n for face, n in enumerate(cs)]
)
tables48 = st.builds(
    lambda variant, shares, counts, bonus: table_for(
        variant,
        {
            "run_shares_marriage_cards": shares,
            "run_counts_its_royal_marriage": counts,
            "meld_values": {"roundhouse_bonus": [bonus]},
        },
    ),
    st.sampled_from(["partnership", "two-handed", "cutthroat"]),
    st.booleans(),
    st.booleans(),
    st.sampled_from([0, 30]),
)
tables80 = st.builds(
    lambda shares, counts, bonus: table_for(
        "double-deck",
        {
            "run_shares_marriage_cards": shares,
            "run_counts_its_royal_marriage": counts,
            "meld_values": {"roundhouse_bonus": [bonus]},
        },
    ),
    st.booleans(),
    st.booleans(),
    st.sampled_from([0, 3]),
)


def _check_consistent(counts: list[int], trump: int, table: MeldTable) -> None:
    hand = _hand_from_counts(counts)
    result = best_meld(hand, trump, table)
    assert meld_total(counts, trump, table) == result.total
    assert sum(m.points for m in result.melds) == result.total
    for meld in result.melds:
        assert meld.level >= 1
        assert meld.cards == tuple(sorted(meld.cards))
    if not table.run_shares_marriage_cards:
        # A card serves at most once per class (§1.7).
        for cls in "ABC":
            used = counts_of(
                c for m in result.melds if CLASS_OF.get(m.name) == cls for c in m.cards
            )
            assert all(u <= n for u, n in zip(used, counts, strict=True)), cls
    # Declaring exactly the listed entries is accepted and worth the same (bonus re-derived).
    declared = [(m.name, m.cards) for m in result.melds if m.name != "roundhouse_bonus"]
    assert score_declared(hand, declared, trump, table) == result


class TestBestMeldProperties:
    @settings(max_examples=300)
    @given(counts=counts48, trump=st.integers(0, 3), table=tables48)
    def test_48_cards_consistent(self, counts: list[int], trump: int, table: MeldTable) -> None:
        _check_consistent(counts, trump, table)

    @settings(max_examples=300)
    @given(counts=counts80, trump=st.integers(0, 3), table=tables80)
    def test_80_cards_consistent(self, counts: list[int], trump: int, table: MeldTable) -> None:
        _check_consistent(counts, trump, table)

    @settings(max_examples=300)
    @given(counts=counts48, trump=st.integers(0, 3), shares=st.booleans())
    def test_matches_the_section_1_9_sketch(
        self, counts: list[int], trump: int, shares: bool
    ) -> None:
        """§1.9's evaluator sketch agrees with A.9 item 1 on 48 cards (abundance table, x10)."""
        table = table_for("partnership", {"run_shares_marriage_cards": shares})
        assert best_meld(_hand_from_counts(counts), trump, table).total == _sketch(
            counts, trump, shares
        )


def _sketch(cnt: Sequence[int], trump: int, shares: bool) -> int:
    """RULES.md §1.9's pseudo-code, transcribed literally."""

    def c(s: int, r: int) -> int:
        return cnt[s * 6 + r]

    a_, ten, k, q, j, nine = range(6)
    runs = min(c(trump, r) for r in (a_, ten, k, q, j))
    if runs == 2:
        a = 1500
    elif runs == 1:
        kx, qx = c(trump, k) - 1, c(trump, q) - 1
        a = 150 + (40 * (kx + qx) if shares else 40 * min(kx, qx))
    else:
        a = 40 * min(c(trump, k), c(trump, q))
    a += sum(20 * min(c(s, k), c(s, q)) for s in range(4) if s != trump) + 10 * c(trump, nine)
    b = 0
    for r, v in ((a_, 100), (k, 80), (q, 60), (j, 40)):
        lvl = min(c(s, r) for s in range(4))
        b += {0: 0, 1: v, 2: 10 * v}[lvl]
    p = min(c(SPADES, q), c(DIAMONDS, j))
    return a + b + {0: 0, 1: 40, 2: 300}[p]


# ------------------------------------------------------------------------------------------------
# score_declared (A.7 item 6, A.9 item 1)


def declare(
    shown: str,
    melds: Sequence[tuple[str, str]],
    trump: int = HEARTS,
    table: MeldTable = PARTNERSHIP,
) -> MeldResult:
    return score_declared(cards(shown), [(n, cards(c)) for n, c in melds], trump, table)


def refused(
    shown: str,
    melds: Sequence[tuple[str, str]],
    trump: int = HEARTS,
    table: MeldTable = PARTNERSHIP,
) -> MeldError:
    with pytest.raises(MeldError) as caught:
        declare(shown, melds, trump, table)
    assert caught.value.code == "INVALID_MELD"
    return caught.value


class TestScoreDeclaredAccepts:
    def test_entries_scored_in_declared_order(self) -> None:
        result = declare(
            "AH 10H KH QH JH KH QH 9H",
            [("dix", "9H"), ("run", "JH QH KH 10H AH"), ("royal_marriage", "kh qh")],
        )
        assert listing(result) == [
            ("dix", 1, 10, "9H"),
            ("run", 1, 150, "AH 10H KH QH JH"),
            ("royal_marriage", 1, 40, "KH QH"),
        ]
        assert result.total == 200
        assert result.dix_points() == 10

    def test_worth_exactly_what_is_declared(self) -> None:
        """Leaving a combination out scores less; nothing is added for the player."""
        result = declare("AH 10H KH QH JH QS JD", [("pinochle", "QS JD")])
        assert result == MeldResult(40, (Meld("pinochle", 1, 40, cards("QS JD")),))

    def test_nothing_declared(self) -> None:
        assert declare("AH", []) == MeldResult(0, ())

    def test_a_card_serves_in_each_class(self) -> None:
        """QS in a marriage (A), queens around (B) and pinochle (C) at once."""
        result = declare(
            "KS QS QH QD QC JD",
            [("marriage", "KS QS"), ("queens_around", "QS QH QD QC"), ("pinochle", "QS JD")],
            trump=CLUBS,
        )
        assert result.total == 20 + 60 + 40

    def test_levels_from_copies(self) -> None:
        result = declare(
            "QS QS JD JD 9H 9H KS KS QS QS",
            [("pinochle", "QS QS JD JD"), ("dix", "9H 9H"), ("marriage", "KS QS KS QS")],
        )
        assert [(m.name, m.level, m.points) for m in result.melds] == [
            ("pinochle", 2, 300),
            ("dix", 2, 20),
            ("marriage", 2, 40),
        ]
        assert result.dix_points() == 20

    def test_two_single_sets_score_as_declared(self) -> None:
        """Two one-set entries are each L = 1 copies: worth 2 x 40, not the double's 300."""
        result = declare("QS QS JD JD", [("pinochle", "QS JD"), ("pinochle", "QS JD")])
        assert result.total == 80

    def test_run_counts_its_royal_marriage_in_the_run_entry(self) -> None:
        table = table_for("partnership", {"run_counts_its_royal_marriage": True})
        result = declare(RUN, [("run", RUN)], table=table)
        assert listing(result) == [("run", 1, 190, RUN)]
        double = declare(RUN + " " + RUN, [("run", RUN + " " + RUN)], table=table)
        assert double.total == 1500 + 80

    def test_roundhouse_bonus_appended_for_kq_in_every_suit(self) -> None:
        table = build_meld_table(
            default_lists("partnership") | {"roundhouse_bonus": [50, 0]}, per_set=False
        )
        shown = "KS QS KH QH KD QD KC QC"
        melds = [
            ("marriage", "KS QS"),
            ("royal_marriage", "KH QH"),
            ("marriage", "KD QD"),
            ("marriage", "KC QC"),
        ]
        result = declare(shown, melds, table=table)
        assert listing(result)[-1] == ("roundhouse_bonus", 1, 50, "KS QS KH QH KD QD KC QC")
        assert result.total == 40 + 3 * 20 + 50
        # Kings and queens around do not make the bonus: it needs the class-A pairs declared.
        partial = declare(shown, [*melds[:3], ("kings_around", "KS KH KD KC")], table=table)
        assert all(m.name != "roundhouse_bonus" for m in partial.melds)
        # A run stands for the trump pair.
        run_shown = "AH 10H JH KS QS KH QH KD QD KC QC"
        with_run = declare(run_shown, [("run", RUN), *melds[:1], *melds[2:]], table=table)
        assert with_run.melds[-1].name == "roundhouse_bonus"


class TestScoreDeclaredRefuses:
    def test_unknown_name(self) -> None:
        error = refused("AH", [("flush", "AH")])
        assert error.field == "melds[0].name"
        assert "flush" in str(error)

    def test_roundhouse_bonus_cannot_be_declared(self) -> None:
        error = refused("KS QS", [("marriage", "KS QS"), ("roundhouse_bonus", "KS QS")], CLUBS)
        assert error.field == "melds[1].name"

    @pytest.mark.parametrize(
        ("name", "melded", "needle"),
        [
            ("run", "AH 10H KH QH", "AH 10H KH QH"),  # no jack
            ("run", "AH 10H KH QH JH 9H", "9H"),  # an extra card
            ("run", "AS 10S KS QS JS", "AS"),  # not trump
            ("run", "AH AH 10H KH QH JH", "AH AH"),  # uneven copies
            ("royal_marriage", "KS QS", "KS QS"),  # not trump
            ("royal_marriage", "KH KH QH", "KH KH QH"),
            ("marriage", "KS QD", "KS QD"),  # two suits
            ("marriage", "KH QH", "royal_marriage"),  # in trump
            ("marriage", "KS KS", "KS KS"),
            ("dix", "9S", "9S"),
            ("aces_around", "AS AH AD", "AS AH AD"),
            ("kings_around", "KS KH KD KD", "KD KD"),
            ("pinochle", "QS JS", "QS JS"),
            ("pinochle", "", "no cards"),
        ],
    )
    def test_wrong_cards(self, name: str, melded: str, needle: str) -> None:
        shown = "AS 10S KS QS JS AH AH 10H KH KH QH JH 9H 9S QD KD JD AD"
        error = refused(shown, [("dix", "9H"), (name, melded)])
        assert error.field == "melds[1].cards"
        assert needle in str(error)

    def test_wrong_shape_messages_read_as_english(self) -> None:
        """The article agrees with the meld's name and a "around" meld's cards are "the A of
        each suit": the messages read "a aces_around ... a A of each suit" until 12-03."""
        shown = "AS AH AD AC AS AH AD KH QH"
        error = refused(shown, [("aces_around", "AS AH AD")])
        assert "is not an aces_around: an aces_around is L copies each of the A of each suit" in (
            str(error)
        )
        error = refused(shown, [("royal_marriage", "KH")])
        assert "is not a royal_marriage: a royal_marriage is L copies each of K and Q" in str(error)
        with pytest.raises(MeldError, match="is not one aces_around: an aces_around is the A of"):
            one_set("aces_around", cards("AS AH AD"), HEARTS)

    def test_card_not_shown(self) -> None:
        error = refused("QS JS", [("pinochle", "QS JD")])
        assert error.field == "melds[0].cards"
        assert "JD" in str(error)

    def test_double_needs_both_copies_shown(self) -> None:
        error = refused("QS QS JD", [("pinochle", "QS QS JD JD")])
        assert "JD" in str(error)

    def test_not_a_card(self) -> None:
        with pytest.raises(MeldError) as caught:
            score_declared(cards("QS JD"), [("pinochle", (3, 99))], HEARTS, PARTNERSHIP)
        assert caught.value.field == "melds[0].cards"

    def test_run_and_its_own_royal_marriage_overlap(self) -> None:
        """§1.9 default: the run's K-Q cannot also be declared as a royal marriage."""
        error = refused(RUN, [("run", RUN), ("royal_marriage", "KH QH")])
        assert error.field == "melds[1].cards"
        assert "KH" in str(error)
        assert "class A" in str(error)

    def test_run_counts_does_not_allow_declaring_the_pair_twice(self) -> None:
        table = table_for("partnership", {"run_counts_its_royal_marriage": True})
        refused(RUN, [("run", RUN), ("royal_marriage", "KH QH")], table=table)

    def test_same_class_twice(self) -> None:
        refused("KS QS", [("marriage", "KS QS"), ("marriage", "KS QS")], CLUBS)
        refused("9H", [("dix", "9H"), ("dix", "9H")])
        refused(
            "KS KH KD KC",
            [("kings_around", "KS KH KD KC"), ("kings_around", "KS KH KD KC")],
        )
        refused("QS JD", [("pinochle", "QS JD"), ("pinochle", "QS JD")])

    def test_first_bad_entry_is_named(self) -> None:
        error = refused("QS JD 9H", [("dix", "9H"), ("pinochle", "QS JD"), ("dix", "9H")])
        assert error.field == "melds[2].cards"


class TestRunSharesDeclared:
    SHARES = table_for("partnership", {"run_shares_marriage_cards": True})

    def test_extra_king_marries_the_runs_queen(self) -> None:
        melds = [("run", RUN), ("royal_marriage", "KH QH")]
        result = declare(RUN + " KH", melds, table=self.SHARES)
        assert result.total == 190
        refused(RUN + " KH", melds)  # not without the option

    def test_borrowing_order_does_not_matter(self) -> None:
        melds = [("royal_marriage", "KH QH"), ("run", RUN)]
        assert declare(RUN + " QH", melds, table=self.SHARES).total == 190

    def test_extra_king_and_queen_make_two(self) -> None:
        melds = [("run", RUN), ("royal_marriage", "KH KH QH QH")]
        assert declare(RUN + " KH QH", melds, table=self.SHARES).total == 230
        refused(RUN + " KH QH", melds)
        assert declare(RUN + " KH QH", [("run", RUN), ("royal_marriage", "KH QH")]).total == 190

    def test_two_run_cards_never_pair(self) -> None:
        error = refused(RUN, [("run", RUN), ("royal_marriage", "KH QH")], table=self.SHARES)
        assert "only one" in str(error)

    @pytest.mark.parametrize(("extra", "short"), [("KH KH", "QH"), ("QH QH", "KH")])
    def test_each_run_card_is_lent_once(self, extra: str, short: str) -> None:
        """Run + two extra KH (or QH), 80 cards: one run card to lend, one shared marriage."""
        table = table_for("double-deck", {"run_shares_marriage_cards": True})
        shown = f"{RUN} {extra}"
        assert declare(shown, [("run", RUN), ("royal_marriage", "KH QH")], table=table).total == 19
        error = refused(shown, [("run", RUN), ("royal_marriage", "KH KH QH QH")], table=table)
        assert short in str(error)
        # The same as two one-set entries: each fits alone, together they need the run card twice.
        twice = [("run", RUN), ("royal_marriage", "KH QH"), ("royal_marriage", "KH QH")]
        error = refused(shown, twice, table=table)
        assert error.field == "melds[2].cards"
        assert short in str(error)

    def test_borrowing_is_only_from_runs(self) -> None:
        refused("KS QS", [("marriage", "KS QS"), ("marriage", "KS QS")], CLUBS, self.SHARES)
        refused("KH QH", [("royal_marriage", "KH QH")] * 2, table=self.SHARES)


# ------------------------------------------------------------------------------------------------
# The table (A.2 meld_values, A.9 item 3)


class TestMeldTable:
    def test_shorter_lists_grow_by_the_single_value(self) -> None:
        lists = default_lists("partnership") | {"pinochle": [40], "run": [150, 1500]}
        table = build_meld_table(lists, per_set=False)
        assert table.values["pinochle"] == (40, 80, 120, 160)
        assert table.values["run"] == (150, 1500, 1650, 1800)
        assert table.value("run", 5) == 1950
        assert table.value("pinochle", 0) == 0

    def test_per_set_uses_only_the_single_value(self) -> None:
        lists = default_lists("partnership")  # abundance doubles, ignored per set
        table = build_meld_table(lists, per_set=True)
        assert table.values["run"] == (150, 300, 450, 600)
        assert table.values["aces_around"] == (100, 200, 300, 400)
        assert table.value("pinochle", 2) == 80
        assert table.value("pinochle", 6) == 240

    def test_80_card_table_kept(self) -> None:
        assert DD80.values["run"] == (15, 150, 225, 300)
        assert DD80.values["pinochle"] == (4, 30, 60, 90)
        assert DD80.roundhouse_bonus == 0

    def test_every_variant_default_builds(self) -> None:
        for variant in ("two-handed", "cutthroat", "partnership", "partnership-no-bid"):
            assert set(table_for(variant).values) == set(MELD_NAMES)
        assert table_for("double-deck", {"deck": 48}).values["run"] == (15, 150, 165, 180)

    def test_roundhouse_bonus_and_flags(self) -> None:
        lists = default_lists("partnership") | {"roundhouse_bonus": [30, 0]}
        table = build_meld_table(
            lists,
            per_set=False,
            run_counts_its_royal_marriage=True,
            run_shares_marriage_cards=True,
        )
        assert table.roundhouse_bonus == 30
        assert table.value("roundhouse_bonus", 2) == 30  # once, whatever the level
        assert table.run_counts_its_royal_marriage
        assert table.run_shares_marriage_cards
        without = dict(default_lists("partnership"))
        del without["roundhouse_bonus"]
        assert build_meld_table(without, per_set=False).roundhouse_bonus == 0

    @pytest.mark.parametrize(
        ("change", "needle"),
        [
            ({"flush": [150]}, "flush"),
            ({"pinochle": []}, "pinochle"),
            ({"dix": [1.5]}, "dix"),
            ({"dix": [True]}, "dix"),
        ],
    )
    def test_bad_lists_refused(self, change: dict[str, Any], needle: str) -> None:
        with pytest.raises(ValueError, match=needle):
            build_meld_table(default_lists("partnership") | change, per_set=False)

    def test_missing_name_refused(self) -> None:
        lists = default_lists("partnership")
        del lists["marriage"]
        with pytest.raises(ValueError, match="marriage"):
            build_meld_table(lists, per_set=False)

    def test_tables_are_frozen_values_and_hashable(self) -> None:
        again = table_for("partnership")
        assert again == PARTNERSHIP
        assert hash(again) == hash(PARTNERSHIP)
        assert again != table_for("two-handed")
        with pytest.raises(TypeError):
            again.values["run"] = (1, 2, 3, 4)  # type: ignore[index]

    def test_direct_construction_is_checked(self) -> None:
        values = dict(PARTNERSHIP.values)
        values["run"] = (150, 1500)  # type: ignore[assignment]
        with pytest.raises(ValueError, match="run"):
            MeldTable(values, 0, False, False)

    def test_negative_level_refused(self) -> None:
        with pytest.raises(ValueError):
            PARTNERSHIP.value("run", -1)

    def test_classes(self) -> None:
        assert [CLASS_OF[name] for name in MELD_NAMES] == list("AAAABBBBC")


class TestSingleSets:
    """The one-set combinations a two-handed meld window offers (A.8 item 1, A.10 item 2)."""

    @pytest.mark.parametrize("trump", [SPADES, HEARTS, DIAMONDS, CLUBS])
    def test_eleven_sets_and_marriages_only_outside_trump(self, trump: int) -> None:
        """A.7 item 6 / §1.8: a ``marriage`` is K-Q of a non-trump suit (the trump K-Q is the
        royal marriage), so three marriages; every listed set is one legal set of its name."""
        sets = single_sets(trump)
        assert len(sets) == 11
        marriage_suits = sorted(
            {c // 6 for name, cards in sets if name == "marriage" for c in cards}
        )
        assert marriage_suits == sorted(s for s in (SPADES, HEARTS, DIAMONDS, CLUBS) if s != trump)
        for name, cards in sets:
            assert one_set(name, cards, trump) == cards
