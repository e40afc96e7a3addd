"""Two-handed Pinochle (RULES.md §2, A.8): progressive melding, the winner's window, the draws,
the play-off, views, and random-game properties.

Positions are built from explicit deals (``deal2``): each seat's 12 cards, the turned card and
the top of the stock are given, the rest of the deck fills the stock in canonical order.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import random
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from referee.audit import audit_record
from referee.engine.actions import decode_action
from referee.engine.engine import (
    apply,
    hand_progress,
    legal_actions,
    matches,
    new_game,
    start_hand,
)
from referee.engine.errors import IllegalAction
from referee.engine.events import ADJUDICATOR, EVERYONE, Event, visible_to
from referee.engine.game import Game, GivenDeals, SeededDeals, replay
from referee.engine.state import GameState, HandState
from referee.engine.views import SPECTATOR, view
from referee.rules.cards import Card, canonical_deck, format_card, format_cards, parse_card
from referee.rules.dealing import Deal, seeded_deal
from referee.rules.melds import CLASS_OF, MELD_NAMES
from referee.rules.options import resolve_options
from referee.rules.tricks import trick_winner

HOYLE = {
    "new_card_required": True,
    "deferred_meld_scoring": False,
    "head_rule": "trump_lead_only",
    "dix_scores_when_played": False,
}


def cards(text: str) -> tuple[Card, ...]:
    return tuple(parse_card(token) for token in text.split())


def deal2(hands: Sequence[str], turn_up: str, stock: str = "") -> Deal:
    """A whole 48-card two-handed deal: both hands exactly as given (12 cards each), the turned
    card, the stock's top cards as given and then the rest of the deck in canonical order."""
    held = [cards(h) for h in hands]
    assert all(len(h) == 12 for h in held), [len(h) for h in held]
    top = list(cards(stock))
    rest = list(canonical_deck(48))
    for card in [c for h in held for c in h] + top + [parse_card(turn_up)]:
        rest.remove(card)
    return Deal(tuple(tuple(sorted(h)) for h in held), (), tuple(top + rest), parse_card(turn_up))


def begin2(
    hands: Sequence[str],
    turn_up: str,
    stock: str = "",
    options: dict[str, object] | None = None,
    dealer: int = 1,
) -> tuple[GameState, list[Event]]:
    """A two-handed game whose first hand is dealt as given (dealer 1: seat 0 leads)."""
    rules = resolve_options("two-handed", options or {})
    state = new_game(rules, dealer)
    return start_hand(state, deal2(hands, turn_up, stock))


def send(state: GameState, seat: int, kind: str, **fields: object) -> GameState:
    return apply(state, seat, decode_action({"type": kind, **fields}))[0]


def send_events(
    state: GameState, seat: int, kind: str, **fields: object
) -> tuple[GameState, list[Event]]:
    return apply(state, seat, decode_action({"type": kind, **fields}))


def snapshot(state: GameState) -> GameState:
    return state._replace(hand=copy.deepcopy(state.hand))


def refuse(state: GameState, seat: int, kind: str, **fields: object) -> str:
    """Send an action that must be refused; check that nothing changed; return the code."""
    before = snapshot(state)
    with pytest.raises(IllegalAction) as info:
        apply(state, seat, decode_action({"type": kind, **fields}))
    assert state == before
    return info.value.code


def meld(state: GameState, seat: int, name: str, text: str, **extra: object) -> GameState:
    return send(state, seat, "meld", name=name, cards=text.split(), **extra)


def hand_of(state: GameState, seat: int) -> list[str]:
    assert state.hand is not None
    return format_cards(state.hand.hands[seat])


def table_of(state: GameState, seat: int) -> list[str]:
    assert state.hand is not None
    return format_cards(sorted(pid >> 1 for pid, _ in state.hand.table[seat]))


def _playable(state: GameState, seat: int) -> list[Card]:
    return [parse_card(e["card"]) for e in legal_actions(state, seat) if "card" in e]


def win_trick(state: GameState, seat: int, lead: str) -> GameState:
    """``seat`` (on lead) leads ``lead``; the other seat answers with a card that loses, from
    its concealed hand when it can, never a 9 of trumps; the trick must go to ``seat``."""
    hand = state.hand
    assert hand is not None and hand.turn == seat and not hand.trick
    state = send(state, seat, "play", card=lead)
    hand = state.hand
    assert hand is not None and hand.trump is not None
    other = 1 - seat
    nine = hand.trump * 6 + 5
    losing = [
        c
        for c in _playable(state, other)
        if trick_winner((parse_card(lead), c), hand.trump) == 0 and c != nine
    ]
    assert losing, f"seat {other} cannot lose to {lead}"
    concealed = [c for c in losing if c in hand.hands[other]]
    state = send(state, other, "play", card=format_card((concealed or losing)[-1]))
    assert state.hand is not None and state.hand.window_seat in (seat, None)
    assert state.hand.tricks[-1].winner == seat
    return state


def first_card(state: GameState, seat: int) -> str:
    """A deterministic play: the first listed card, from the concealed hand when possible."""
    hand = state.hand
    assert hand is not None
    plays = _playable(state, seat)
    assert plays, f"seat {seat} has no play"
    concealed = [c for c in plays if c in hand.hands[seat]]
    return format_card((concealed or plays)[0])


Reached = Callable[[GameState], bool]


def drive(state: GameState, until: Reached) -> GameState:
    """Play first cards (no melds) until ``until(state)`` holds."""
    for _ in range(100):
        if until(state):
            return state
        hand = state.hand
        assert hand is not None
        state = send(state, hand.turn, "play", card=first_card(state, hand.turn))
    raise AssertionError("the position was not reached")


def after_trick(n: int) -> Reached:
    """``drive`` predicate: trick ``n`` is complete and the next lead has not been made."""

    def reached(state: GameState) -> bool:
        hand = state.hand
        return hand is not None and len(hand.tricks) == n and not hand.trick

    return reached


def trick_done_or_hand_over(n: int) -> Reached:
    reached = after_trick(n)
    return lambda state: state.hand is None or reached(state)


def in_playoff(state: GameState) -> bool:
    """``drive`` predicate: phase 2, no card of the trick played yet."""
    return state.hand is not None and state.hand.phase == "play" and not state.hand.trick


def hand_over(state: GameState) -> bool:
    return state.hand is None


def meld_events(events: Sequence[Event]) -> list[dict[str, object]]:
    return [dict(e.data) for e in events if e.kind == "meld_scored"]


# --------------------------------------------------------------------------------------------
# §2.3 R1-R6 and the seed's examples (trump hearts unless stated; seat 0 leads and wins)

# Seat 1 holds no hearts and nothing that must win, so seat 0's leads take the tricks.
LOSER = "9S 9S 9C 9C 9D 9D JS JS JC JC KC KC"
LOSER_WITH_MARRIAGE = "9S 9S 9C 9C 9D 9D JS JS JC KC KC QC"
SEED_HAND = "KS QS JD QH QD QC AC AC AD AD 10C 10D"
# Stock top: seat 0 draws AS, 10H, KD, QC (at the leads of tricks 2, 3, 4, 5), seat 1 the rest.
SEED_STOCK = "AS 10S 10H KH KD KD QC AH"


def seed_position(options: dict[str, object] | None = None) -> GameState:
    state, _ = begin2([SEED_HAND, LOSER], "JH", SEED_STOCK, options)
    return state


class TestQueenOfSpadesInThreeClasses:
    """SEED2 / §1.7: Q♠ scores in a marriage, a pinochle and queens around (R4: other classes)."""

    def marriage_pinochle_queens(self) -> tuple[GameState, list[dict[str, object]]]:
        state = win_trick(seed_position(), 0, "AC")
        state, events = send_events(state, 0, "meld", name="marriage", cards=["KS", "QS"])
        scored = meld_events(events)
        state = win_trick(state, 0, "AC")
        state, events = send_events(state, 0, "meld", name="pinochle", cards=["QS", "JD"])
        scored += meld_events(events)
        state = win_trick(state, 0, "AD")
        state, events = send_events(
            state, 0, "meld", name="queens_around", cards=["QS", "QH", "QD", "QC"]
        )
        return state, scored + meld_events(events)

    def test_all_three_score(self) -> None:
        state, scored = self.marriage_pinochle_queens()
        assert [(m["name"], m["points"], m["from_table"]) for m in scored] == [
            ("marriage", 20, []),
            ("pinochle", 40, ["QS"]),
            ("queens_around", 60, ["QS"]),
        ]
        assert state.hand is not None and state.hand.meld_points == (120, 0)
        assert table_of(state, 0) == ["KS", "QS", "QH", "QD", "JD", "QC"]

    def test_the_same_four_queens_again_need_a_new_card(self) -> None:
        """R3: the table's four queens named again add no card from the hand."""
        state, _ = self.marriage_pinochle_queens()
        state = win_trick(state, 0, "AD")
        code = refuse(state, 0, "meld", name="queens_around", cards=["QS", "QH", "QD", "QC"])
        assert code == "MELD_NEEDS_NEW_CARD"

    def test_a_played_queen_replaced_by_a_new_one_does_not_score(self) -> None:
        """R5: one queen of the melded four is played; a new queen with the other three is
        refused (it has a new card, so the code is MELD_CARD_REUSED: A.8 item 7)."""
        state, _ = self.marriage_pinochle_queens()
        state = win_trick(state, 0, "QC")  # from the table: seat 0 holds no other QC yet
        assert table_of(state, 0) == ["KS", "QS", "QH", "QD", "JD"]
        assert "QC" not in hand_of(state, 0)
        code = refuse(state, 0, "meld", name="queens_around", cards=["QS", "QH", "QD", "QC"])
        assert code == "CARD_NOT_IN_HAND"
        state = win_trick(state, 0, "AD")  # the draws give seat 0 the other QC
        assert "QC" in hand_of(state, 0)
        code = refuse(state, 0, "meld", name="queens_around", cards=["QS", "QH", "QD", "QC"])
        assert code == "MELD_CARD_REUSED"
        # ... and it is not offered as a legal action.
        assert {"type": "meld", "name": "queens_around", "cards": ["QS", "QH", "QD", "QC"]} not in [
            {k: v for k, v in e.items() if k != "points"} for e in legal_actions(state, 0)
        ]


