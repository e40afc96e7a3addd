"""A review of two-handed specifics against RULES.md (A.8, §2.2-§2.5, §10.4): subtle rules that
had no direct test. Every test here passes: no discrepancy with an unambiguous rule was found.

Some positions are built by replacing fields of a real hand state (``playoff``, ``window_12``):
the engine's handlers only read those fields, so the scenario is exactly the rule under test.
"""

from __future__ import annotations

import pytest

from referee.engine.engine import legal_actions, new_game, start_hand
from referee.engine.state import PLAY, GameState, evolve_hand
from referee.rules.cards import parse_card
from referee.rules.options import resolve_options
from tests.test_two_handed import (
    HOYLE,
    LOSER,
    LOSER_WITH_MARRIAGE,
    SEED_HAND,
    begin2,
    cards,
    deal2,
    drive,
    hand_of,
    hand_over,
    meld,
    refuse,
    send,
    send_events,
    table_of,
    win_trick,
)


def plays(state: GameState, seat: int) -> list[str]:
    return sorted(str(e["card"]) for e in legal_actions(state, seat) if "card" in e)


def playoff(
    hands: tuple[str, str], turn_up: str = "KH", options: dict[str, object] | None = None
) -> GameState:
    """Phase 2 (trump: the suit of ``turn_up``), seat 0 to lead, with the given hands."""
    state, _ = begin2([SEED_HAND, LOSER], turn_up, "", options)
    hand = state.hand
    assert hand is not None
    hand = evolve_hand(
        hand,
        phase=PLAY,
        hands=tuple(tuple(sorted(cards(h))) for h in hands),
        stock=(),
        turn_up=None,
        table=((), ()),
        pending=((), ()),
        turn=0,
        trick_leader=0,
        window_seat=None,
    )
    return state._replace(hand=hand)


def window_12(
    hands: tuple[str, str],
    face_down: str,
    turn_up: str,
    options: dict[str, object] | None = None,
) -> GameState:
    """Seat 0 has just won trick 12 (11 cards each): one face-down card and the turned card
    remain. The hand is dealt with ``turn_up`` so a turned 9 has scored for the dealer (seat 1)."""
    state, _ = begin2([SEED_HAND, LOSER], turn_up, "", options)
    hand = state.hand
    assert hand is not None
    hand = evolve_hand(
        hand,
        hands=tuple(tuple(sorted(cards(h))) for h in hands),
        stock=(parse_card(face_down),),
        turn_up=parse_card(turn_up),
        turn=0,
        trick_leader=0,
        window_seat=0,
        window_melded=False,
    )
    return state._replace(hand=hand)


# --------------------------------------------------------------------------------------------
# §2.4 / §10.4: the play-off ladder, through apply and legal_actions (trump hearts)


@pytest.mark.parametrize(
    ("options", "lead", "follower", "legal", "refused"),
    [
        ({}, "10S", "AS 9S 9H", ["AS"], {"9S": "MUST_HEAD_TRICK", "9H": "MUST_FOLLOW_SUIT"}),  # L12
        ({}, "10S", "9H AD", ["9H"], {"AD": "MUST_TRUMP"}),  # L13
        (HOYLE, "10S", "AS 9S", ["9S", "AS"], {}),  # L14: heads only on trump leads
        ({}, "AS", "AS 9S KC", ["9S", "AS"], {"KC": "MUST_FOLLOW_SUIT"}),  # identical: no head
        ({}, "JH", "AH 9H AS", ["AH"], {"9H": "MUST_HEAD_TRICK", "AS": "MUST_FOLLOW_SUIT"}),
        ({}, "10H", "JH AS", ["JH"], {"AS": "MUST_FOLLOW_SUIT"}),  # trump lead, lower trump
        (HOYLE, "JH", "AH 9H", ["AH"], {"9H": "MUST_HEAD_TRICK"}),  # Hoyle: heads a trump lead
        ({"head_rule": "never"}, "JH", "AH 9H", ["9H", "AH"], {}),
        ({"must_trump_when_void": False}, "10S", "9H AD", ["AD", "9H"], {}),
        ({}, "10S", "AD KC", ["AD", "KC"], {}),  # void in the suit and in trumps: any card
    ],
)
def test_playoff_ladder(
    options: dict[str, object],
    lead: str,
    follower: str,
    legal: list[str],
    refused: dict[str, str],
) -> None:
    """§2.4 (SEED2): "follow suit if able, and win the trick if able ... if void in that suit,
    a trump; if void in both, any card"; §1.3: an identical card never beats; Hoyle
    (``head_rule: trump_lead_only``) heads only a trump lead."""
    state = send(playoff(("10S AS JH 10H KC", follower), options=options), 0, "play", card=lead)
    assert plays(state, 1) == sorted(legal)
    for card, code in refused.items():
        assert refuse(state, 1, "play", card=card) == code
    for card in legal:
        send(state, 1, "play", card=card)


