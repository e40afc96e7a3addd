"""Unit tests of the pure rules core: cards, tricks, counting, scoring and dealing."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from referee.rules.cards import (
    CardSyntaxError,
    canonical_deck,
    fits_deck,
    format_card,
    format_cards,
    parse_card,
    parse_suit,
    remove_cards,
)
from referee.rules.dealing import (
    Deal,
    deal_commitment,
    deal_from_order,
    seeded_deal,
    seeded_shuffle,
)
from referee.rules.scoring import (
    GameEndRule,
    SaveRule,
    game_winner,
    hopeless_contract,
    score_hand,
)
from referee.rules.tricks import (
    FREE_PLAY,
    Counting,
    PlayRules,
    legal_plays,
    play_violation,
    trick_winner,
)


def cards(text: str) -> list[int]:
    return [parse_card(t) for t in text.split()]


class TestCards:
    @given(st.integers(min_value=0, max_value=23))
    def test_parse_format_round_trip(self, card: int) -> None:
        """Every card formats to canonical text that parses back to itself."""
        assert parse_card(format_card(card)) == card

    def test_input_is_lenient_output_canonical(self) -> None:
        """T means 10 and input is case-insensitive; output is canonical upper case."""
        assert format_card(parse_card("th")) == "10H"
        assert format_card(parse_card(" qs ")) == "QS"
        assert parse_suit("d") == parse_suit("D")

    @pytest.mark.parametrize("bad", ["1S", "QX", "", "10", 5, None, "AAS"])
    def test_bad_notation_is_refused(self, bad: object) -> None:
        with pytest.raises(CardSyntaxError):
            parse_card(bad)

    def test_canonical_order_is_int_order(self) -> None:
        """Sorting card ints gives suits S H D C, then ranks A 10 K Q J 9 (A.3)."""
        assert format_cards(sorted(cards("9C AH 10S QD AS"))) == ["AS", "10S", "AH", "QD", "9C"]

    def test_decks(self) -> None:
        assert len(canonical_deck(48)) == 48
        deck80 = canonical_deck(80)
        assert len(deck80) == 80
        assert not any(c % 6 == 5 for c in deck80)
        assert fits_deck(cards("QS QS QS"), 48) is not None
        assert fits_deck(cards("QS QS QS QS"), 80) is None
        assert fits_deck(cards("9S"), 80) is not None
        too_many = "QS appears 5 times; the 80-card deck has 4"
        assert fits_deck(cards("QS QS QS QS QS"), 80) == too_many

    def test_remove_cards_counts_copies(self) -> None:
        hand = cards("AS AS KH")
        assert remove_cards(hand, cards("AS")) == tuple(cards("AS KH"))
        assert remove_cards(hand, cards("AS AS AS")) is None


class TestTrickWinner:
    @pytest.mark.parametrize(
        ("trick", "trump", "winner"),
        [
            ("10C AC KC 9D", "H", 1),
            ("AC 9H 10C KC", "H", 1),
            ("AC 9H JH AH", "H", 3),
            ("KC AC AC 10C", "H", 1),
            ("9C AS AD AH", "S", 1),
            ("QD 10S 10S JS", "S", 1),
        ],
    )
    def test_section_1_3(self, trick: str, trump: str, winner: int) -> None:
        assert trick_winner(cards(trick), parse_suit(trump)) == winner


class TestLadder:
    rules = PlayRules()

    def test_free_play_allows_everything(self) -> None:
        hand = cards("AS 9S 9H AD")
        assert legal_plays(hand, cards("10S"), parse_suit("H"), FREE_PLAY) == tuple(sorted(hand))

    @pytest.mark.parametrize(
        ("trick", "hand", "card", "code"),
        [
            ("10C", "AC 9C KH", "KH", "MUST_FOLLOW_SUIT"),
            ("10C", "AC 9C KH", "9C", "MUST_HEAD_TRICK"),
            ("10C", "KH AS", "AS", "MUST_TRUMP"),
            ("10C QH", "KH JH AS", "JH", "MUST_OVERTRUMP"),
            ("10C QH", "KH JH AS", "AS", "MUST_TRUMP"),
            ("10C QH", "JH AS", "AS", "MUST_TRUMP"),
            ("10C", "AC 9C KH", "AC", None),
            ("10C QH", "AS 9D", "9D", None),
        ],
    )
    def test_violation_codes(self, trick: str, hand: str, card: str, code: str | None) -> None:
        """The code for an illegal card names the rung that forbids it (A.5)."""
        result = play_violation(
            parse_card(card), cards(hand), cards(trick), parse_suit("H"), self.rules
        )
        assert result == code

    def test_partner_exception(self) -> None:
        """head_over_partner false: following suit is enough when the partner is winning."""
        relaxed = PlayRules(head_over_partner=False)
        hand = cards("AC QC")
        trick = cards("9C KC")
        assert legal_plays(hand, trick, parse_suit("H"), relaxed, partner_winning=True) == tuple(
            sorted(hand)
        )
        assert legal_plays(hand, trick, parse_suit("H"), relaxed) == tuple(cards("AC"))

    def test_beat_highest_led_card_beats_the_highest_not_the_first(self) -> None:
        """§1.5 / A.2 ``head_when_trumped: beat_highest_led_card``: once the plain lead is
        trumped, a follower must beat the *highest* card of the suit led in the trick (10C here),
        not merely the card that was led (JC)."""
        beat = PlayRules(head_when_trumped="beat_highest_led_card")
        hand = cards("AC KC")
        trick = cards("JC 10C QH")
        assert legal_plays(hand, trick, parse_suit("H"), beat) == tuple(cards("AC"))
        assert play_violation(parse_card("KC"), hand, trick, parse_suit("H"), beat) == (
            "MUST_HEAD_TRICK"
        )
        # The default (not_required): any club.
        assert legal_plays(hand, trick, parse_suit("H"), self.rules) == tuple(cards("AC KC"))

    def test_an_identical_trump_does_not_overtrump(self) -> None:
        """§1.3 and §1.5: "beat" means a strictly higher rank, so a copy of the trump already in
        the trick is no overtrump; the player must still trump (under-trump), with either trump."""
        hand = cards("QH 9H AS")
        trick = cards("10C QH")
        assert legal_plays(hand, trick, parse_suit("H"), self.rules) == tuple(cards("QH 9H"))
        assert play_violation(parse_card("9H"), hand, trick, parse_suit("H"), self.rules) is None

    def test_must_overtrump_off_allows_any_trump(self) -> None:
        """§1.5 / OPTIONS.md ``must_overtrump: false``: trumping a trick that already holds a
        trump, any trump will do, even when a higher one is held (still no off-suit card)."""
        lax = PlayRules(must_overtrump=False)
        hand = cards("KH JH AS")
        trick = cards("10C QH")
        assert legal_plays(hand, trick, parse_suit("H"), lax) == tuple(cards("KH JH"))
        assert play_violation(parse_card("JH"), hand, trick, parse_suit("H"), lax) is None
        assert play_violation(parse_card("AS"), hand, trick, parse_suit("H"), lax) == "MUST_TRUMP"

    @given(
        st.lists(st.integers(0, 23), min_size=1, max_size=12),
        st.lists(st.integers(0, 23), min_size=1, max_size=3),
        st.integers(0, 3),
    )
    def test_legal_set_and_violations_agree(
        self, hand: list[int], trick: list[int], trump: int
    ) -> None:
        """A card is in the legal set exactly when play_violation finds nothing wrong with it."""
        legal = set(legal_plays(hand, trick, trump, self.rules))
        assert legal
        for card in set(hand):
            assert (play_violation(card, hand, trick, trump, self.rules) is None) == (card in legal)


class TestCounting:
    @pytest.mark.parametrize(
        ("scheme", "bonus", "deck", "total"),
        [
            ("modern10", 10, 48, 250),
            ("simple_10_5", 10, 48, 250),
            ("classic_11", 10, 48, 250),
            ("points1", 1, 48, 25),
            ("points1", 2, 80, 50),
        ],
    )
    def test_totals(self, scheme: str, bonus: int, deck: int, total: int) -> None:
        """Every card point plus the last trick adds up to the scheme's total (§1.6)."""
        assert Counting.of(scheme, bonus).total_in_play(deck) == total

    def test_trick_points(self) -> None:
        assert Counting.of("modern10", 10).trick_points(cards("AS 10S KS QS"), False) == 30
        assert Counting.of("modern10", 10).trick_points(cards("QS JS 9S 9H"), True) == 10