class TestSecondSetOfAType:
    """R5 / SEED2: a second queens around scores only with four queens that never scored in one."""

    HAND = "QS QS QH QH QD QD QC QC AC AC AD AD"

    def first_set(self) -> GameState:
        state, _ = begin2([self.HAND, LOSER], "JH")
        state = win_trick(state, 0, "AC")
        return meld(state, 0, "queens_around", "QS QH QD QC")

    def test_four_new_queens_score_again(self) -> None:
        state = win_trick(self.first_set(), 0, "AC")
        state, events = send_events(
            state, 0, "meld", name="queens_around", cards=["QC", "QD", "QH", "QS"]
        )
        assert [(m["points"], m["from_table"]) for m in meld_events(events)] == [(60, [])]
        assert state.hand is not None and state.hand.meld_points == (120, 0)
        assert len(table_of(state, 0)) == 8

    def test_three_new_queens_and_an_old_one_do_not(self) -> None:
        state = win_trick(self.first_set(), 0, "QC")  # the concealed QC is played
        assert table_of(state, 0) == ["QS", "QH", "QD", "QC"]
        assert "QC" not in hand_of(state, 0)
        state = win_trick(state, 0, "AC")
        code = refuse(state, 0, "meld", name="queens_around", cards=["QS", "QH", "QD", "QC"])
        assert code == "MELD_CARD_REUSED"


class TestRunAndRoyalMarriage:
    """R4 (§2.3, SEED2): royal marriage then A-10-J added as a run scores 40 + 150; a run then
    the royal marriage inside it scores nothing more."""

    HAND = "AH 10H KH QH JH AC AC AD AD 10C 10D KD"

    def test_royal_marriage_then_run(self) -> None:
        state, _ = begin2([self.HAND, LOSER], "JH")
        state = win_trick(state, 0, "AC")
        state, first = send_events(state, 0, "meld", name="royal_marriage", cards=["KH", "QH"])
        state = win_trick(state, 0, "AC")
        state, second = send_events(
            state, 0, "meld", name="run", cards=["AH", "10H", "KH", "QH", "JH"]
        )
        assert [(m["name"], m["points"], m["from_table"]) for m in meld_events(first + second)] == [
            ("royal_marriage", 40, []),
            ("run", 150, ["KH", "QH"]),
        ]
        assert state.hand is not None and state.hand.meld_points == (190, 0)

    @pytest.mark.parametrize(
        ("options", "code"),
        [({}, "MELD_NEEDS_NEW_CARD"), ({"new_card_required": False}, "MELD_CARD_REUSED")],
    )
    def test_run_then_its_royal_marriage_is_refused(
        self, options: dict[str, object], code: str
    ) -> None:
        # Seat 0 draws the other KH at the lead of trick 3.
        state, _ = begin2([self.HAND, LOSER], "JH", "AS 10S KH", options)
        state = win_trick(state, 0, "AC")
        state = meld(state, 0, "run", "AH 10H KH QH JH")
        assert state.hand is not None and state.hand.pending == ((), ())
        state = win_trick(state, 0, "AC")
        # Both cards from the table: no new card (A.8 item 7: checked first), or, without the
        # new-card rule, the K and Q have scored in the run, a higher meld of their class.
        assert refuse(state, 0, "meld", name="royal_marriage", cards=["KH", "QH"]) == code
        state = win_trick(state, 0, "AD")
        assert hand_of(state, 0).count("KH") == 1
        # A new KH with the run's QH: the QH has scored in a higher meld of class A.
        code = refuse(state, 0, "meld", name="royal_marriage", cards=["KH", "QH"])
        assert code == "MELD_CARD_REUSED"


class TestDeferredMelds:
    """R6 / A.8 item 6, SEED2's example: Q♠ on the table from a marriage; jacks around laid down
    with J♦ scores 40 and leaves a pending pinochle, claimed on a later trick win by naming
    exactly its table cards, with no new card."""

    HAND = "KS QS JS JH JD JC AC AC AD AD 10C 10D"
    OTHER = "9S 9S 9C 9C 9D 9D KC KC 10S 10S QD QD"

    def jacks_laid(self, options: dict[str, object] | None = None) -> GameState:
        state, _ = begin2([self.HAND, self.OTHER], "KH", "", options)
        state = win_trick(state, 0, "AC")
        state = meld(state, 0, "marriage", "KS QS")
        state = win_trick(state, 0, "AC")
        return meld(state, 0, "jacks_around", "JS JH JD JC")

    def test_jacks_around_leaves_a_pending_pinochle(self) -> None:
        state = self.jacks_laid()
        hand = state.hand
        assert hand is not None and hand.meld_points == (60, 0)
        assert [
            (name, format_cards(sorted(p >> 1 for p in pids))) for name, pids in hand.pending[0]
        ] == [("pinochle", ["QS", "JD"])]
        public = view(state, 1)["hand"]
        assert isinstance(public, dict)
        assert public["pending"] == [[{"name": "pinochle", "cards": ["QS", "JD"]}], []]

    def test_the_pending_pinochle_is_claimed_later_without_a_new_card(self) -> None:
        state = win_trick(self.jacks_laid(), 0, "AD")
        assert {"type": "meld", "name": "pinochle", "cards": ["QS", "JD"]} in [
            {k: v for k, v in e.items() if k != "points"} for e in legal_actions(state, 0)
        ]
        state, events = send_events(state, 0, "meld", name="pinochle", cards=["JD", "QS"])
        assert [
            (m["points"], m["from_table"], m["claimed_pending"]) for m in meld_events(events)
        ] == [(40, ["QS", "JD"], True)]
        hand = state.hand
        assert hand is not None and hand.meld_points == (100, 0) and hand.pending == ((), ())
        # Claimed once: the same pinochle again is no longer pending.
        state = win_trick(state, 0, "AD")
        assert (
            refuse(state, 0, "meld", name="pinochle", cards=["QS", "JD"]) == "MELD_NEEDS_NEW_CARD"
        )

    def test_the_claim_is_one_meld_of_the_window(self) -> None:
        state = win_trick(self.jacks_laid(), 0, "AD")
        state = meld(state, 0, "pinochle", "QS JD")
        assert refuse(state, 0, "meld", name="marriage", cards=["KS", "QS"]) == "MELD_NOT_ALLOWED"

    def test_not_claimable_in_the_window_that_laid_it(self) -> None:
        state = self.jacks_laid()
        assert refuse(state, 0, "meld", name="pinochle", cards=["QS", "JD"]) == "MELD_NOT_ALLOWED"

    @pytest.mark.parametrize("options", [{"deferred_meld_scoring": False}, HOYLE])
    def test_without_deferred_scoring_the_claim_needs_a_new_card(
        self, options: dict[str, object]
    ) -> None:
        state = self.jacks_laid(options)
        assert state.hand is not None and state.hand.pending == ((), ())
        state = win_trick(state, 0, "AD")
        code = refuse(state, 0, "meld", name="pinochle", cards=["QS", "JD"])
        assert code == "MELD_NEEDS_NEW_CARD"

    def test_without_either_rule_the_table_cards_meld_freely(self) -> None:
        options: dict[str, object] = {"deferred_meld_scoring": False, "new_card_required": False}
        state = win_trick(self.jacks_laid(options), 0, "AD")
        state = meld(state, 0, "pinochle", "QS JD")
        assert state.hand is not None and state.hand.meld_points == (100, 0)

    def test_a_card_on_the_table_twice_is_played_from_the_copy_no_pending_meld_needs(
        self,
    ) -> None:
        """README ruling (two-handed copies): with J♦ on the table twice, once waiting in the
        pending pinochle and once in a pinochle that has scored, playing J♦ plays the scored
        copy, so the pending pinochle stays and can still be claimed."""
        hand = "KS QS QS JS JH JD JD JC AC AC AD AD"
        state, _ = begin2([hand, self.OTHER], "KH", "")
        state = win_trick(state, 0, "AC")
        state = meld(state, 0, "marriage", "KS QS")
        state = win_trick(state, 0, "AC")
        state = meld(state, 0, "jacks_around", "JS JH JD JC")  # pinochle QS + JD pending
        state = win_trick(state, 0, "AD")
        state = meld(state, 0, "pinochle", "QS JD")  # the held copies score their own
        assert state.hand is not None
        pending = state.hand.pending
        assert [name for name, _ in pending[0]] == ["pinochle"]
        assert table_of(state, 0).count("JD") == 2 and "JD" not in hand_of(state, 0)
        state = win_trick(state, 0, "JD")  # from the table
        assert state.hand is not None and state.hand.pending == pending
        assert table_of(state, 0).count("JD") == 1
        state, events = send_events(state, 0, "meld", name="pinochle", cards=["QS", "JD"])
        assert [m["claimed_pending"] for m in meld_events(events)] == [True]

    @pytest.mark.parametrize("played", ["JD", "QS"])
    def test_a_pending_meld_is_dropped_when_one_of_its_cards_is_played(self, played: str) -> None:
        state = win_trick(self.jacks_laid(), 0, played)  # from the table (not held twice)
        hand = state.hand
        assert hand is not None and hand.pending == ((), ())
        assert played not in table_of(state, 0)
        code = refuse(state, 0, "meld", name="pinochle", cards=["QS", "JD"])
        assert code == "CARD_NOT_IN_HAND"

    def test_r4_r5_are_checked_again_at_the_claim(self) -> None:
        """R4/R5 are checked again at the claim: a pinochle scored meanwhile with the same Q♠
        (new J♦ from the hand) makes the pending one a repeat of the type."""
        state, _ = begin2([self.HAND, self.OTHER], "KH", "AS AH 10H 10H JD")
        state = win_trick(state, 0, "AC")
        state = meld(state, 0, "marriage", "KS QS")
        state = win_trick(state, 0, "AC")
        state = meld(state, 0, "jacks_around", "JS JH JD JC")
        state = win_trick(state, 0, "AD")  # seat 0 draws the other JD at the next lead
        state = win_trick(state, 0, "AD")
        assert "JD" in hand_of(state, 0)
        state = meld(state, 0, "pinochle", "QS JD")  # the concealed JD with the table's QS
        state = win_trick(state, 0, "10C")
        hand = state.hand
        assert hand is not None and len(hand.pending[0]) == 1
        code = refuse(state, 0, "meld", name="pinochle", cards=["QS", "JD"])
        assert code == "MELD_CARD_REUSED"

    def test_a_dix_show_creates_no_pending_meld(self) -> None:
        state, _ = begin2(["9H 9H AC AC KS QS JD QH QD QC 10C 10D", LOSER], "KH")
        state = win_trick(state, 0, "AC")
        state = meld(state, 0, "dix", "9H")
        state = meld(state, 0, "pinochle", "QS JD")
        state = win_trick(state, 0, "AC")
        state = meld(state, 0, "dix", "9H")
        hand = state.hand
        assert hand is not None and hand.pending == ((), ()) and hand.meld_points == (60, 0)

    def test_pending_melds_lapse_at_the_end_of_phase_1(self) -> None:
        state = drive(self.jacks_laid(), in_playoff)
        hand = state.hand
        assert hand is not None and hand.pending == ((), ()) and hand.table == ((), ())


# --------------------------------------------------------------------------------------------
# Every two-handed violation code: exact code, state unchanged (A.5, A.8)