# --------------------------------------------------------------------------------------------
# §2.2 / A.8 item 2: the draws, phase 1


def test_the_follower_may_play_the_card_it_drew_at_the_winners_lead() -> None:
    """A.8 item 2: the draws happen at the winner's lead (winner first), so the loser answers
    that lead already holding its new card; phase 1 is free play (§2.2 item 2)."""
    state, _ = begin2([SEED_HAND, LOSER], "JH", "AS 10H")
    state = win_trick(state, 0, "AC")
    assert "10H" not in hand_of(state, 1)
    state = send(state, 0, "play", card="AS")
    assert "10H" in plays(state, 1)
    state = send(state, 1, "play", card="10H")  # a trump on a spade lead wins in phase 1
    assert state.hand is not None and state.hand.tricks[-1].winner == 1


# --------------------------------------------------------------------------------------------
# A.8 items 2 and 8: the window after trick 12 and the final draw

H0 = "9H QH KS QS AC AC AD AD 10C 10D JD"
H1 = "9S 9S 9C 9C JS JS JC JC KC QC 10S"  # void in diamonds and hearts


def test_trick_12_window_exchange_meld_then_final_draw() -> None:
    """A.8 item 2: after trick 12 the winner still has its window (§2.2 item 7: "who may still
    meld first"); the exchange is allowed while the turned card is there (§2.2 item 6), the
    turned card is meldable at once (A.8 item 8), and the loser then takes "the dix exchanged
    for it". Melded cards return to the hands (12 each), and the play-off ladder applies from
    trick 13 on (§2.4)."""
    state = window_12((H0, H1), "AS", "KH")
    listed = legal_actions(state, 0)
    assert {"type": "exchange_dix"} in listed
    state = send(state, 0, "exchange_dix")
    state = meld(state, 0, "royal_marriage", "KH QH")
    assert table_of(state, 0) == ["KH", "QH"]
    state, events = send_events(state, 0, "play", card="AD")
    taken = [e.data for e in events if e.kind == "turn_up_taken"]
    assert taken == [{"seat": 1, "card": "9H"}]
    hand = state.hand
    assert hand is not None and hand.phase == PLAY
    assert hand.table == ((), ()) and hand.meld_points == (50, 0)
    assert [len(h) for h in hand.hands] == [11, 12]  # seat 0 has led AD
    assert {"KH", "QH", "AS"} <= set(hand_of(state, 0))
    # Trick 13: seat 1 is void in diamonds and holds the 9H: it must trump (MUST_TRUMP) ...
    assert plays(state, 1) == ["9H"]
    assert refuse(state, 1, "play", card="KC") == "MUST_TRUMP"
    # ... and that 9H, scored by the exchange, scores no more when played (A.8 item 8).
    state, events = send_events(state, 1, "play", card="9H")
    assert [e for e in events if e.kind == "dix_played"] == []
    assert state.hand is not None and state.hand.meld_points == (50, 0)