class TestScoring:
    partnership = SaveRule(save_meld="trick_point", applies_to="both", dix_exempt=True)

    def score(self, **kwargs: object):
        base: dict[str, object] = {"conceded": False, "total_in_play": 250, "dix": [0, 0]}
        base.update(kwargs)
        return score_hand(self.partnership, **base)  # type: ignore[arg-type]

    def test_made_and_set(self) -> None:
        """§4.9 examples 1-2: made scores meld + points; set loses the bid."""
        made = self.score(
            bid=350, declaring_side=0, meld=[120, 60], points=[230, 20], tricks=[10, 2]
        )
        assert made.delta == (350, 80)
        set_ = self.score(
            bid=350, declaring_side=0, meld=[120, 60], points=[220, 30], tricks=[10, 2]
        )
        assert set_.delta == (-350, 90)

    def test_throw_in(self) -> None:
        """§4.9 example 3: declarers -bid, defenders their meld only; hopeless flagged."""
        result = self.score(
            bid=400, declaring_side=0, meld=[140, 50], points=[0, 0], tricks=[0, 0], conceded=True
        )
        assert result.delta == (-400, 50)
        assert result.saved == (False, True)
        assert result.hopeless

    def test_failed_save_keeps_dix(self) -> None:
        """§4.9 example 4: no trick point, meld void apart from the dix."""
        result = self.score(
            bid=250, declaring_side=0, meld=[250, 60], dix=[0, 10], points=[250, 0], tricks=[11, 1]
        )
        assert result.delta == (500, 10)
        assert result.saved == (True, False)

    def test_save_thresholds_are_inclusive(self) -> None:
        """A.2 ``save_meld``: "at least" one trick, one card point, or N card points."""
        by_trick = SaveRule(save_meld="trick")
        assert by_trick.saved(tricks=1, points=0)
        assert not by_trick.saved(tricks=0, points=0)
        by_point = SaveRule(save_meld="trick_point")
        assert by_point.saved(tricks=1, points=1)
        assert not by_point.saved(tricks=1, points=0)
        by_count = SaveRule(save_meld=20)
        assert by_count.saved(tricks=1, points=20)
        assert not by_count.saved(tricks=1, points=19)

    def test_min_meld_to_record_is_inclusive_and_voids_the_dix_too(self) -> None:
        """OPTIONS.md ``min_meld_to_record``: a meld totalling *less* than the minimum records
        nothing (equal records it). Recording nothing includes the dix: ``dix_exempt_from_save``
        keeps dix points of a recorded meld only."""
        rule = SaveRule(save_meld="trick", dix_exempt=True, min_meld_to_record=20)
        result = score_hand(
            rule,
            bid=None,
            declaring_side=None,
            meld=[20, 19],
            dix=[0, 0],
            points=[100, 50],
            tricks=[6, 6],
            conceded=False,
            total_in_play=250,
        )
        assert result.delta == (120, 50)
        # Side 1 fails to save: its 10 dix points are kept only if its meld was recorded.
        result = score_hand(
            rule,
            bid=None,
            declaring_side=None,
            meld=[30, 10],
            dix=[0, 10],
            points=[250, 0],
            tricks=[12, 0],
            conceded=False,
            total_in_play=250,
        )
        assert result.delta == (280, 0)
        assert result.saved == (True, False)

    def test_hopeless_is_strictly_more_than_the_points_in_play(self) -> None:
        """A.7 item 8: hopeless = bid - the declaring side's meld > the card points in play, so a
        bid exactly that far away can still be made (also used for the no-trump concession)."""
        assert not hopeless_contract(250, 0, 250)
        assert hopeless_contract(260, 0, 250)
        assert not hopeless_contract(300, 50, 250)
        assert hopeless_contract(301, 50, 250)

    def test_game_end(self) -> None:
        """§4.9 example 5 and A.7 item 9: both reach, the declaring side wins."""
        rule = GameEndRule(target=1500, both_reach="bidder_wins")
        assert game_winner(rule, [1530, 1510], 0, 1500) == (0, 1500)
        assert game_winner(rule, [1530, 1510], 1, 1500) == (1, 1500)
        higher = GameEndRule(target=1500)
        assert game_winner(higher, [1510, 1510], None, 1500) == (None, 1500)
        margin = GameEndRule(target=500, margin_win=True)
        assert game_winner(margin, [300, -250], 0, 500) == (0, 500)
        extend = GameEndRule(target=1000, both_reach="extend_250")
        assert game_winner(extend, [1100, 1300], None, 1000) == (1, 1250)