def v_start(options: dict[str, object] | None = None) -> GameState:
    """Seat 0 (non-dealer) to lead trick 1; seat 1 holds a club marriage."""
    return begin2([SEED_HAND, LOSER_WITH_MARRIAGE], "JH", "", options)[0]


def v_window(options: dict[str, object] | None = None) -> GameState:
    """Seat 0 has won trick 1: its window is open."""
    return win_trick(v_start(options), 0, "AC")


def v_seat1_window() -> GameState:
    """Seat 1 has won trick 1 (seat 0 led QC, seat 1 took it with KC) and melded K-Q of clubs."""
    state = send(v_start(), 0, "play", card="QC")
    state = send(state, 1, "play", card="KC")
    assert state.hand is not None and state.hand.window_seat == 1
    return meld(state, 1, "marriage", "KC QC")


def v_playoff(options: dict[str, object] | None = None) -> GameState:
    """Phase 2 after trick 13, its winner to lead (first cards and no melds so far), from a
    seeded deal whose play-off has every ladder refusal."""
    rules = resolve_options("two-handed", options or {})
    deal = seeded_deal(
        "playoff-0", deck_size=48, players=2, hand_size=12, dealer=1, two_handed=True
    )
    state, _ = start_hand(new_game(rules, 1), deal)
    return drive(state, in_playoff)


class TestMeldNotAllowed:
    def test_before_the_first_trick(self) -> None:
        state = v_start()
        assert refuse(state, 0, "meld", name="marriage", cards=["KS", "QS"]) == "MELD_NOT_ALLOWED"
        assert refuse(state, 1, "meld", name="marriage", cards=["KC", "QC"]) == "MELD_NOT_ALLOWED"

    def test_mid_trick(self) -> None:
        state = send(v_window(), 0, "play", card="AD")
        for seat, cards_ in ((0, ["KS", "QS"]), (1, ["KC", "QC"])):
            assert refuse(state, seat, "meld", name="marriage", cards=cards_) == "MELD_NOT_ALLOWED"

    def test_by_the_trick_loser(self) -> None:
        state = v_window()
        assert refuse(state, 1, "meld", name="marriage", cards=["KC", "QC"]) == "MELD_NOT_ALLOWED"
        # ... before INVALID_MELD (A.5 order: MELD_NOT_ALLOWED comes first).
        assert refuse(state, 1, "meld", name="nonsense", cards=["KC"]) == "MELD_NOT_ALLOWED"

    def test_a_second_meld_in_one_window(self) -> None:
        state = meld(v_window(), 0, "marriage", "KS QS")
        code = refuse(state, 0, "meld", name="pinochle", cards=["QS", "JD"])
        assert code == "MELD_NOT_ALLOWED"

    def test_a_dix_show_after_the_turns_meld(self) -> None:
        state, _ = begin2(["9H KS QS AC AC AD AD 10C 10D QD QC JD", LOSER], "JH")
        state = meld(win_trick(state, 0, "AC"), 0, "marriage", "KS QS")
        assert refuse(state, 0, "meld", name="dix", cards=["9H"]) == "MELD_NOT_ALLOWED"

    def test_in_phase_2(self) -> None:
        state = drive(v_start(), after_trick(12))
        hand = state.hand
        assert hand is not None and hand.window_seat is not None
        winner = hand.window_seat
        state = send(state, winner, "play", card=first_card(state, winner))  # the final draw
        assert state.hand is not None and state.hand.phase == "play"
        for seat in (0, 1):
            held = hand_of(state, seat)
            for name in ("dix", "marriage", "pinochle"):
                code = refuse(state, seat, "meld", name=name, cards=held[:2])
                assert code == "MELD_NOT_ALLOWED"
        # ... nor after a trick won in phase 2.
        state = v_playoff()
        assert state.hand is not None
        winner = state.hand.tricks[-1].winner
        held = hand_of(state, winner)
        code = refuse(state, winner, "meld", name="marriage", cards=held[:2])
        assert code == "MELD_NOT_ALLOWED"


class TestInvalidMeld:
    @pytest.mark.parametrize(
        ("name", "text"),
        [
            ("flush", "KS QS"),  # unknown name
            ("marriage", "KS QD"),  # wrong cards
            ("marriage", "KS QS JD"),  # an extra card
            ("marriage", "KS"),  # a card short
            ("pinochle", "QS JD QH"),
            ("queens_around", "QS QH QD"),
            ("dix", "9S"),  # not a 9 of trumps
        ],
    )
    def test_cards_and_names(self, name: str, text: str) -> None:
        state, _ = begin2(
            ["9S KS QS JD QH QD QC AC AC AD AD 10C", LOSER.replace("9S 9S", "9H 9S")], "JH"
        )
        state = win_trick(state, 0, "AC")
        assert refuse(state, 0, "meld", name=name, cards=text.split()) == "INVALID_MELD"

    def test_trump_king_queen_named_marriage(self) -> None:
        state, _ = begin2([TestRunAndRoyalMarriage.HAND, LOSER], "JH")
        state = win_trick(state, 0, "AC")
        assert refuse(state, 0, "meld", name="marriage", cards=["KH", "QH"]) == "INVALID_MELD"
        code = refuse(state, 0, "meld", name="royal_marriage", cards=["KD", "QD"])
        assert code == "CARD_NOT_IN_HAND"
        state = meld(state, 0, "royal_marriage", "KH QH")
        assert state.hand is not None and state.hand.meld_points == (40, 0)


class TestOtherMeldCodes:
    def test_miscount(self) -> None:
        state = v_window()
        code = refuse(state, 0, "meld", name="marriage", cards=["KS", "QS"], points=40)
        assert code == "MELD_MISCOUNT"
        state = meld(state, 0, "marriage", "KS QS", points=20)
        assert state.hand is not None and state.hand.meld_points == (20, 0)

    def test_miscount_comes_after_the_card_rules(self) -> None:
        state = meld(v_window(), 0, "marriage", "KS QS")
        state = win_trick(state, 0, "AC")
        code = refuse(state, 0, "meld", name="marriage", cards=["KS", "QS"], points=99)
        assert code == "MELD_NEEDS_NEW_CARD"

    def test_miscount_uses_meld_values(self) -> None:
        state = v_window({"meld_values": {"marriage": [25, 50]}})
        code = refuse(state, 0, "meld", name="marriage", cards=["KS", "QS"], points=20)
        assert code == "MELD_MISCOUNT"
        state = meld(state, 0, "marriage", "KS QS", points=25)
        assert state.hand is not None and state.hand.meld_points == (25, 0)

    def test_meld_with_a_card_not_held(self) -> None:
        state = v_window()
        assert refuse(state, 0, "meld", name="marriage", cards=["KD", "QD"]) == "CARD_NOT_IN_HAND"
        # ... before INVALID_MELD (A.5 order).
        assert refuse(state, 0, "meld", name="flush", cards=["KD", "QD"]) == "CARD_NOT_IN_HAND"
        # A dix is shown from the concealed hand only.
        assert refuse(state, 0, "meld", name="dix", cards=["9H"]) == "CARD_NOT_IN_HAND"

    def test_meld_with_an_opponents_table_card(self) -> None:
        state = v_seat1_window()
        # Seat 1 leads; seat 0 takes the trick with a trump and melds using seat 1's KC: no.
        state = send(state, 1, "play", card="9S")
        state = send(state, 0, "play", card="QH")
        assert state.hand is not None and state.hand.window_seat == 0
        code = refuse(state, 0, "meld", name="marriage", cards=["KC", "QC"])
        assert code == "CARD_NOT_IN_HAND"

    @pytest.mark.parametrize(
        "data",
        [
            {"type": "meld", "cards": ["KS", "QS"]},
            {"type": "meld", "cards": ["KS", "QS"], "points": 20},
            {
                "type": "meld",
                "name": "marriage",
                "cards": ["KS", "QS"],
                "melds": [{"name": "marriage", "cards": ["KS", "QS"]}],
            },
            {"type": "meld", "cards": [], "melds": []},
            {"type": "meld", "name": 7, "cards": ["KS", "QS"]},
            {"type": "meld", "name": "marriage"},
            {"type": "meld", "name": "marriage", "cards": ["KS", "XX"]},
            {"type": "draw"},
            {"type": "draw", "turn_up": "yes"},
            {"type": "exchange_dix", "card": "9H"},
            {"type": "play", "card": "QS", "name": "marriage"},
        ],
    )
    def test_malformed(self, data: dict[str, object]) -> None:
        # Malformed first, whoever sends it and whatever the phase (A.5).
        for state in (v_start(), v_window()):
            for seat in (0, 1):
                before = snapshot(state)
                with pytest.raises(IllegalAction) as info:
                    apply(state, seat, decode_action(data))
                assert info.value.code == "MALFORMED_ACTION" and state == before


class TestDixExchangeNotAllowed:
    # Seat 0 holds one 9 of trumps; seat 1 the other.
    HAND = "9H QH KS QS AC AC AD AD 10C 10D JD QD"
    OTHER = "9H 9S 9S 9C 9C 9D 9D JS JS JC JC KC"

    def window(self, turn_up: str = "KH") -> GameState:
        state, _ = begin2([self.HAND, self.OTHER], turn_up)
        return win_trick(state, 0, "AC")

    def test_allowed(self) -> None:
        state, events = send_events(self.window(), 0, "exchange_dix")
        assert [e.data for e in events if e.kind == "dix_exchanged"] == [
            {"seat": 0, "took": "KH", "gave": "9H", "points": 10}
        ]
        hand = state.hand
        assert hand is not None and hand.meld_points == (10, 0)
        assert format_card(hand.turn_up or 0) == "9H" and "KH" in hand_of(state, 0)
        assert "9H" not in hand_of(state, 0)

    def test_not_the_winner(self) -> None:
        assert refuse(self.window(), 1, "exchange_dix") == "DIX_EXCHANGE_NOT_ALLOWED"

    def test_no_nine_of_trumps(self) -> None:
        state, _ = begin2([SEED_HAND, LOSER], "KH")
        state = win_trick(state, 0, "AC")
        assert refuse(state, 0, "exchange_dix") == "DIX_EXCHANGE_NOT_ALLOWED"

    def test_a_nine_on_the_table_does_not_count(self) -> None:
        state = meld(self.window(), 0, "dix", "9H")
        assert refuse(state, 0, "exchange_dix") == "DIX_EXCHANGE_NOT_ALLOWED"

    def test_a_second_exchange(self) -> None:
        state, _ = begin2(["9H 9H KS QS AC AC AD AD 10C 10D JD QD", LOSER], "KH")
        state = send(win_trick(state, 0, "AC"), 0, "exchange_dix")
        assert refuse(state, 0, "exchange_dix") == "DIX_EXCHANGE_NOT_ALLOWED"
        state = win_trick(state, 0, "AC")
        assert "9H" in hand_of(state, 0)
        assert refuse(state, 0, "exchange_dix") == "DIX_EXCHANGE_NOT_ALLOWED"
        # The other 9 may still be shown.
        state = meld(state, 0, "dix", "9H")
        assert state.hand is not None and state.hand.meld_points == (20, 0)

    def test_after_the_turns_meld(self) -> None:
        state = meld(self.window(), 0, "marriage", "KS QS")
        assert refuse(state, 0, "exchange_dix") == "DIX_EXCHANGE_NOT_ALLOWED"

    def test_the_turned_card_is_a_nine(self) -> None:
        state, events = begin2([self.HAND, LOSER], "9H")
        assert [e.data for e in events if e.kind == "dix_turned"] == [
            {"seat": 1, "card": "9H", "points": 10}
        ]
        state = win_trick(state, 0, "AC")
        assert refuse(state, 0, "exchange_dix") == "DIX_EXCHANGE_NOT_ALLOWED"

    def test_before_the_first_trick_mid_trick_and_in_phase_2(self) -> None:
        state, _ = begin2([self.HAND, self.OTHER], "KH")
        assert refuse(state, 0, "exchange_dix") == "DIX_EXCHANGE_NOT_ALLOWED"
        state = send(state, 0, "play", card="AC")
        assert refuse(state, 0, "exchange_dix") == "DIX_EXCHANGE_NOT_ALLOWED"
        assert refuse(state, 1, "exchange_dix") == "DIX_EXCHANGE_NOT_ALLOWED"
        state = drive(state, in_playoff)
        assert state.hand is not None
        for seat in (0, 1):
            assert refuse(state, seat, "exchange_dix") == "DIX_EXCHANGE_NOT_ALLOWED"


