"""Behaviour of the rules core that mutation testing found unpinned (cards, melds, scoring, tricks).

Each test names the RULES.md rule it pins. They were written against mutants of
``referee/rules/{cards,melds,scoring,tricks}.py`` that the rest of the suite let through: every
test here fails with its mutant applied and passes on the real code.
"""

from __future__ import annotations

import pytest

from referee.rules.cards import (
    RANK_NAMES,
    SUIT_LETTERS,
    counts_of,
    parse_card,
    parse_suit,
    rank_of,
    suit_of,
)
from referee.rules.melds import (
    MeldError,
    MeldTable,
    best_meld,
    build_meld_table,
    meld_total,
    score_declared,
)
from referee.rules.scoring import GameEndRule, game_winner
from referee.rules.tricks import PlayRules, legal_plays, play_ladder, play_violation
from tests.test_options import MELDS_ABUNDANCE


def cards(text: str) -> list[int]:
    return [parse_card(t) for t in text.split()]


# §1.8: the single-deck table (×10), single and double values, without a roundhouse entry.
SINGLE_DECK = {name: v for name, v in MELDS_ABUNDANCE.items() if name != "roundhouse_bonus"}


class TestMarginWinAtTheSmallestTarget:
    """A.7 item 9 and OPTIONS.md ``margin_win``: a side leading by at least the target wins,
    checked after the one-side-reached test. ``target`` may be as low as 1 (OPTIONS.md), so a
    lead of exactly 1 point is a winning margin there."""

    RULE = GameEndRule(target=1, both_reach="higher_total", margin_win=True)

    def test_a_one_point_lead_wins_for_team_0(self) -> None:
        """Nobody at 1, team 0 ahead by 1: team 0 wins by the margin."""
        assert game_winner(self.RULE, (0, -1), None, 1) == (0, 1)

    def test_a_one_point_lead_wins_for_team_1(self) -> None:
        """Nobody at 1, team 1 ahead by 1: team 1 wins by the margin."""
        assert game_winner(self.RULE, (-2, -1), None, 1) == (1, 1)

    def test_the_margin_decides_before_both_reach(self) -> None:
        """Both at the target, team 0 one point ahead, team 1 declared: the margin (checked
        before ``both_reach``) gives team 0 the game even under ``bidder_wins``."""
        rule = GameEndRule(target=1, both_reach="bidder_wins", margin_win=True)
        assert game_winner(rule, (2, 1), 1, 1) == (0, 1)


class TestPlayRuleDefaults:
    """§1.5 and §10.4 L10: the strict ladder's defaults, read from ``PlayRules()`` itself."""

    def test_heading_over_a_winning_partner_is_the_default(self) -> None:
        """§10.4 L10 (``head_over_partner`` default true): clubs led, the partner's KC winning,
        the hand AC QC must head with AC even though the partner is winning."""
        hand, trick, trump = cards("AC QC"), cards("9C KC"), parse_suit("H")
        assert legal_plays(hand, trick, trump, PlayRules(), partner_winning=True) == (
            parse_card("AC"),
        )

    def test_the_ladder_assumes_no_partner_is_winning(self) -> None:
        """``play_ladder`` without ``partner_winning`` reads the trick as not won by a partner:
        with ``head_over_partner`` off, AC must still head 9C KC (L10's cards)."""
        relaxed = PlayRules(head_over_partner=False)
        allowed, _ = play_ladder(cards("AC QC"), cards("9C KC"), parse_suit("H"), relaxed)
        assert list(allowed) == cards("AC")

    def test_play_violation_assumes_no_partner_is_winning(self) -> None:
        """``play_violation`` without ``partner_winning`` (two-handed calls it so: there is no
        partner) still requires heading under ``head_over_partner`` off: QC on 9C KC while
        holding AC is MUST_HEAD_TRICK (§1.5, A.5)."""
        relaxed = PlayRules(head_over_partner=False)
        code = play_violation(
            parse_card("QC"), cards("AC QC"), cards("9C KC"), parse_suit("H"), relaxed
        )
        assert code == "MUST_HEAD_TRICK"


