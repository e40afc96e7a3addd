"""Behaviour of the rules core that mutation testing found unpinned (cards, melds, scoring, tricks).

Each test names the RULES.md rule it pins. They were written against mutants of
``referee/rules/{cards,melds,scoring,tricks}.py`` that the rest of the suite let through: every
test here fails with its mutant applied and passes on the real code.
"""

from __future__ import annotations

from referee.rules.cards import parse_card, parse_suit
from referee.rules.scoring import GameEndRule, game_winner
from referee.rules.tricks import PlayRules, legal_plays, play_ladder, play_violation


def cards(text: str) -> list[int]:
    return [parse_card(t) for t in text.split()]


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