class TestPlayCodes:
    def test_a_card_neither_in_hand_nor_on_the_table(self) -> None:
        state = v_start()
        assert refuse(state, 0, "play", card="9S") == "CARD_NOT_IN_HAND"
        state = meld(win_trick(state, 0, "AC"), 0, "marriage", "KS QS")
        # The draws at this lead give seat 0 the stock's top card, not a 9S.
        assert refuse(state, 0, "play", card="9S") == "CARD_NOT_IN_HAND"

    def test_an_opponents_melded_card(self) -> None:
        state = v_seat1_window()
        state = send(state, 1, "play", card="9S")
        assert "KC" not in hand_of(state, 0)
        assert refuse(state, 0, "play", card="KC") == "CARD_NOT_IN_HAND"
        state = send(state, 0, "play", card="QH")  # seat 0 trumps and leads next
        assert refuse(state, 0, "play", card="QC") == "CARD_NOT_IN_HAND"

    def test_own_melded_cards_may_be_played_in_phase_1(self) -> None:
        state = meld(v_window(), 0, "marriage", "KS QS")
        assert "KS" not in hand_of(state, 0)
        state = send(state, 0, "play", card="KS")
        assert table_of(state, 0) == ["QS"]
        state = send(state, 1, "play", card="QC")  # seat 1 may also play anything
        assert state.hand is not None and len(state.hand.tricks) == 2

    def test_a_card_in_hand_and_on_the_table_is_played_from_the_hand(self) -> None:
        state, _ = begin2(["KS KS QS AC AC AD AD 10C 10D JD QD QC", LOSER], "JH")
        state = meld(win_trick(state, 0, "AC"), 0, "marriage", "KS QS")
        state = send(state, 0, "play", card="KS")
        assert table_of(state, 0) == ["KS", "QS"] and "KS" not in hand_of(state, 0)

    def test_phase_2_plays_only_from_the_hand(self) -> None:
        state = v_playoff()
        hand = state.hand
        assert hand is not None and hand.table == ((), ())
        seat = hand.turn
        missing = next(format_card(c) for c in range(24) if c not in hand.hands[seat])
        assert refuse(state, seat, "play", card=missing) == "CARD_NOT_IN_HAND"


OTHER_TYPES: list[dict[str, object]] = [
    {"type": "bid", "amount": 250},
    {"type": "pass"},
    {"type": "bid_or_redeal"},
    {"type": "declare_trump", "suit": "H"},
    {"type": "pass_cards", "cards": ["AC"]},
    {"type": "discard", "cards": ["AC"]},
    {"type": "concede"},
]


class TestTurnAndPhase:
    """A.8 item 3: other variants' actions get NOT_YOUR_TURN when another seat must play, else
    WRONG_PHASE; A.9 item 7: draw outside ``last_draw: winner_chooses`` is WRONG_PHASE."""

    @pytest.mark.parametrize("data", OTHER_TYPES, ids=[str(d["type"]) for d in OTHER_TYPES])
    def test_other_variants_actions(self, data: dict[str, object]) -> None:
        positions = {
            "start": v_start(),
            "window": v_window(),
            "mid-trick": send(v_window(), 0, "play", card="AD"),
            "playoff": v_playoff(),
        }
        for name, state in positions.items():
            hand = state.hand
            assert hand is not None
            for seat in (0, 1):
                before = snapshot(state)
                with pytest.raises(IllegalAction) as info:
                    apply(state, seat, decode_action(data))
                assert state == before
                expected = "WRONG_PHASE" if seat == hand.turn else "NOT_YOUR_TURN"
                assert info.value.code == expected, (name, seat)

    def test_playing_out_of_turn(self) -> None:
        assert refuse(v_start(), 1, "play", card="9S") == "NOT_YOUR_TURN"
        assert refuse(v_window(), 1, "play", card="9S") == "NOT_YOUR_TURN"
        state = send(v_window(), 0, "play", card="AD")
        assert refuse(state, 0, "play", card="AC") == "NOT_YOUR_TURN"

    def test_draw_under_winner_facedown(self) -> None:
        state = drive(v_start(), after_trick(12))
        hand = state.hand
        assert hand is not None and len(hand.stock) == 1
        winner = hand.window_seat
        assert winner is not None
        assert refuse(state, winner, "draw", turn_up=True) == "WRONG_PHASE"
        assert refuse(state, winner, "draw", turn_up=False) == "WRONG_PHASE"
        assert refuse(state, 1 - winner, "draw", turn_up=True) == "NOT_YOUR_TURN"
        assert refuse(v_window(), 0, "draw", turn_up=True) == "WRONG_PHASE"
        assert not [e for e in legal_actions(state, winner) if e["type"] == "draw"]

    def test_draw_under_winner_chooses_outside_its_moment(self) -> None:
        options: dict[str, object] = {"last_draw": "winner_chooses"}
        assert refuse(v_window(options), 0, "draw", turn_up=True) == "WRONG_PHASE"
        state = drive(v_start(options), after_trick(12))
        hand = state.hand
        assert hand is not None
        winner = hand.window_seat
        assert winner is not None
        assert refuse(state, 1 - winner, "draw", turn_up=True) == "NOT_YOUR_TURN"
        state = send(state, winner, "draw", turn_up=True)
        assert refuse(state, winner, "draw", turn_up=False) == "WRONG_PHASE"
        state = drive(state, after_trick(13))
        assert state.hand is not None
        assert refuse(state, state.hand.turn, "draw", turn_up=True) == "WRONG_PHASE"

    def test_draw_is_listed_only_in_the_trick_12_window(self) -> None:
        """A.8 item 2 / A.10 item 2: ``draw`` is an action only of the winner of trick 12 (the
        last two stock cards); an earlier window under ``winner_chooses`` lists no draw."""
        options: dict[str, object] = {"last_draw": "winner_chooses"}
        assert not [e for e in legal_actions(v_window(options), 0) if e["type"] == "draw"]
        state = drive(v_start(options), after_trick(12))
        hand = state.hand
        assert hand is not None and hand.window_seat is not None
        draws = [e for e in legal_actions(state, hand.window_seat) if e["type"] == "draw"]
        assert draws == [{"type": "draw", "turn_up": True}, {"type": "draw", "turn_up": False}]

    def test_game_over(self) -> None:
        rules = resolve_options("two-handed", {"target": 100})
        state = new_game(rules, 1)
        state, _ = start_hand(state, deal2([SEED_HAND, LOSER_WITH_MARRIAGE], "JH"))
        state = drive(state, hand_over)
        assert state.over and state.winner is not None
        for data in ({"type": "play", "card": "AC"}, {"type": "exchange_dix"}):
            before = snapshot(state)
            with pytest.raises(IllegalAction) as info:
                apply(state, 0, decode_action(data))
            assert info.value.code == "GAME_OVER" and state == before