class TestLadderFinePoints:
    """§1.3 and §1.5: "beat" means a strictly higher rank; A.5: the code names the rung."""

    def test_beat_highest_led_card_is_not_beaten_by_an_identical_copy(self) -> None:
        """``head_when_trumped: beat_highest_led_card`` (§1.5): clubs led with 10C and trumped;
        holding 10C 9C nothing beats 10C (an identical copy never beats, §1.3), so either club
        may be played."""
        rules = PlayRules(head_when_trumped="beat_highest_led_card")
        hand, trick, trump = cards("10C 9C"), cards("10C QH"), parse_suit("H")
        assert legal_plays(hand, trick, trump, rules) == tuple(sorted(hand))

    def test_a_plain_card_where_an_overtrump_is_required_is_must_trump(self) -> None:
        """A.5: MUST_OVERTRUMP is for trumping *lower*; a void player who plays a plain card
        while holding a trump that beats the trick's trump gets MUST_TRUMP. Here a diamond
        (AD) on 10C QH with KH JH held, hearts trump (§10.4 L4's trick)."""
        code = play_violation(
            parse_card("AD"), cards("KH JH AD"), cards("10C QH"), parse_suit("H"), PlayRules()
        )
        assert code == "MUST_TRUMP"


class TestMeldTable:
    """The meld table (A.2 ``meld_values``, §1.8) refuses a malformed table and reads levels."""

    def table(self) -> MeldTable:
        return build_meld_table(SINGLE_DECK, per_set=False)

    def test_a_table_missing_a_name_is_refused(self) -> None:
        """A table built by hand must hold every meld name: one missing is a ValueError that
        names it (not a KeyError later)."""
        values = {name: (v[0], v[1], v[0] * 3, v[0] * 4) for name, v in SINGLE_DECK.items()}
        del values["pinochle"]
        with pytest.raises(ValueError, match="missing pinochle"):
            MeldTable(values, 0, False, False)

    def test_a_table_with_an_unknown_name_is_refused(self) -> None:
        """An unknown name is refused too, even when every real name is present."""
        values = {name: (v[0], v[1], v[0] * 3, v[0] * 4) for name, v in SINGLE_DECK.items()}
        values["flush"] = (1, 2, 3, 4)
        with pytest.raises(ValueError, match="unknown flush"):
            MeldTable(values, 0, False, False)

    def test_the_roundhouse_bonus_is_paid_once_at_any_level_and_not_at_level_0(self) -> None:
        """A.9 item 2: ``roundhouse_bonus`` is paid at most once, whatever the level; with no
        K-Q in every suit (level 0) it is worth nothing."""
        table = build_meld_table({**SINGLE_DECK, "roundhouse_bonus": [100]}, per_set=False)
        assert table.value("roundhouse_bonus", 0) == 0
        assert table.value("roundhouse_bonus", 1) == 100
        assert table.value("roundhouse_bonus", 2) == 100

    def test_the_run_options_are_off_unless_asked_for(self) -> None:
        """A.2: ``run_counts_its_royal_marriage`` and ``run_shares_marriage_cards`` default to
        false, so a table built without them scores §10.5 M2 (run + an extra trump K) at 150."""
        result = best_meld(cards("AH 10H KH KH QH JH"), parse_suit("H"), self.table())
        assert result.total == 150
        assert [(m.name, m.points) for m in result.melds] == [("run", 150)]

    def test_meld_total_pays_the_roundhouse_bonus_like_best_meld(self) -> None:
        """``meld_total`` is "the same number as ``best_meld(...).total``": §10.5 M6 (K and Q
        in every suit, spades trump) is 240 from its parts, plus a ``roundhouse_bonus`` of 100
        when the table pays one (A.2, A.9 item 2)."""
        table = build_meld_table({**SINGLE_DECK, "roundhouse_bonus": [100]}, per_set=False)
        hand = cards("KS QS KH QH KD QD KC QC")
        spades = parse_suit("S")
        assert best_meld(hand, spades, table).total == 340
        assert meld_total(counts_of(hand), spades, table) == 340