def test_trick_12_window_dix_show_and_meld() -> None:
    """A.8 item 2 at trick 12: a dix show does not use the turn's meld; both then return to
    the hand with the final draw; the shown 9 cannot score again when played (A.8 item 8)."""
    state = window_12((H0, H1), "AS", "KH")
    state = meld(state, 0, "dix", "9H")
    state = meld(state, 0, "marriage", "KS QS")
    state = send(state, 0, "play", card="AS")
    hand = state.hand
    assert hand is not None and hand.meld_points == (30, 0)
    assert "9H" in hand_of(state, 0) and "KH" in hand_of(state, 1)
    state = send(state, 1, "play", card="9S")
    state, events = send_events(state, 0, "play", card="9H")
    assert [e for e in events if e.kind == "dix_played"] == []


@pytest.mark.parametrize("turn_up", [True, False])
def test_winner_chooses_the_dealers_turned_nine(turn_up: bool) -> None:
    """A.8 item 8: "A turned-up 9 scores 10 for the dealer at the deal, counts as scored";
    with ``last_draw: winner_chooses`` whoever takes it scores nothing for playing it, and the
    other 9 scores when played: "a complete hand has exactly 20 dix points"."""
    options: dict[str, object] = {"last_draw": "winner_chooses"}
    state = window_12(
        ("QH KS QS AC AC AD AD 10C 10D JD KD", "9H 9S 9C 9C 9D 9D JS JS JC JC KC"),
        "AS",
        "9H",
        options,
    )
    assert state.hand is not None and state.hand.meld_points == (0, 10)  # the dealer, seat 1
    state = send(state, 0, "draw", turn_up=turn_up)
    state, events = send_events(state, 0, "play", card="9H" if turn_up else "AS")
    assert [e.data for e in events if e.kind == "turn_up_taken"] == [
        {"seat": 0 if turn_up else 1, "card": "9H"}
    ]
    scored: list[object] = []
    while state.hand is not None and state.hand.trick:
        scored += [e.data for e in events if e.kind == "dix_played"]
        seat = state.hand.turn
        state, events = send_events(state, seat, "play", card=plays(state, seat)[0])
    scored += [e.data for e in events if e.kind == "dix_played"]
    # Only seat 1's own (unscored) 9 scores, whoever took the turned one.
    assert scored in ([], [{"seat": 1, "points": 10}])
    state = drive_collect(state, scored)
    assert scored == [{"seat": 1, "points": 10}]


def drive_collect(state: GameState, scored: list[object]) -> GameState:
    """Play the first legal card to the end of the hand, collecting dix_played events."""
    while state.hand is not None:
        seat = state.hand.turn
        state, events = send_events(state, seat, "play", card=plays(state, seat)[0])
        scored += [e.data for e in events if e.kind == "dix_played"]
    return state


# --------------------------------------------------------------------------------------------
# A.9 item 5: every dix path uses the table's dix value


def test_a_dix_value_override_applies_to_every_dix_path() -> None:
    options: dict[str, object] = {"meld_values": {"dix": [20]}}
    state, _ = begin2([SEED_HAND, LOSER], "9H", "", options)
    assert state.hand is not None and state.hand.meld_points == (0, 20)  # turned up
    hand = "9H QH KS QS AC AC AD AD 10C 10D JD QD"
    other = "9H 9S 9S 9C 9C 9D 9D JS JS JC JC KC"
    state, _ = begin2([hand, other], "KH", "", options)
    exchanged = send(win_trick(state, 0, "AC"), 0, "exchange_dix")
    shown = meld(win_trick(state, 0, "AC"), 0, "dix", "9H", points=20)
    played = send(state, 0, "play", card="9H")
    for position in (exchanged, shown, played):
        assert position.hand is not None and position.hand.meld_points == (20, 0)


# --------------------------------------------------------------------------------------------
# A.8 items 5 and 7: copies and re-use per physical card