def find_follow(
    state: GameState, code: str, lead_suit: str | None = None
) -> tuple[GameState, str] | None:
    """From a phase-2 position, step through the play-off until the leader has a lead after
    which the follower has a card refused with ``code``; return (position after the lead, card),
    or None if the hand ends first. ``lead_suit``: "trump" or "plain" restricts the leads."""
    while state.hand is not None and state.hand.phase == "play":
        hand = state.hand
        assert not hand.trick
        leader = hand.turn
        for lead in sorted(set(hand.hands[leader])):
            if lead_suit is not None and (lead // 6 == hand.trump) != (lead_suit == "trump"):
                continue
            led = send(state, leader, "play", card=format_card(lead))
            led_hand = led.hand
            if led_hand is None:
                continue
            for card in sorted(set(led_hand.hands[1 - leader])):
                data = {"type": "play", "card": format_card(card)}
                try:
                    apply(led, 1 - leader, decode_action(data))
                except IllegalAction as error:
                    if error.code == code:
                        return led, format_card(card)
        state = drive(state, trick_done_or_hand_over(len(hand.tricks) + 1))
    return None


class TestPlayOff:
    """§2.4: follow suit, win if able, trump if void (SEED2); Hoyle heads only on trump leads."""

    @pytest.mark.parametrize("code", ["MUST_FOLLOW_SUIT", "MUST_HEAD_TRICK", "MUST_TRUMP"])
    def test_ladder_codes(self, code: str) -> None:
        found = find_follow(v_playoff(), code)
        assert found is not None
        state, card = found
        hand = state.hand
        assert hand is not None
        follower = 1 - hand.trick_leader
        assert refuse(state, follower, "play", card=card) == code
        led = hand.trick[0]
        held = hand.hands[follower]
        legal = _playable(state, follower)
        if code == "MUST_FOLLOW_SUIT":
            assert all(c // 6 == led // 6 for c in legal)
        elif code == "MUST_HEAD_TRICK":
            assert all(c // 6 == led // 6 and c % 6 < led % 6 for c in legal)
        else:
            assert not any(c // 6 == led // 6 for c in held)
            assert all(c // 6 == hand.trump for c in legal)

    def test_phase_1_has_no_ladder(self) -> None:
        """§2.2 item 2: free play while the stock lasts."""
        state = send(v_start(), 0, "play", card="AD")  # seat 1 holds diamonds and no trump
        assert sorted(_playable(state, 1)) == sorted(set(cards(LOSER_WITH_MARRIAGE)))
        state = send(state, 1, "play", card="KC")  # neither following nor heading
        assert state.hand is not None and state.hand.tricks[-1].winner == 0

    def test_hoyle_no_duty_to_head_a_plain_lead(self) -> None:
        start = v_playoff(HOYLE)
        assert find_follow(start, "MUST_HEAD_TRICK", "plain") is None
        # ... but following suit is still required, and heading on a trump lead.
        assert find_follow(start, "MUST_FOLLOW_SUIT", "plain") is not None
        found = find_follow(start, "MUST_HEAD_TRICK", "trump")
        assert found is not None
        state, card = found
        hand = state.hand
        assert hand is not None
        assert refuse(state, 1 - hand.trick_leader, "play", card=card) == "MUST_HEAD_TRICK"

    def test_default_heads_a_plain_lead(self) -> None:
        found = find_follow(v_playoff(), "MUST_HEAD_TRICK", "plain")
        assert found is not None
        state, _ = found
        hand = state.hand
        assert hand is not None and hand.trick[0] // 6 != hand.trump


# --------------------------------------------------------------------------------------------
# Flow of a hand (§2.1-§2.5, §10.2, A.8 items 2, 8, 9)


def events_of(events: Sequence[Event], kind: str) -> list[tuple[object, dict[str, object]]]:
    return [(e.audience, dict(e.data)) for e in events if e.kind == kind]


class TestDeal:
    def test_twelve_each_a_stock_of_23_and_a_turned_card(self) -> None:
        rules = resolve_options("two-handed", {})
        deal = seeded_deal("deal", deck_size=48, players=2, hand_size=12, dealer=0, two_handed=True)
        state, events = start_hand(new_game(rules, 0), deal)
        hand = state.hand
        assert hand is not None and deal.turn_up is not None
        assert [len(h) for h in hand.hands] == [12, 12]
        assert len(hand.stock) == 23 and hand.stock == deal.stock
        assert hand.turn_up == deal.turn_up and hand.trump == deal.turn_up // 6
        assert hand.phase == "stock_play" and hand.table == ((), ())
        assert events_of(events, "trump_turned") == [
            ("everyone", {"card": format_card(deal.turn_up), "suit": format_card(deal.turn_up)[-1]})
        ]
        seen = view(state, 0)["hand"]
        assert isinstance(seen, dict)
        assert seen["stock_size"] == 23 and seen["turn_up"] == format_card(deal.turn_up)
        assert seen["hand_sizes"] == [12, 12]

    @pytest.mark.parametrize("dealer", [0, 1])
    def test_the_non_dealer_leads(self, dealer: int) -> None:
        state, _ = begin2([SEED_HAND, LOSER], "JH", dealer=dealer)
        assert state.hand is not None and state.hand.turn == 1 - dealer
        held = "9S" if dealer == 1 else "AC"  # a card the dealer holds
        assert refuse(state, dealer, "play", card=held) == "NOT_YOUR_TURN"
        send(state, 1 - dealer, "play", card="9S" if dealer == 0 else "AC")

    @pytest.mark.parametrize("dealer", [0, 1])
    def test_the_dealer_scores_a_turned_nine(self, dealer: int) -> None:
        state, events = begin2([SEED_HAND, LOSER], "9H", dealer=dealer)
        hand = state.hand
        assert hand is not None
        expected = [0, 0]
        expected[dealer] = 10
        assert list(hand.meld_points) == expected
        assert events_of(events, "dix_turned") == [
            ("everyone", {"seat": dealer, "card": "9H", "points": 10})
        ]
        progress = hand_progress(state.setup, hand)
        assert progress["meld"] == expected and progress["delta"] == expected
        assert events_of(begin2([SEED_HAND, LOSER], "10H")[1], "dix_turned") == []


class TestWindow:
    HAND = "9H 9H QH KS QS AC AC AD AD 10C JD QD"

    def window(self, options: dict[str, object] | None = None) -> GameState:
        state, _ = begin2([self.HAND, LOSER], "KH", "", options)
        return win_trick(state, 0, "AC")

    def test_dix_show_exchange_then_one_meld(self) -> None:
        state = meld(self.window(), 0, "dix", "9H")  # a show does not use the turn's meld
        state = send(state, 0, "exchange_dix")
        # The turned KH, now in the hand, is meldable in the same window.
        state = meld(state, 0, "royal_marriage", "KH QH")
        hand = state.hand
        assert hand is not None and hand.meld_points == (60, 0) and hand.window_melded
        assert refuse(state, 0, "meld", name="marriage", cards=["KS", "QS"]) == "MELD_NOT_ALLOWED"
        assert table_of(state, 0) == ["KH", "QH", "9H"]

    def test_exchange_then_show(self) -> None:
        state = send(self.window(), 0, "exchange_dix")
        state = meld(state, 0, "dix", "9H")
        state = meld(state, 0, "marriage", "KS QS")
        assert state.hand is not None and state.hand.meld_points == (40, 0)

    def test_legal_actions_in_the_window(self) -> None:
        state = self.window()
        listed = legal_actions(state, 0)
        kinds = {str(e["type"]) for e in listed}
        assert kinds == {"exchange_dix", "meld", "play"}
        melds = {
            (e["name"], tuple(cast(list[str], e["cards"]))) for e in listed if e["type"] == "meld"
        }
        assert melds == {("dix", ("9H",)), ("marriage", ("KS", "QS")), ("pinochle", ("QS", "JD"))}
        assert legal_actions(state, 1) == []
        state = meld(state, 0, "marriage", "KS QS")
        assert {str(e["type"]) for e in legal_actions(state, 0)} == {"play"}

    def test_the_window_closes_at_the_lead(self) -> None:
        state = send(self.window(), 0, "play", card="AD")
        assert state.hand is not None and state.hand.window_seat is None
        assert refuse(state, 0, "exchange_dix") == "DIX_EXCHANGE_NOT_ALLOWED"


class TestDraws:
    def test_the_draws_happen_at_the_winners_next_lead_winner_first(self) -> None:
        state, _ = begin2([SEED_HAND, LOSER], "JH", "AS 10S")
        state = meld(win_trick(state, 0, "AC"), 0, "marriage", "KS QS")
        hand = state.hand
        assert hand is not None and len(hand.stock) == 23
        assert [len(h) for h in hand.hands] == [9, 11] and len(table_of(state, 0)) == 2
        assert "AS" not in hand_of(state, 0)
        # The lead may be the card just drawn.
        state, events = send_events(state, 0, "play", card="AS")
        assert events_of(events, "card_drawn") == [(0, {"card": "AS"}), (1, {"card": "10S"})]
        assert events_of(events, "cards_drawn") == [("everyone", {"first": 0, "stock": 21})]
        assert [e.kind for e in events] == [
            "card_drawn",
            "card_drawn",
            "cards_drawn",
            "card_played",
        ]
        hand = state.hand
        assert hand is not None and len(hand.stock) == 21 and "10S" in hand_of(state, 1)
        assert len(hand.hands[0]) + len(hand.table[0]) == 11  # 12 less the lead

    def test_the_winner_draws_first_when_it_is_the_dealer(self) -> None:
        state = v_seat1_window()  # seat 1, the dealer, won trick 1
        hand = state.hand
        assert hand is not None
        top, second = format_cards(hand.stock[:2])
        state, events = send_events(state, 1, "play", card=top)
        assert events_of(events, "card_drawn") == [(1, {"card": top}), (0, {"card": second})]

    def test_a_refused_lead_draws_nothing(self) -> None:
        state, _ = begin2([SEED_HAND, LOSER], "JH", "AS 10S")
        state = win_trick(state, 0, "AC")
        assert refuse(state, 0, "play", card="10S") == "CARD_NOT_IN_HAND"  # seat 1's draw
        assert refuse(state, 0, "play", card="9D") == "CARD_NOT_IN_HAND"

    def last_draw(
        self, options: dict[str, object] | None = None, exchange: bool = False
    ) -> tuple[GameState, int, str, str]:
        """After trick 12 (seat 0 melded K-Q of spades on trick 1): (state, winner, face-down
        card, turned card)."""
        hand_0 = TestDixExchangeNotAllowed.HAND
        state, _ = begin2([hand_0, LOSER], "KH", "", options)
        state = win_trick(state, 0, "AC")
        if exchange:
            state = send(state, 0, "exchange_dix")
        state = meld(state, 0, "marriage", "KS QS")
        state = drive(state, after_trick(12))
        hand = state.hand
        assert hand is not None and hand.window_seat is not None and hand.turn_up is not None
        assert len(hand.stock) == 1
        return state, hand.window_seat, format_card(hand.stock[0]), format_card(hand.turn_up)

    @pytest.mark.parametrize("exchange", [False, True])
    def test_the_winner_takes_the_face_down_card_the_loser_the_turned_card(
        self, exchange: bool
    ) -> None:
        state, winner, face_down, turned = self.last_draw(exchange=exchange)
        assert turned == ("9H" if exchange else "KH")
        loser = 1 - winner
        assert state.hand is not None
        table = [table_of(state, 0), table_of(state, 1)]
        assert "KS" in table[0] or "QS" in table[0]
        before = [hand_of(state, s) for s in (0, 1)]
        # The winner may still meld first (any meld it has); then the lead makes the draw.
        state, events = send_events(state, winner, "play", card=face_down)
        assert events_of(events, "card_drawn") == [(winner, {"card": face_down})]
        assert events_of(events, "turn_up_taken") == [("everyone", {"seat": loser, "card": turned})]
        hand = state.hand
        assert hand is not None and hand.phase == "play"
        assert hand.stock == () and hand.turn_up is None
        assert hand.table == ((), ()) and hand.pending == ((), ())
        # Melded cards are back in the hands: 12 each, less the winner's lead of trick 13.
        assert sorted(hand_of(state, loser)) == sorted([*before[loser], *table[loser], turned])
        assert sorted([*hand_of(state, winner), face_down]) == sorted(
            [*before[winner], *table[winner], face_down]
        )
        assert [len(h) for h in hand.hands] == [11 if s == winner else 12 for s in (0, 1)]
        assert hand.trick_leader == winner and hand.trick == (parse_card(face_down),)

    @pytest.mark.parametrize("turn_up", [True, False])
    def test_winner_chooses(self, turn_up: bool) -> None:
        options: dict[str, object] = {"last_draw": "winner_chooses"}
        state, winner, face_down, turned = self.last_draw(options)
        listed = legal_actions(state, winner)
        assert {"type": "draw", "turn_up": True} in listed
        assert {"type": "draw", "turn_up": False} in listed
        assert not [e for e in legal_actions(state, 1 - winner) if e["type"] == "draw"]
        state = send(state, winner, "draw", turn_up=turn_up)
        assert not [e for e in legal_actions(state, winner) if e["type"] == "draw"]
        takes, gives = (turned, face_down) if turn_up else (face_down, turned)
        assert {"type": "play", "drawn_card": True} in legal_actions(state, winner)
        state, events = send_events(state, winner, "play", card=takes)
        loser = 1 - winner
        assert events_of(events, "turn_up_taken") == [
            ("everyone", {"seat": winner if turn_up else loser, "card": turned})
        ]
        assert events_of(events, "card_drawn") == [
            (loser if turn_up else winner, {"card": face_down})
        ]
        assert gives in hand_of(state, loser)

    def test_winner_chooses_without_a_choice_is_the_default(self) -> None:
        state, winner, face_down, turned = self.last_draw({"last_draw": "winner_chooses"})
        state = send(state, winner, "play", card=face_down)
        assert turned in hand_of(state, 1 - winner)

    def test_trick_13_is_led_by_the_winner_of_trick_12(self) -> None:
        state, winner, _, _ = self.last_draw()
        assert refuse(state, 1 - winner, "play", card=hand_of(state, 1 - winner)[0]) == (
            "NOT_YOUR_TURN"
        )
        state = drive(state, after_trick(13))
        assert state.hand is not None and state.hand.tricks[12].leader == winner


class TestScoring:
    def play_hand(self, options: dict[str, object] | None = None) -> tuple[GameState, list[Event]]:
        state, _ = begin2([SEED_HAND, LOSER], "JH", SEED_STOCK, options)
        state = meld(win_trick(state, 0, "AC"), 0, "marriage", "KS QS")
        events: list[Event] = []
        for _ in range(60):
            if state.hand is None:
                return state, events
            seat = state.hand.turn
            state, more = send_events(state, seat, "play", card=first_card(state, seat))
            events += more
        raise AssertionError("the hand did not end")

    @pytest.mark.parametrize("scheme", [None, "classic_11", "modern10"])
    def test_points_last_trick_and_delta(self, scheme: str | None) -> None:
        options: dict[str, object] = {} if scheme is None else {"count_scheme": scheme}
        state, events = self.play_hand(options)
        [(_, result)] = events_of(events, "hand_result")
        [(_, bonus)] = events_of(events, "last_trick_bonus")
        tricks = events_of(events, "trick_taken")
        assert len(tricks) == 23  # the first was before ``events`` started
        assert bonus == {"seat": tricks[-1][1]["seat"], "points": 10}
        assert sum(cast(list[int], result["points"])) == 250
        meld_points = result["meld"]
        assert isinstance(meld_points, list) and meld_points[0] >= 20
        points = result["points"]
        assert isinstance(points, list)
        assert result["delta"] == [m + p for m, p in zip(meld_points, points, strict=True)]
        assert list(state.scores) == result["delta"] == result["scores"]
        assert state.next_dealer == 0  # the deal alternates

    def test_simple_10_5_values(self) -> None:
        """SEED2: A and 10 count 10, K and Q 5, J and 9 nothing."""
        state = send(v_start(), 0, "play", card="AC")
        state, events = send_events(state, 1, "play", card="KC")
        assert events_of(events, "trick_taken")[0][1]["points"] == 15


def game_end(options: dict[str, object], start_scores: tuple[int, int]) -> GameState:
    """One hand (no melds, first cards) played from ``start_scores``."""
    rules = resolve_options("two-handed", options)
    state = new_game(rules, 1)._replace(scores=start_scores)
    state, _ = start_hand(state, deal2([SEED_HAND, LOSER_WITH_MARRIAGE], "JH"))
    return drive(state, hand_over)


class TestGameEnd:
    """§2.5, A.8 item 9: to 1000, checked at the end of a hand; both over: higher total
    (``higher_total``, equal totals play on) or the target raised by 250 (``extend_250``)."""

    def deltas(self) -> tuple[int, int]:
        state = game_end({}, (0, 0))
        a, b = state.scores
        assert a != b
        return a, b

    def test_nobody_reaches(self) -> None:
        state = game_end({}, (0, 0))
        assert not state.over and state.winner is None and state.target == 1000

    @pytest.mark.parametrize("both_reach", ["higher_total", "extend_250"])
    def test_exactly_one_reaches(self, both_reach: str) -> None:
        a, b = self.deltas()
        state = game_end({"both_reach": both_reach}, (1000 - a, 990 - b))
        assert state.over and state.winner == 0 and state.scores == (1000, 990)

    def test_higher_total(self) -> None:
        a, b = self.deltas()
        state = game_end({}, (1000 - a + 5, 1000 - b + 30))
        assert state.over and state.winner == 1
        state = game_end({}, (1000 - a + 20, 1000 - b + 20))
        assert not state.over and state.winner is None and state.scores == (1020, 1020)

    def test_extend_250(self) -> None:
        a, b = self.deltas()
        options: dict[str, object] = {"both_reach": "extend_250"}
        state = game_end(options, (1000 - a + 100, 1000 - b + 200))
        assert not state.over and state.target == 1250 and state.scores == (1100, 1200)
        state = game_end(options, (1000 - a + 300, 1000 - b + 200))
        assert state.over and state.winner == 0 and state.target == 1250
        state = game_end(options, (1000 - a + 550, 1000 - b + 260))
        assert state.over and state.winner == 0 and state.target == 1500
        # Raised until at most one reaches it: none at 1500 plays on.
        state = game_end(options, (1000 - a + 300, 1000 - b + 260))
        assert not state.over and state.target == 1500

    def test_every_view_shows_the_raised_target(self) -> None:
        """OPTIONS.md ``both_reach: extend_250``: the target in force is public game state, so
        every role's view reports the raised target, not the option's starting value."""
        a, b = self.deltas()
        state = game_end({"both_reach": "extend_250"}, (1000 - a + 100, 1000 - b + 200))
        assert state.target == 1250
        for role in (0, 1, SPECTATOR, "adjudicator"):
            assert view(state, role)["target"] == 1250


class TestDixScoresWhenPlayed:
    """A.8 item 8: a 9 of trumps that has not scored scores 10 for the seat that plays it, in
    either phase; each dix scores at most once, so a complete hand has exactly 20 dix points."""

    HAND = TestDixExchangeNotAllowed.HAND  # one 9H; seat 1 holds the other

    def test_an_unscored_nine_played_scores(self) -> None:
        state, _ = begin2([self.HAND, TestDixExchangeNotAllowed.OTHER], "KH")
        state, events = send_events(state, 0, "play", card="9H")
        assert events_of(events, "dix_played") == [("everyone", {"seat": 0, "points": 10})]
        assert state.hand is not None and state.hand.meld_points == (10, 0)
        state, events = send_events(state, 1, "play", card="9H")
        assert events_of(events, "dix_played") == [("everyone", {"seat": 1, "points": 10})]
        assert state.hand is not None and state.hand.meld_points == (10, 10)

    def test_off(self) -> None:
        options: dict[str, object] = {"dix_scores_when_played": False}
        state, _ = begin2([self.HAND, TestDixExchangeNotAllowed.OTHER], "KH", "", options)
        state, events = send_events(state, 0, "play", card="9H")
        assert events_of(events, "dix_played") == []
        assert state.hand is not None and state.hand.meld_points == (0, 0)

    def test_a_shown_dix_played_from_the_table_does_not_score_again(self) -> None:
        state, _ = begin2([self.HAND, LOSER], "KH")
        state = meld(win_trick(state, 0, "AC"), 0, "dix", "9H")
        state, events = send_events(state, 0, "play", card="9H")
        assert events_of(events, "dix_played") == []
        assert state.hand is not None and state.hand.meld_points == (10, 0)

    @pytest.mark.parametrize(
        ("turn_up", "exchange", "show"),
        [("KH", False, False), ("KH", True, False), ("KH", False, True), ("9H", False, False)],
    )
    def test_twenty_dix_points_per_hand(self, turn_up: str, exchange: bool, show: bool) -> None:
        """Whoever ends up holding the exchanged, turned or shown 9 (phase 2 included), the two
        nines score 10 each, once."""
        other = LOSER if turn_up == "9H" else TestDixExchangeNotAllowed.OTHER
        state, first = begin2([self.HAND, other], turn_up)
        state = win_trick(state, 0, "AC")
        if exchange:
            state = send(state, 0, "exchange_dix")
        if show:
            state = meld(state, 0, "dix", "9H")
        events: list[Event] = []
        while state.hand is not None:
            seat = state.hand.turn
            state, more = send_events(state, seat, "play", card=first_card(state, seat))
            events += more
        dix = sum(int(d["points"]) for _, d in events_of(first, "dix_turned"))  # type: ignore[call-overload]
        dix += 10 * (exchange + show)
        dix += sum(int(d["points"]) for _, d in events_of(events, "dix_played"))  # type: ignore[call-overload]
        assert dix == 20


# --------------------------------------------------------------------------------------------
# Views (A.10 item 3)


class TestViews:
    def position(self) -> GameState:
        """Seat 0 has melded K-Q of spades and exchanged the dix, then a pinochle; seat 1 to
        see it."""
        state, _ = begin2([TestDixExchangeNotAllowed.HAND, LOSER], "KH", "AS 10S 10H")
        state = win_trick(state, 0, "AC")
        state = send(state, 0, "exchange_dix")
        state = meld(state, 0, "marriage", "KS QS")
        state = win_trick(state, 0, "AC")
        return meld(state, 0, "pinochle", "QS JD")

    def test_the_opponent_sees_the_table_and_the_scores(self) -> None:
        state = self.position()
        hand = state.hand
        assert hand is not None
        for role in (1, SPECTATOR):
            seen = view(state, role)["hand"]
            assert isinstance(seen, dict)
            assert seen["table"] == [["KS", "QS", "JD"], []]
            assert seen["turn_up"] == "9H" and seen["trump"] == "H"
            assert seen["stock_size"] == 21
            assert seen["hand_sizes"] == [len(hand.hands[0]), len(hand.hands[1])] == [8, 11]
            assert seen["meld_points"] == [70, 0]
            assert seen["scored_melds"] == [
                {"seat": 0, "name": "marriage", "cards": ["KS", "QS"], "points": 20},
                {"seat": 0, "name": "pinochle", "cards": ["QS", "JD"], "points": 40},
            ]
            assert "stock" not in seen and "hands" not in seen and "deal" not in seen
            if role == 1:
                assert seen["cards"] == hand_of(state, 1)
            else:
                assert "cards" not in seen
        judge = view(state, ADJUDICATOR)["hand"]
        assert isinstance(judge, dict)
        assert judge["stock"] == format_cards(hand.stock)
        assert judge["hands"] == [hand_of(state, 0), hand_of(state, 1)]

    def test_legal_actions_never_show_the_card_about_to_be_drawn(self) -> None:
        """In the winner's window the lead may be the card it will draw (A.8 item 2); the
        legal actions stand for it with a descriptor and never name a stock card."""
        state = self.position()
        hand = state.hand
        assert hand is not None and hand.window_seat == 0
        entries = legal_actions(state, 0)
        assert {"type": "play", "drawn_card": True} in entries
        held = set(hand_of(state, 0)) | set(table_of(state, 0))
        named = {str(e["card"]) for e in entries if e["type"] == "play" and "card" in e}
        assert named <= held
        top = format_cards(hand.stock[:1])[0]
        if top not in held:
            assert top not in named

    def test_a_drawn_card_is_seen_by_the_drawer_only(self) -> None:
        state = self.position()
        state, events = send_events(state, 0, "play", card="AD")
        drawn = [e for e in events if e.kind == "card_drawn"]
        assert (drawn[0].audience, drawn[0].data["card"]) == (0, "10H")
        assert [e.audience for e in drawn] == [0, 1]
        for event in drawn:
            seat = event.audience
            assert isinstance(seat, int)
            assert visible_to(event, seat) and not visible_to(event, 1 - seat)
            assert not visible_to(event, SPECTATOR) and visible_to(event, ADJUDICATOR)
        public = [e.kind for e in events if e.audience == EVERYONE]
        assert public == ["cards_drawn", "card_played"]

    def test_at_the_last_draw_only_the_turned_card_is_shown(self) -> None:
        state, winner, face_down, turned = TestDraws().last_draw()
        lead = hand_of(state, winner)[0]
        _, events = send_events(state, winner, "play", card=lead)
        assert [(e.audience, e.data) for e in events if e.kind == "card_drawn"] == [
            (winner, {"card": face_down})
        ]
        public = [e for e in events if e.audience == EVERYONE]
        assert [e.kind for e in public] == ["turn_up_taken", "stock_exhausted", "card_played"]
        assert public[0].data == {"seat": 1 - winner, "card": turned}
        assert public[1].data == {"hand_sizes": [12, 12]}


# --------------------------------------------------------------------------------------------
# Random legal games (hypothesis): invariants on every state

CARD_TEXT = re.compile(r"(?:A|10|K|Q|J|9)[SHDC]")
TYPE_BITS = {name: 1 << i for i, name in enumerate(MELD_NAMES)}
CLASS_A_RANK = {"marriage": 1, "royal_marriage": 2, "run": 3}


def _card_texts(obj: object) -> Iterator[str]:
    if isinstance(obj, str):
        yield from CARD_TEXT.findall(obj)
    elif isinstance(obj, Mapping):
        for key, value in obj.items():
            yield from _card_texts(key)
            yield from _card_texts(value)
    elif isinstance(obj, list | tuple):
        for item in obj:
            yield from _card_texts(item)


@st.composite
def two_handed_options(draw: st.DrawFn) -> dict[str, Any]:
    options: dict[str, Any] = {"target": draw(st.sampled_from([300, 500, 700]))}
    choices: dict[str, st.SearchStrategy[Any]] = {
        "new_card_required": st.booleans(),
        "deferred_meld_scoring": st.booleans(),
        "dix_scores_when_played": st.booleans(),
        "last_draw": st.sampled_from(["winner_facedown", "winner_chooses"]),
        "head_rule": st.sampled_from(["always", "trump_lead_only", "never"]),
        "must_trump_when_void": st.booleans(),
        "count_scheme": st.sampled_from(["simple_10_5", "classic_11", "modern10"]),
        "both_reach": st.sampled_from(["higher_total", "extend_250"]),
        "meld_values": st.sampled_from(
            [{"pinochle": [50]}, {"dix": [20], "run": [200, 400]}, {"queens_around": [70]}]
        ),
    }
    for name, values in choices.items():
        if draw(st.booleans()):
            options[name] = draw(values)
    if draw(st.integers(0, 3)) == 0:
        options |= HOYLE
    return options


def choose(state: GameState, rng: random.Random) -> tuple[int, dict[str, object]]:
    """A legal action of either seat: a meld, exchange or draw more often than a play, and
    mostly a play from the concealed hand, so melded cards stay on the table to meld again."""
    # The window's {"play", "drawn_card"} descriptor stands for a card not yet known: skip it.
    entries = [
        (seat, e) for seat in (0, 1) for e in legal_actions(state, seat) if not e.get("drawn_card")
    ]
    assert entries, "nobody can act"
    others = [(seat, e) for seat, e in entries if e["type"] != "play"]
    hand = state.hand
    assert hand is not None
    concealed = [
        (seat, e)
        for seat, e in entries
        if e["type"] == "play" and parse_card(e["card"]) in hand.hands[seat]
    ]
    roll = rng.random()
    if others and roll < 0.6:
        entries = others
    elif concealed and roll < 0.9:
        entries = concealed
    seat, entry = entries[min(int(rng.random() * len(entries)), len(entries) - 1)]
    action = dict(entry)
    if action["type"] == "meld" and rng.random() < 0.5:
        action.pop("points", None)
    return seat, action


@dataclasses.dataclass
class Ledger:
    """One hand's meld and dix points per seat, rebuilt from the events."""

    dix: list[int] = dataclasses.field(default_factory=lambda: [0, 0])
    meld: list[int] = dataclasses.field(default_factory=lambda: [0, 0])


def public_faces(hand: HandState) -> set[str]:
    faces = set(hand.trick) | {c for t in hand.tricks for c in t.cards}
    faces |= {pid >> 1 for side in hand.table for pid, _ in side}
    faces |= {c for _, _, shown, _ in hand.scored_melds for c in shown}
    for turned in (hand.turn_up, hand.deal.turn_up):
        if turned is not None:
            faces.add(turned)
    return set(format_cards(faces))


def check_counts(state: GameState) -> None:
    """Card conservation, hand + table sizes (12 after each draw of phase 1) and the stock."""
    hand = state.hand
    if hand is None:
        return
    deck: list[Card] = [c for h in hand.hands for c in h]
    deck += [pid >> 1 for side in hand.table for pid, _ in side]
    deck += list(hand.stock) + list(hand.trick) + [c for t in hand.tricks for c in t.cards]
    if hand.turn_up is not None:
        deck.append(hand.turn_up)
    assert sorted(deck) == list(canonical_deck(48))
    in_trick = {(hand.trick_leader + i) % 2 for i in range(len(hand.trick))}
    done = len(hand.tricks)
    if hand.phase == "stock_play":
        assert done <= 12 and hand.stock and hand.turn_up is not None
        # Before the draws (the window) each seat holds 11; after them 12, less the lead.
        base = 11 if hand.window_seat is not None else 12
        for seat in (0, 1):
            held = len(hand.hands[seat]) + len(hand.table[seat])
            assert held == base - (seat in in_trick), (seat, held, base)
        draws = max(0, done - (hand.window_seat is not None))
        assert len(hand.stock) == 23 - 2 * draws
        assert (len(hand.stock) == 1) == (done == 12 or (done == 11 and bool(hand.trick)))
        for seat in (0, 1):
            pids = [pid for pid, _ in hand.table[seat]]
            assert len(pids) == len(set(pids))
            assert all(pid in pids for _, group in hand.pending[seat] for pid in group)
    else:
        assert hand.phase == "play" and done >= 12
        assert hand.stock == () and hand.turn_up is None and hand.table == ((), ())
        assert hand.pending == ((), ())
        for seat in (0, 1):
            assert len(hand.hands[seat]) == 24 - done - (seat in in_trick)


def check_melds(before: GameState, after: GameState, events: Sequence[Event]) -> None:
    """R4/R5 per physical table card: a scored meld adds its type's bit to each of its cards,
    never a bit already there, and in class A only above every class-A bit there; R3/R6: a meld
    without a new card is the claim of a pending meld (or the new-card rule is off)."""
    old, new = before.hand, after.hand
    assert old is not None
    scored = [e.data for e in events if e.kind == "meld_scored"]
    if new is None or new.phase != "stock_play" or old.phase != "stock_play":
        assert not scored
        return
    rules = after.rules
    for seat in (0, 1):
        was = dict(old.table[seat])
        now = dict(new.table[seat])
        changed = sorted(pid for pid in now if pid in was and now[pid] != was[pid])
        added = sorted(pid for pid in now if pid not in was)
        mine = [m for m in scored if m["seat"] == seat]
        if not mine:
            assert not changed and not added
            continue
        [data] = mine
        name = str(data["name"])
        bit = TYPE_BITS[name]
        assert data["points"] == after.setup.meld_table.value(name, 1)
        shown = cast(list[str], data["cards"])
        assert sorted(format_cards(p >> 1 for p in changed + added)) == sorted(shown)
        assert all(now[p] == bit for p in added)
        for pid in changed:
            assert now[pid] == was[pid] | bit and not was[pid] & bit, (name, was[pid])
            if CLASS_OF[name] == "A":  # only upward within class A: marriage < royal < run
                assert name != "dix"
                for other, rank in CLASS_A_RANK.items():
                    if was[pid] & TYPE_BITS[other]:
                        assert rank < CLASS_A_RANK[name], (name, other)
                assert not was[pid] & TYPE_BITS["dix"]
        if name == "dix":
            assert len(added) == 1 and not changed
        if not added:
            assert data["claimed_pending"] or not rules.new_card_required
        if data["claimed_pending"]:
            assert not added and (name, tuple(changed)) in old.pending[seat]
            assert rules.deferred_meld_scoring


def check_views(state: GameState) -> None:
    """Nobody but the adjudicator sees a concealed card or the stock; a seat's view is the
    spectator's plus its own cards."""
    hand = state.hand
    spectator = view(state, SPECTATOR)
    assert json.loads(json.dumps(spectator)) == spectator
    if hand is None:
        return
    public = public_faces(hand)
    shown = spectator["hand"]
    assert isinstance(shown, dict)
    assert not {"cards", "hands", "stock", "deal"} & set(shown)
    assert set(_card_texts(spectator)) <= public
    assert shown["stock_size"] == len(hand.stock)
    assert shown["table"] == [format_cards(sorted(p >> 1 for p, _ in side)) for side in hand.table]
    assert shown["meld_points"] == list(hand.meld_points)
    for seat in (0, 1):
        seen = view(state, seat)
        own = seen["hand"]
        assert isinstance(own, dict)
        assert own["cards"] == format_cards(hand.hands[seat])
        assert set(own) - set(shown) == {"cards", "received"}
        assert {k: v for k, v in own.items() if k not in ("cards", "received")} == shown
        assert set(_card_texts(seen)) <= public | set(format_cards(hand.hands[seat]))


def check_events(before: GameState, after: GameState, events: Sequence[Event]) -> None:
    """Seat events go to the drawer (its dealt or drawn cards); public events show only cards
    that are public afterwards (or were: the turned card); the deal is sealed."""
    old = before.hand
    assert old is not None
    new = after.hand if after.hand is not None and after.hand.number == old.number else None
    public = public_faces(old) | (public_faces(new) if new is not None else set())
    ended = False
    for event in events:
        if event.kind in ("hand_result", "deal_revealed", "game_over"):
            ended = True
        if ended or event.kind in ("hand_started", "cards_dealt", "deal"):
            continue  # the next hand's deal, or the revealed one
        if isinstance(event.audience, int):
            assert event.kind == "card_drawn"
            seat = event.audience
            card = str(event.data["card"])
            assert new is not None
            assert card in format_cards(new.hands[seat]) or parse_card(card) in new.trick
        else:
            assert event.audience == EVERYONE, event
            leaked = set(_card_texts(event.to_json())) - public
            assert not leaked, (event.kind, leaked)


def account(ledger: Ledger, state: GameState, events: Sequence[Event]) -> Ledger:
    """Add ``events`` to the hand's ledger (a new one at each deal); check each hand's result."""
    dix_value = state.setup.meld_table.value("dix", 1)
    for event in events:
        data = event.data
        kind = event.kind
        if kind == "hand_started":
            ledger = Ledger()
        elif kind == "hand_result":
            check_result(state, data, ledger)
        if kind not in ("dix_turned", "dix_exchanged", "dix_played", "meld_scored"):
            continue
        seat = data["seat"]
        points = data["points"]
        assert isinstance(seat, int) and isinstance(points, int)
        ledger.meld[seat] += points
        if kind != "meld_scored" or data["name"] == "dix":
            assert points == dix_value  # each dix scores its value once
            ledger.dix[seat] += points
    assert sum(ledger.dix) <= 2 * dix_value
    return ledger


def run_game(
    options: dict[str, Any], seed: int, rng_seed: int, max_actions: int = 700
) -> tuple[Game, list[dict[str, object]]]:
    """A random legal game, every state and event checked; returns it and the actions taken."""
    rules = resolve_options("two-handed", options)
    game = Game(rules, dealer=seed % 2, deals=SeededDeals(f"two-handed-{seed}"))
    rng = random.Random(rng_seed)
    ledger = account(Ledger(), game.state, game.events)
    taken: list[dict[str, object]] = []
    check_counts(game.state)
    check_views(game.state)
    for _ in range(max_actions):
        before = game.state
        if before.over:
            break
        seat, action = choose(before, rng)
        events = game.act(seat, decode_action(action))
        taken.append({"seat": seat, **action})
        after = game.state
        split = next((i for i, e in enumerate(events) if e.kind == "hand_started"), len(events))
        ledger = account(ledger, after, events)
        if after.hand is not None:
            assert list(after.hand.meld_points) == ledger.meld
        check_counts(after)
        check_melds(before, after, events[:split])
        check_views(after)
        check_events(before, after, events)
    return game, taken


def check_result(state: GameState, data: Mapping[str, object], ledger: Ledger) -> None:
    points = data["points"]
    meld_points = data["meld"]
    assert isinstance(points, list) and isinstance(meld_points, list)
    assert sum(points) == 250  # §1.6: every scheme of two-handed totals 250 with the last trick
    assert meld_points == ledger.meld
    assert data["delta"] == [m + p for m, p in zip(meld_points, points, strict=True)]
    dix_value = state.setup.meld_table.value("dix", 1)
    if state.rules.dix_scores_when_played:
        assert sum(ledger.dix) == 2 * dix_value  # A.8 item 8: exactly 20 by default
    else:
        assert sum(ledger.dix) <= 2 * dix_value


SEEDS = st.integers(min_value=0, max_value=10**6)


class TestRandomGames:
    @given(two_handed_options(), SEEDS, SEEDS)
    @settings(max_examples=120, deadline=None)
    def test_invariants(self, options: dict[str, Any], seed: int, rng_seed: int) -> None:
        game, taken = run_game(options, seed, rng_seed)
        state = game.state
        # Replay equals the live state.
        assert replay(state.rules, state.first_dealer, game.log) == state
        # The export audits as legal, with the same scores.
        record = json.loads(json.dumps(game.export()))
        assert [a for h in record["hands"] for a in h["actions"]] == taken
        verdict = audit_record(record, "random")
        assert verdict["legal"] is True, verdict["violation"]
        scores = list(state.scores)
        if state.hand is not None:  # A.9 item 8: the melds of the hand in progress count
            scores = [a + b for a, b in zip(scores, state.hand.meld_points, strict=True)]
        assert verdict["scores"] == scores
        assert verdict["winner"] == state.winner and verdict["finished"] is state.over
        record["claimed"] = {"scores": scores, "winner": state.winner}
        assert audit_record(record)["claims"] == []

    @given(two_handed_options(), SEEDS, SEEDS)
    @settings(max_examples=30, deadline=None)
    def test_legal_actions_are_accepted_and_match(
        self, options: dict[str, Any], seed: int, rng_seed: int
    ) -> None:
        """A.10 item 2: every listed action is accepted and matches its entry; near misses
        (a listed meld with a wrong points claim, another seat) are refused."""
        rules = resolve_options("two-handed", options)
        game = Game(rules, dealer=seed % 2, deals=SeededDeals(f"legal-{seed}"))
        rng = random.Random(rng_seed)
        for _ in range(200):
            state = game.state
            if state.over:
                break
            for seat in (0, 1):
                listed = legal_actions(state, seat)
                for entry in listed:
                    if entry.get("drawn_card"):
                        # Stands for the card about to be drawn: the draw happens inside apply,
                        # so leading that card (whatever it is) is accepted.
                        hand = state.hand
                        assert hand is not None and hand.window_seat == seat
                        last = len(hand.stock) == 1 and hand.draw_choice
                        drawn = hand.turn_up if last else hand.stock[0]
                        assert drawn is not None
                        apply(
                            state, seat, decode_action({"type": "play", "card": format_card(drawn)})
                        )
                        continue
                    apply(state, seat, decode_action(entry))
                    assert matches(entry, dict(entry))
                    if entry["type"] == "meld":
                        wrong = dict(entry, points=int(entry["points"]) + 5)  # type: ignore[call-overload]
                        assert not any(matches(e, wrong) for e in listed)
                        with pytest.raises(IllegalAction):
                            apply(state, seat, decode_action(wrong))
                        shuffled = dict(entry, cards=list(reversed(entry["cards"])))  # type: ignore[call-overload]
                        assert any(matches(e, shuffled) for e in listed)
                        apply(state, seat, decode_action(shuffled))
                        other = legal_actions(state, 1 - seat)
                        assert not any(matches(e, entry) for e in other)
            seat, action = choose(state, rng)
            game.act(seat, decode_action(action))


# --------------------------------------------------------------------------------------------
# Legal actions, replay, export and audit of a scripted hand


def scripted_game(options: dict[str, object] | None = None) -> Game:
    """The deferred-meld example played as a live ``Game``: marriage, jacks around, the
    pending pinochle claimed, then first cards to the end of the hand."""
    rules = resolve_options("two-handed", options or {})
    deal = deal2([TestDeferredMelds.HAND, TestDeferredMelds.OTHER], "KH")
    game = Game(rules, dealer=1, deals=GivenDeals([deal], then=SeededDeals("next")))
    for seat, data in [
        (0, {"type": "play", "card": "AC"}),
        (1, {"type": "play", "card": "9C"}),
        (0, {"type": "meld", "name": "marriage", "cards": ["KS", "QS"], "points": 20}),
        (0, {"type": "play", "card": "AC"}),
        (1, {"type": "play", "card": "9C"}),
        (0, {"type": "meld", "name": "jacks_around", "cards": ["JS", "JH", "JD", "JC"]}),
        (0, {"type": "play", "card": "AD"}),
        (1, {"type": "play", "card": "9D"}),
        (0, {"type": "meld", "name": "pinochle", "cards": ["QS", "JD"]}),
    ]:
        game.act(seat, decode_action(data))
    return game


class TestRecords:
    def test_meld_entries_are_concrete_with_their_value(self) -> None:
        state = win_trick(TestDeferredMelds().jacks_laid(), 0, "AD")
        entry = {"type": "meld", "name": "pinochle", "cards": ["QS", "JD"], "points": 40}
        listed = legal_actions(state, 0)
        assert entry in listed
        assert matches(entry, {"type": "meld", "name": "pinochle", "cards": ["JD", "QS"]})
        assert matches(entry, dict(entry))
        assert not matches(entry, dict(entry, points=60))
        assert not matches(entry, dict(entry, name="marriage"))
        assert not matches(entry, dict(entry, cards=["QS"]))

    def test_an_unfinished_record_audits_with_the_melds_so_far(self) -> None:
        """A.8 item 9, A.9 item 8: the hand in progress reports its meld and points so far,
        delta = meld, and the verdict's scores include that meld; a true scores claim holds."""
        game = scripted_game()
        record = json.loads(json.dumps(game.export()))
        verdict = audit_record(record, "scripted")
        assert verdict["legal"] is True and verdict["finished"] is False
        assert verdict["hands"] == [
            {
                "dealer": 1,
                "declarer": None,
                "bid": None,
                "trump": "H",
                "conceded": False,
                "hopeless": False,
                "meld": [100, 0],
                "points": [30, 0],
                "delta": [100, 0],
            }
        ]
        assert verdict["scores"] == [100, 0]
        record["claimed"] = {"scores": [100, 0], "winner": None}
        assert audit_record(record)["claims"] == []
        record["claimed"] = {"scores": [0, 0]}
        assert audit_record(record)["claims"] == [
            {"hand": None, "field": "scores", "claimed": [0, 0], "computed": [100, 0]}
        ]

    def test_a_violation_in_a_record(self) -> None:
        record = json.loads(json.dumps(scripted_game().export()))
        actions = record["hands"][0]["actions"]
        actions.append({"seat": 0, "type": "meld", "name": "marriage", "cards": ["KS", "QS"]})
        verdict = audit_record(record)
        assert verdict["legal"] is False
        assert verdict["violation"]["code"] == "MELD_NOT_ALLOWED"  # type: ignore[index]
        assert verdict["violation"]["action"] == 9  # type: ignore[index]

    def test_replay_and_export_of_a_whole_hand(self) -> None:
        game = scripted_game()
        while game.state.hand is not None and game.state.hands_completed == 0:
            seat = game.state.hand.turn
            game.act(seat, decode_action({"type": "play", "card": first_card(game.state, seat)}))
        state = game.state
        assert state.hands_completed == 1
        assert replay(state.rules, state.first_dealer, game.log) == state
        verdict = audit_record(json.loads(json.dumps(game.export())))
        assert verdict["legal"] is True
        hands = verdict["hands"]
        # 100 melded by seat 0; each 9 of trumps scored 10 for the seat that played it.
        assert isinstance(hands, list) and hands[0]["meld"] == [110, 10]
        assert sum(hands[0]["points"]) == 250
        assert state.hand is not None  # the next hand is dealt: its melds so far count
        so_far = [a + b for a, b in zip(state.scores, state.hand.meld_points, strict=True)]
        assert verdict["scores"] == so_far