class TestDealing:
    def test_seeded_shuffle_matches_the_portable_algorithm(self) -> None:
        """A.10 item 4, restated independently: SHA-256 words, rejection sampling, Fisher-Yates."""
        deck = list(canonical_deck(48))
        words: list[int] = []
        k = 0

        def word() -> int:
            nonlocal k
            if not words:
                digest = hashlib.sha256(b"demo" + k.to_bytes(8, "big")).digest()
                words.append(int.from_bytes(digest[:8], "big"))
                k += 1
            return words.pop()

        expected = list(deck)
        for i in range(len(expected) - 1, 0, -1):
            n = i + 1
            while True:
                w = word()
                if w < (1 << 64) - ((1 << 64) % n):
                    break
            j = w % n
            expected[i], expected[j] = expected[j], expected[i]
        assert seeded_shuffle(deck, "demo") == expected

    def test_deal_split(self) -> None:
        """Seat dealer+1 gets the first packet; the no-bid turn-up is the dealer's last card."""
        order = list(range(24)) * 2
        deal = deal_from_order(
            order, players=4, hand_size=12, dealer=3, dealer_turns_last_card=True
        )
        assert deal.hands[0] == tuple(sorted(order[:12]))
        assert deal.turn_up == order[47]
        assert deal.turn_up in deal.hands[3]

    def test_seeded_deal_is_a_whole_deck(self) -> None:
        deal = seeded_deal("x", deck_size=48, players=3, hand_size=15, dealer=0)
        dealt = sorted([c for h in deal.hands for c in h] + list(deal.widow))
        assert dealt == list(canonical_deck(48))
        assert len(deal.widow) == 3

    def test_commitment(self) -> None:
        deal = Deal(hands=((0, 1), (2, 3)))
        digest = deal_commitment(deal, b"salt")
        assert digest == deal_commitment(deal, b"salt")
        assert digest != deal_commitment(deal, b"pepper")