def test_some_choice_of_copies_makes_the_meld_legal() -> None:
    """A.8 item 5: Q♠ (a) scored in a pinochle, Q♠ (b) in a marriage, both on the table; a
    pinochle with the concealed second J♦ is refused with (a) (R5) but legal with (b)."""
    state, _ = begin2(["KS QS QS JD JD AC AC AD AD 10C 10D KD", LOSER], "KH")
    state = meld(win_trick(state, 0, "AC"), 0, "pinochle", "QS JD")
    state = meld(win_trick(state, 0, "AC"), 0, "marriage", "KS QS")
    assert hand_of(state, 0).count("QS") == 0 and hand_of(state, 0).count("JD") == 1
    state = win_trick(state, 0, "AD")
    state, events = send_events(state, 0, "meld", name="pinochle", cards=["QS", "JD"])
    assert [e.data["points"] for e in events if e.kind == "meld_scored"] == [40]
    assert state.hand is not None and state.hand.meld_points == (100, 0)


def test_two_royal_marriages_then_a_run_from_one_card_of_each() -> None:
    """R4 per physical card (A.8 item 7): K♥ of one royal marriage and Q♥ of the other may both
    rise into a run (royal marriage → run is a strictly higher meld of class A)."""
    state, _ = begin2(["KH KH QH QH AH 10H JH AC AC AD AD 10C", LOSER], "9H")
    state = meld(win_trick(state, 0, "AC"), 0, "royal_marriage", "KH QH")
    state = meld(win_trick(state, 0, "AC"), 0, "royal_marriage", "KH QH")
    assert table_of(state, 0) == ["KH", "KH", "QH", "QH"]
    state = meld(win_trick(state, 0, "AD"), 0, "run", "AH 10H KH QH JH")
    hand = state.hand
    assert hand is not None and hand.meld_points == (230, 10)  # seat 1 dealt the turned 9


def test_kings_around_then_royal_marriage_then_run_reuse_the_same_king() -> None:
    """R4: another class (kings around → royal marriage), then a strictly higher meld of the
    same class (royal marriage → run): 80 + 40 + 150 with one physical K♥ in all three."""
    loser = "9S 9S 9C 9C 9D 9D JS JS JC JC QC QC"
    state, _ = begin2(["KS KH KD KC QH AH 10H JH AC AC AD AD", loser], "9H")
    state = meld(win_trick(state, 0, "AC"), 0, "kings_around", "KS KH KD KC")
    state = meld(win_trick(state, 0, "AC"), 0, "royal_marriage", "KH QH")
    state = meld(win_trick(state, 0, "AD"), 0, "run", "AH 10H KH QH JH")
    hand = state.hand
    assert hand is not None and hand.meld_points == (270, 10)
    # The K♥ has now scored in class A up to the run: a marriage of class A with it is over.
    state = win_trick(state, 0, "AD")
    assert refuse(state, 0, "meld", name="royal_marriage", cards=["KH", "QH"]) in (
        "MELD_NEEDS_NEW_CARD",
        "MELD_CARD_REUSED",
    )


# --------------------------------------------------------------------------------------------
# §2.5 / A.8 item 9: game end only at the end of the hand


def test_melds_reaching_the_target_do_not_end_the_game_mid_hand() -> None:
    """§2.5: "Meld points reach the score mid-hand, but the game is settled only at the end of
    the hand" (declare_out is not supported, A.8 item 9)."""
    rules = resolve_options("two-handed", {"target": 50})
    state, _ = start_hand(new_game(rules, 1), deal2([SEED_HAND, LOSER_WITH_MARRIAGE], "JH"))
    state = meld(win_trick(state, 0, "AC"), 0, "pinochle", "QS JD")
    state = meld(win_trick(state, 0, "AC"), 0, "marriage", "KS QS")
    assert state.hand is not None and state.hand.meld_points == (60, 0)
    assert not state.over and state.winner is None
    state = send(state, 0, "play", card="AD")  # play goes on
    state = drive(state, hand_over)
    assert state.over and state.winner == 0