class TestDeclaredMeldMessages:
    """A.5: an INVALID_MELD message names the rule broken; for a card the declared melds need
    it says how many copies were shown: "none" or "only N"."""

    def test_a_card_not_shown_is_none_shown(self) -> None:
        table = build_meld_table(SINGLE_DECK, per_set=False)
        with pytest.raises(MeldError, match=r"needs 1 × JD but none shown"):
            score_declared(cards("QS"), [("pinochle", cards("QS JD"))], parse_suit("H"), table)

    def test_a_card_shown_once_is_only_1_shown(self) -> None:
        table = build_meld_table(SINGLE_DECK, per_set=False)
        double = cards("QS QS JD JD")
        with pytest.raises(MeldError, match=r"needs 2 × JD but only 1 shown"):
            score_declared(cards("QS QS JD"), [("pinochle", double)], parse_suit("H"), table)


class TestDeclaredMeldCardRange:
    """A.5 ``INVALID_MELD``: ``score_declared`` refuses anything that is not a card int 0..23
    (cards are ``suit * 6 + rank``, A.3), so a count vector is never indexed by a non-card."""

    @pytest.mark.parametrize("card", [-1, 24])
    def test_a_non_card_is_an_invalid_meld(self, card: int) -> None:
        table = build_meld_table(SINGLE_DECK, per_set=False)
        shown = [*cards("QS JD"), card]
        with pytest.raises(MeldError, match=f"cards: {card} is not a card") as refused:
            score_declared(shown, [("pinochle", cards("QS JD"))], parse_suit("H"), table)
        assert refused.value.code == "INVALID_MELD"
        # The message is the whole text of the error (the engine quotes ``str(error)``).
        assert str(refused.value) == f"cards: {card} is not a card"


class TestRunsDoNotShareTheirCards:
    """A.7 item 6 and A.9 item 1: the class A entries together must fit in the shown cards;
    under ``run_shares_marriage_cards`` only a ``royal_marriage`` entry may borrow one card
    from a run, so two runs need two trump queens (and two trump kings) of their own. Spare
    copies of the *other* card (80-card deck: four KH) do not make up the shortfall."""

    SHARES = build_meld_table(SINGLE_DECK, per_set=False, run_shares_marriage_cards=True)
    RUN = "AH 10H KH QH JH"

    @pytest.mark.parametrize(
        "shown_text",
        [
            pytest.param("AH AH 10H 10H KH KH KH KH QH JH JH", id="one queen, spare kings"),
            pytest.param("AH AH 10H 10H KH QH QH QH QH JH JH", id="one king, spare queens"),
        ],
    )
    def test_two_runs_short_of_one_marriage_card_are_refused(self, shown_text: str) -> None:
        shown = cards(shown_text)
        declared = [("run", cards(self.RUN)), ("run", cards(self.RUN))]
        with pytest.raises(MeldError) as refused:
            score_declared(shown, declared, parse_suit("H"), self.SHARES)
        assert refused.value.field == "melds[1].cards"


class TestCardParts:
    """A.3 and §1.2: every card has a rank (A 10 K Q J 9, highest first) and a suit (S H D C)."""

    @pytest.mark.parametrize("suit", SUIT_LETTERS)
    @pytest.mark.parametrize("rank", RANK_NAMES)
    def test_rank_and_suit_of_every_card(self, rank: str, suit: str) -> None:
        card = parse_card(rank + suit)
        assert rank_of(card) == RANK_NAMES.index(rank)
        assert suit_of(card) == SUIT_LETTERS.index(suit)
