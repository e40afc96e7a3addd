"""The README's "Rulings where the specification is silent" and "Two-handed: the SEED2 default
and the Hoyle/Bicycle profile", each bullet held by a test through the engine's public entry
points (``apply``, ``legal_actions``, views, the audit and the query). Every docstring quotes
the bullet (or the part of it) that the test pins."""

from __future__ import annotations

from typing import Any

import pytest

from referee.engine.actions import decode_action
from referee.engine.engine import apply, legal_actions, matches, new_game, start_hand
from referee.engine.events import Event
from referee.engine.game import SeededDeals
from referee.engine.state import BURY, TRUMP, GameState
from referee.engine.views import view
from referee.query import answer_query
from referee.rules.dealing import seeded_deal
from referee.rules.options import OptionError, resolve_options
from tests.test_two_handed import (
    HOYLE,
    LOSER,
    begin2,
    meld,
    send_events,
    win_trick,
)
from tests.test_two_handed import refuse as refuse2
from tests.test_two_handed import send as send2
from tests.test_violations import act, begin, meld_all, refuse, win_auction


def seen(state: GameState, role: int) -> Any:
    """The ``hand`` part of ``role``'s view (JSON-ready data)."""
    return view(state, role)["hand"]


def meld_points(state: GameState, seat: int) -> int:
    """The points of ``seat``'s whole-hand meld (it must have melded)."""
    assert state.hand is not None
    record = state.hand.melds[seat]
    assert record is not None
    return record.points


def seen_data(event: Event) -> Any:
    """An event's data, JSON-like."""
    return dict(event.data)


def entries(state: GameState, seat: int, kind: str) -> list[Any]:
    return [e for e in legal_actions(state, seat) if e["type"] == kind]


# --------------------------------------------------------------------------------------------
# Bidding variants


def _ct_overmelded() -> GameState:
    """Cutthroat, hearts trump: the declarer (seat 1) holds 18 cards, 16 of them in its scored
    combinations (a double run, aces and kings around), and has shown them all."""
    declarer = "AH AH 10H 10H KH KH QH QH JH JH AS AD AC KS KD"
    state = begin("cutthroat", {}, ("", declarer), widow="KC 9S 9D")
    state = win_auction(state, 1)
    state = act(state, 1, "declare_trump", suit="H")
    shown = declarer + " KC"
    return meld_all(state, {1: shown})


def test_a_bury_that_cannot_keep_every_scored_card_may_bury_any_card() -> None:
    """README: "A bury that cannot keep every scored card (cutthroat): when the declarer's
    scored combinations hold so many cards that fewer than three are free, any card may be
    buried; otherwise the declarer would have no legal action"."""
    state = _ct_overmelded()
    assert state.hand is not None and state.hand.phase == BURY
    assert state.hand.melds[1] is not None and state.hand.melds[1].points == 1500 + 100 + 80
    (entry,) = entries(state, 1, "discard")
    assert entry["count"] == 3 and len(entry["from"]) == 18
    state = act(state, 1, "discard", cards=["AH", "KH", "AS"])
    assert state.hand is not None and state.hand.phase == "play"


def test_with_three_free_cards_a_scored_card_cannot_be_buried() -> None:
    """README (same bullet, "otherwise"): with three free cards or more, the kept cards must
    hold every scored card (CANNOT_BURY_MELD), and only the free cards are listed."""
    declarer = "AH AH 10H 10H KH KH QH QH JH JH AS AD AC 9C 9C"
    state = begin("cutthroat", {}, ("", declarer), widow="KC 9S 9D")
    state = win_auction(state, 1)
    state = act(state, 1, "declare_trump", suit="H")
    state = meld_all(state, {1: declarer})
    (entry,) = entries(state, 1, "discard")
    assert sorted(entry["from"]) == sorted(["9S", "9D", "9C", "9C", "KC"])
    assert refuse(state, 1, "discard", cards=["AH", "9S", "9D"]).code == "CANNOT_BURY_MELD"


def test_concession_during_the_bury() -> None:
    """README: "Bury and concession (cutthroat). The concession window opens after the bury
    (A.7 item 4); a declarer's `concede` during the bury is `WRONG_PHASE`, another seat's
    `CONCEDE_NOT_ALLOWED`"; after the bury the declarer may concede."""
    state = _ct_overmelded()
    assert refuse(state, 1, "concede").code == "WRONG_PHASE"
    assert refuse(state, 0, "concede").code == "CONCEDE_NOT_ALLOWED"
    assert refuse(state, 2, "concede").code == "CONCEDE_NOT_ALLOWED"
    assert {"type": "concede"} not in legal_actions(state, 1)
    state = act(state, 1, "discard", cards=["9S", "9D", "KC"])
    assert {"type": "concede"} in legal_actions(state, 1)
    assert apply(state, 1, decode_action({"type": "concede"}))[0].hand is None


def test_no_marriage_declarer_another_seats_concede_is_wrong_phase() -> None:
    """README: "No-marriage declarer. Another seat's `concede` in that trump phase is
    `WRONG_PHASE`" (the declarer's own concede is the only legal action)."""
    aces = "AS AS AS AS AH AH AH AH AD AD AD AD AC AC AC AC"
    state = begin("double-deck", {}, ("", aces + " 10S 10S 10S 10S"))
    state = win_auction(state, 1, 60)
    assert state.hand is not None and state.hand.phase == TRUMP
    for seat in (0, 2, 3):
        assert refuse(state, seat, "concede").code == "WRONG_PHASE"
        assert legal_actions(state, seat) == []
    assert legal_actions(state, 1) == [{"type": "concede"}]


@pytest.mark.parametrize(
    "options",
    [
        {"max_raise": 5},
        {"bid_step": 30},
        {"bid_schedule": [[200, 10], [250, 25]]},
    ],
)
def test_options_that_allow_no_bid_are_refused(options: dict[str, object]) -> None:
    """README: "Options that allow no bid (`max_raise` below the step in force at `min_bid`)
    are refused at creation: a stuck dealer would have no legal action" (partnership:
    max_raise 20)."""
    with pytest.raises(OptionError) as info:
        resolve_options("partnership", options)
    assert info.value.option == "max_raise"


def test_the_step_at_min_bid_equal_to_max_raise_is_accepted() -> None:
    """README (same bullet): only a step *above* max_raise is refused."""
    resolve_options("partnership", {"bid_step": 20})


def test_bid_max_is_the_last_whole_step() -> None:
    """README: "A `bid` entry's `max` is itself a legal bid (A.10 item 2's example): with a
    `max_raise` that is not a multiple of the step (15 by 10s), it is the last whole step (a
    raise of 10)"."""
    state = begin("partnership", {"max_raise": 15})
    (entry,) = [e for e in legal_actions(state, 1) if e["type"] == "bid"]
    assert entry == {"type": "bid", "min": 250, "step": 10, "max": 250}
    state = act(state, 1, "bid", amount=250)
    (entry,) = [e for e in legal_actions(state, 2) if e["type"] == "bid"]
    assert entry == {"type": "bid", "min": 260, "step": 10, "max": 260}
    assert refuse(state, 2, "bid", amount=265).code == "BID_BAD_RAISE"
    assert refuse(state, 2, "bid", amount=270).code == "BID_BAD_RAISE"
    act(state, 2, "bid", amount=260)


def test_meld_descriptor_covers_the_shown_cards_and_claims_are_checked_on_top() -> None:
    """README: "A `meld` descriptor covers the shown cards; a `melds` list or `points` claim is
    checked on top of it"."""
    state = begin("partnership", {"exchange_count": 0}, ("", "AH 10H KH QH JH"))
    state = win_auction(state, 1)
    state = act(state, 1, "declare_trump", suit="H")
    (entry,) = legal_actions(state, 1)
    wrong = {"type": "meld", "cards": ["AH", "10H", "KH", "QH", "JH"], "points": 190}
    assert matches(entry, wrong)
    assert refuse(state, 1, "meld", cards=wrong["cards"], points=190).code == "MELD_MISCOUNT"
    act(state, 1, "meld", cards=wrong["cards"], points=150)


def test_null_optional_fields_are_left_out_and_null_required_fields_are_malformed() -> None:
    """README: "Null fields. An optional action field given as `null` (`help`, a meld's
    `melds`, `points` or `name`) is read as left out; a required one (`cards`, `amount`, ...)
    is `MALFORMED_ACTION`"."""
    state = begin("partnership")
    assert refuse(state, 1, "bid", amount=None).code == "MALFORMED_ACTION"
    after = act(state, 1, "pass", help=None)
    assert after.hand is not None and after.hand.calls[-1].help is False
    state = begin("partnership", {"exchange_count": 0}, ("", "AH 10H KH QH JH"))
    state = win_auction(state, 1)
    state = act(state, 1, "declare_trump", suit="H")
    assert refuse(state, 1, "meld", cards=None).code == "MALFORMED_ACTION"
    shown = ["AH", "10H", "KH", "QH", "JH"]
    done = act(state, 1, "meld", cards=shown, melds=None, points=None, name=None)
    assert done.hand is not None and done.hand.melds[1] is not None
    assert done.hand.melds[1].points == 150


def test_declared_melds_score_exactly_as_declared() -> None:
    """README: "Declared melds score exactly as declared (two separate one-pinochle entries
    score 2 × 40)"."""
    state = begin("partnership", {"exchange_count": 0}, ("", "QS QS JD JD"))
    state = win_auction(state, 1)
    state = act(state, 1, "declare_trump", suit="H")
    shown = ["QS", "QS", "JD", "JD"]
    one = [{"name": "pinochle", "cards": ["QS", "JD"]}] * 2
    assert meld_points(act(state, 1, "meld", cards=shown, melds=one), 1) == 80
    both = [{"name": "pinochle", "cards": shown}]
    assert meld_points(act(state, 1, "meld", cards=shown, melds=both), 1) == 300
    assert meld_points(act(state, 1, "meld", cards=shown), 1) == 300


def test_a_declared_entry_naming_a_card_not_shown_is_invalid_meld() -> None:
    """README: "a declared `melds` entry naming a card that is not among the shown `cards` is
    `INVALID_MELD` (...; `CARD_NOT_IN_HAND` is for the shown cards themselves)"."""
    state = begin("partnership", {"exchange_count": 0}, ("", "QS QS JD JD KH QH"))
    state = win_auction(state, 1)
    state = act(state, 1, "declare_trump", suit="H")
    entries = [{"name": "royal_marriage", "cards": ["KH", "QH"]}]
    assert refuse(state, 1, "meld", cards=["QS", "JD"], melds=entries).code == "INVALID_MELD"
    assert refuse(state, 1, "meld", cards=["KS", "QS"]).code == "CARD_NOT_IN_HAND"


def test_dealers_received_dix_cannot_score() -> None:
    """README: "The dealer's received dix (no-bid exchange) cannot score; a declared dix naming
    it is `INVALID_MELD`"."""
    hands = (
        "AH 9S 9S 9D 9D 9C 9C JS JS JH JD JD",  # dealer (seat 0): AH turned for trump
        "9H AS AS 10S 10S KS KS QS QS JC JC QC",
        "9H AD AD 10D 10D KD KD QD QD KC KC QC",
    )
    state = begin("partnership-no-bid", {}, hands, turn_up="AH")
    state = act(state, 1, "exchange_dix")
    state = act(state, 1, "meld", cards=[])
    state = act(state, 2, "meld", cards=[])
    state = act(state, 3, "meld", cards=[])
    assert state.hand is not None and state.hand.turn == 0 and "9H" in seen(state, 0)["cards"]
    dix = [{"name": "dix", "cards": ["9H"]}]
    assert refuse(state, 0, "meld", cards=["9H"], melds=dix).code == "INVALID_MELD"
    assert meld_points(act(state, 0, "meld", cards=["9H"]), 0) == 0


def test_automatic_meld_shows_only_the_scored_combinations() -> None:
    """README: "Automatic meld (`meld_declaration: auto`) shows each seat's scored
    combinations, not its whole hand: A.10 item 3 makes a meld public, and the rest of a hand
    stays concealed"."""
    state = begin(
        "partnership",
        {"meld_declaration": "auto", "exchange_count": 0},
        ("", "KS QS AH 10H KH QH JH 9C 9C 9D 9D JC"),
    )
    state = win_auction(state, 1)
    state = act(state, 1, "declare_trump", suit="H")
    seat1 = seen(state, 3)["melds"][1]
    assert sorted(seat1["cards"]) == sorted(["KS", "QS", "AH", "10H", "KH", "QH", "JH"])


def test_pass_with_help_outside_partnership() -> None:
    """README: "`allow_pass_with_help` may be set outside partnership (OPTIONS.json allows it):
    a `pass` with `help` is then accepted and shown as a call with help, and means nothing
    more"."""
    state = begin("cutthroat", {"allow_pass_with_help": True})
    assert {"type": "pass", "help": True} in legal_actions(state, 1)
    state, events = apply(state, 1, decode_action({"type": "pass", "help": True}))
    assert [e.data for e in events if e.kind == "call"] == [
        {"seat": 1, "type": "pass", "help": True}
    ]
    assert seen(state, 0)["auction"][-1] == {
        "seat": 1,
        "type": "pass",
        "help": True,
    }


def test_hand_score_query_concession_and_trick_point_save() -> None:
    """README: "on a concession the declaring side's `saved` is false and every other side's
    true"; "a save is judged as Part A's `save_meld` says (card points for `trick_point` ...)"
    (a side with points but no trick saves under `trick_point`, not under `trick`)."""
    conceded = answer_query(
        {
            "kind": "hand_score",
            "bid": 300,
            "declarer": 1,
            "meld": [0, 50, 0, 20],
            "points": [0, 0],
            "tricks": [0, 0],
            "conceded": True,
        }
    )
    assert conceded["saved"] == [True, False] and conceded["delta"] == [0, -300]
    base = {"kind": "hand_score", "bid": 250, "declarer": 0, "meld": [0, 100, 0, 0]}
    points_no_trick = {**base, "points": [240, 10], "tricks": [12, 0]}
    assert answer_query(points_no_trick)["saved"] == [True, True]
    trick_rule = {**points_no_trick, "options": {"save_meld": "trick"}}
    assert answer_query(trick_rule)["saved"] == [True, False]


def test_played_dix_worth_zero_and_turned_dix_worth_zero() -> None:
    """README: "a played 9 of trumps worth 0 (`meld_values: {"dix": [0]}`) gets no
    `dix_played` event, while a turned-up one still gets `dix_turned` with 0 points"."""
    options: dict[str, object] = {"meld_values": {"dix": [0]}}
    state, events = begin2(["9H AS AS 10S 10S KS KS QS QS AD AD 10D", LOSER], "9H", options=options)
    assert [e.data for e in events if e.kind == "dix_turned"] == [
        {"seat": 1, "card": "9H", "points": 0}
    ]
    state, events = begin2(["9H AS AS 10S 10S KS KS QS QS AD AD 10D", LOSER], "AH", options=options)
    state, events = send_events(state, 0, "play", card="9H")
    assert not [e for e in events if e.kind == "dix_played"]


# --------------------------------------------------------------------------------------------
# Two-handed


def test_two_handed_defaults_are_the_seed2_profile() -> None:
    """README: "`two-handed` follows the German seed by default: ... (`deferred_meld_scoring:
    true`), ... (`head_rule: always`), and ... (`dix_scores_when_played: true`)"."""
    rules = resolve_options("two-handed", {})
    assert rules.deferred_meld_scoring is True
    assert rules.head_rule == "always"
    assert rules.dix_scores_when_played is True
    assert rules.new_card_required is True


def test_the_hoyle_profile_is_options_only() -> None:
    """README: "The Hoyle/Bicycle profile is options only: {"new_card_required": true,
    "deferred_meld_scoring": false, "head_rule": "trump_lead_only", "dix_scores_when_played":
    false}"; and a played, never-scored 9 of trumps then scores nothing ("the dix scoring only
    by exchange or show"), while the SEED2 default scores it."""
    hand = "9H AS AS 10S 10S KS KS QS QS AD AD 10D"
    for options, points in ((HOYLE, None), ({}, 10)):
        state, _ = begin2([hand, LOSER], "AH", options=dict(options))
        state, events = send_events(state, 0, "play", card="9H")
        played = [e.data["points"] for e in events if e.kind == "dix_played"]
        assert played == ([] if points is None else [points])


def test_two_handed_meld_out_of_window_naming_a_card_not_held() -> None:
    """README: "A two-handed meld that is both out of its window and names a card not held is
    `CARD_NOT_IN_HAND`: A.5's order puts it first"."""
    state, _ = begin2(["KH QH AS AS 10S 10S KS KS QS QS AD AD", LOSER], "AH")
    assert refuse2(state, 0, "meld", name="royal_marriage", cards=["KH", "QH"]) == (
        "MELD_NOT_ALLOWED"
    )
    assert refuse2(state, 0, "meld", name="marriage", cards=["KD", "QD"]) == "CARD_NOT_IN_HAND"
    assert refuse2(state, 1, "meld", name="marriage", cards=["KD", "QD"]) == "CARD_NOT_IN_HAND"


@pytest.mark.parametrize("last_draw", ["winner_facedown", "winner_chooses"])
def test_two_handed_draw_by_the_seat_not_to_act(last_draw: str) -> None:
    """README: "A two-handed `draw` by the seat not to act is `NOT_YOUR_TURN`, also where
    `last_draw` is not `winner_chooses`: ... A.9 item 7's `WRONG_PHASE` is what the seat to act
    gets"."""
    options: dict[str, object] = {"last_draw": last_draw}
    state, _ = begin2([THE_WINNER, LOSER], "AH", options=options)
    assert refuse2(state, 1, "draw", turn_up=True) == "NOT_YOUR_TURN"
    assert refuse2(state, 0, "draw", turn_up=True) == "WRONG_PHASE"
    state = send2(state, 0, "play", card="AS")
    assert refuse2(state, 0, "draw", turn_up=False) == "NOT_YOUR_TURN"
    assert refuse2(state, 1, "draw", turn_up=False) == "WRONG_PHASE"


THE_WINNER = "KH QH AS AS 10S 10S KS KS QS QS AD AD"


def test_a_nine_played_from_a_hand_holding_a_scored_and_an_unscored_one_scores() -> None:
    """README: "a 9 of trumps played from a hand holding a scored and an unscored one scores
    (the unscored one is taken as played first)"; the other one, scored, then scores nothing.

    Seat 0 holds a 9H and shows the other 9H as a dix after winning a trick; at the end of
    phase 1 the shown (scored) 9H goes back to its hand beside the unscored one."""
    hand0 = "9H 9H AS AS 10S 10S KS KS QS QS AD AD"
    state, _ = begin2([hand0, LOSER], "AH")
    state = win_trick(state, 0, "AS")
    state = meld(state, 0, "dix", "9H")
    leads = ["AS", "10S", "10S", "KS", "KS", "QS", "QS", "AD", "AD"]
    for lead in leads:
        state = win_trick(state, 0, lead)
    events: list[Event] = []
    hand = state.hand
    assert hand is not None
    while hand is not None and hand.phase != "play":
        seat = hand.turn
        plays = [e for e in legal_actions(state, seat) if "card" in e and e["card"] != "9H"]
        state = send2(state, seat, "play", card=plays[0]["card"])
        hand = state.hand
    assert hand is not None and seen(state, 0)["cards"].count("9H") == 2
    while state.hand is not None and state.hand.turn != 0:
        seat = state.hand.turn
        state = send2(state, seat, "play", card=legal_actions(state, seat)[0]["card"])
    state, events = send_events(state, 0, "play", card="9H")
    assert [e.data for e in events if e.kind == "dix_played"] == [{"seat": 0, "points": 10}]


def test_seeded_hands_are_dealt_from_seed_colon_n() -> None:
    """README: "Hand seeds. A seeded game deals hand *n* from `"{seed}:{n}"` with the portable
    shuffle of RULES.md A.10 item 4"."""
    rules = resolve_options("partnership", {})
    for number, dealer in ((0, 0), (3, 3)):
        deal = SeededDeals("demo").next_deal(rules, dealer, number)
        assert deal == seeded_deal(
            f"demo:{number}",
            deck_size=48,
            players=4,
            hand_size=12,
            dealer=dealer,
            two_handed=False,
            dealer_turns_last_card=False,
        )
    state = new_game(rules, 0)
    state, _ = start_hand(state, SeededDeals("demo").next_deal(rules, 0, 0))
    assert state.hand is not None


# --------------------------------------------------------------------------------------------
# Readings found by the independent oracles, and more


def _hearts_meld_turn(options: dict[str, object], held: str) -> GameState:
    state = begin("partnership", {"exchange_count": 0, **options}, ("", held))
    state = win_auction(state, 1)
    return act(state, 1, "declare_trump", suit="H")


def test_roundhouse_bonus_is_added_to_a_declared_list_covering_every_suit() -> None:
    """README: "`roundhouse_bonus` is never declared: it is added to a declared `melds` list,
    as to an automatic meld, when the list's run, royal-marriage and marriage entries cover
    every suit"."""
    held = "KS QS KH QH KD QD KC QC AH 10H JH"
    state = _hearts_meld_turn({"meld_values": {"roundhouse_bonus": [100]}}, held)
    run = {"name": "run", "cards": ["AH", "10H", "KH", "QH", "JH"]}
    marriages = [{"name": "marriage", "cards": [f"K{s}", f"Q{s}"]} for s in "SDC"]
    every = act(state, 1, "meld", cards=held.split(), melds=[run, *marriages]).hand
    assert every is not None and every.melds[1] is not None
    assert every.melds[1].points == 150 + 3 * 20 + 100
    assert [m.name for m in every.melds[1].result.melds][-1] == "roundhouse_bonus"
    short = act(state, 1, "meld", cards=held.split(), melds=[run, *marriages[:2]]).hand
    assert short is not None and short.melds[1] is not None
    assert short.melds[1].points == 150 + 2 * 20
    bonus = {"name": "roundhouse_bonus", "cards": held.split()[:8]}
    assert refuse(state, 1, "meld", cards=held.split(), melds=[bonus]).code == "INVALID_MELD"


def test_levels_not_increasing_a_declared_list_can_score_more_than_the_best_meld() -> None:
    """README: "the automatic meld takes each combination's level from the card counts, so
    with `meld_values` whose levels are not increasing (`pinochle: [300, 40]`) a declared list
    can score more than the automatic meld"."""
    state = _hearts_meld_turn({"meld_values": {"pinochle": [300, 40]}}, "QS QS JD JD")
    shown = ["QS", "QS", "JD", "JD"]
    assert meld_points(act(state, 1, "meld", cards=shown), 1) == 40
    two = [{"name": "pinochle", "cards": ["QS", "JD"]}] * 2
    assert meld_points(act(state, 1, "meld", cards=shown, melds=two), 1) == 600


def test_the_opening_bid_step_under_a_schedule_is_the_step_at_min_bid() -> None:
    """README: "the opening bid's step is the step in force at `min_bid` (A.7 item 3) under a
    step schedule"."""
    state = begin("double-deck", {"bid_schedule": [[50, 1], [60, 5], [100, 10]], "min_bid": 60})
    (entry,) = [e for e in legal_actions(state, 1) if e["type"] == "bid"]
    assert entry == {"type": "bid", "min": 60, "step": 5, "max": None}
    assert refuse(state, 1, "bid", amount=61).code == "BID_BAD_RAISE"
    act(state, 1, "bid", amount=65)


@pytest.mark.parametrize("option", ["run_counts_its_royal_marriage", "run_shares_marriage_cards"])
def test_run_options_in_two_handed_refused_in_a_game_accepted_in_a_query(option: str) -> None:
    """README: "The two run options in two-handed ...: `true` is refused in a two-handed game
    and accepted in a rules query"."""
    with pytest.raises(OptionError) as info:
        resolve_options("two-handed", {option: True})
    assert info.value.option == option and "not supported" in str(info.value)
    answer = answer_query(
        {
            "kind": "meld",
            "variant": "two-handed",
            "options": {option: True},
            "trump": "H",
            "hand": ["AH", "10H", "KH", "QH", "JH", "KH", "QH"],
        }
    )
    assert "error" not in answer and answer["total"] == 230  # 150 + 40 + 40 (A.9 item 1)


def test_discards_count_for_the_declaring_side_at_the_schemes_values() -> None:
    """README: "cards buried or discarded by the declarer count for the declaring side at the
    counting scheme's values, every card the scheme values (so the sides' points add up to the
    total in play)": under `classic_11` buried queens and jacks count too."""
    declarer = "KS QS AH AH 10H 10H KH QH JH 9H AC AC 10C 10C AD"
    state = begin("cutthroat", {"count_scheme": "classic_11"}, ("", declarer), widow="QD JD QC")
    state = win_auction(state, 1)
    state = act(state, 1, "declare_trump", suit="H")
    state = meld_all(state, {1: "KS QS"})
    state = act(state, 1, "discard", cards=["QD", "JD", "QC"])
    events: list[Event] = []
    while state.hand is not None:
        seat = state.hand.turn
        entry = legal_actions(state, seat)[0]
        state, more = apply(state, seat, decode_action({"type": "play", "card": entry["card"]}))
        events += more
    (result,) = [e.data for e in events if e.kind == "hand_result"]
    points = result["points"]
    assert isinstance(points, list) and sum(points) == 2 * (11 + 10 + 4 + 3 + 2) * 4 + 10
    taken = sum(
        int(str(e.data["points"]))
        for e in events
        if e.kind == "trick_taken" and e.data["seat"] == 1
    )
    assert points[1] == taken + 3 + 2 + 3


def test_the_last_trick_event_carries_the_bonus_and_names_it_once() -> None:
    """README: "the last trick's `trick_taken` event carries its points with the last-trick
    bonus, which the `last_trick_bonus` event then names on its own (it is not counted
    twice)"."""
    state = begin("partnership", {"exchange_count": 0, "last_trick_bonus": 7})
    state = win_auction(state, 1)
    state = act(state, 1, "declare_trump", suit="H")
    state = meld_all(state)
    taken: list[dict[str, Any]] = []
    while state.hand is not None:
        seat = state.hand.turn
        card = legal_actions(state, seat)[0]["card"]
        state, events = apply(state, seat, decode_action({"type": "play", "card": card}))
        taken += [dict(e.data) for e in events if e.kind in ("trick_taken", "last_trick_bonus")]
        last = [e for e in events if e.kind == "hand_result"]
    assert taken[-1] == {"seat": taken[-2]["seat"], "points": 7}
    assert (
        taken[-2]["points"]
        == sum({"A": 10, "1": 10, "K": 10}.get(str(c)[0], 0) for c in taken[-2]["cards"]) + 7
    )
    (result,) = [seen_data(e) for e in last]
    total = sum(int(t["points"]) for t in taken if "cards" in t)
    assert sum(result["points"]) == total == 250 - 10 + 7


def test_a_tricks_first_played_copy_wins_by_position() -> None:
    """README: "Copies of a card are one integer in a bidding-variant hand; a trick's
    first-played copy wins by position"."""
    state = begin("partnership", {"exchange_count": 0}, ("10S", "AS 9H", "9S", "AS"))
    state = win_auction(state, 1)
    state = act(state, 1, "declare_trump", suit="H")
    state = meld_all(state)
    state = act(state, 1, "play", card="AS")
    state = act(state, 2, "play", card="9S")
    state = act(state, 3, "play", card="AS")
    state, events = apply(state, 0, decode_action({"type": "play", "card": "10S"}))
    (trick,) = [e.data for e in events if e.kind == "trick_taken"]
    assert trick["seat"] == 1


def test_two_handed_copies_hand_first_and_the_table_copy_no_pending_meld_needs() -> None:
    """README: "Two-handed copies. A meld takes each card from the concealed hand first, then
    the seat's table (A.8 item 5); playing a card held twice on the table plays the copy no
    pending meld needs"."""
    loser = "9S 9S 9C 9C 9D 9D KC KC QC QC AC AC"
    state, _ = begin2(["KS QS QS JS JH JD JD JC AS AS 10S 10S", loser], "AH")
    state = win_trick(state, 0, "AS")
    state = meld(state, 0, "marriage", "KS QS")  # the first QS goes to the table
    state = win_trick(state, 0, "AS")
    state = meld(state, 0, "jacks_around", "JS JH JD JC")  # pending: pinochle QS (table) + JD
    assert state.hand is not None and [p[0] for p in state.hand.pending[0]] == ["pinochle"]
    state = win_trick(state, 0, "10S")
    state, events = send_events(state, 0, "meld", name="pinochle", cards=["QS", "JD"])
    (scored,) = [e.data for e in events if e.kind == "meld_scored"]
    assert scored["from_table"] == [] and scored["claimed_pending"] is False  # hand first
    assert state.hand is not None and "QS" not in seen(state, 0)["cards"]
    state = win_trick(state, 0, "QS")  # one of the two table QS: the one no pending meld needs
    state, events = send_events(state, 0, "meld", name="pinochle", cards=["QS", "JD"])
    (claimed,) = [e.data for e in events if e.kind == "meld_scored"]
    assert claimed["claimed_pending"] is True and claimed["from_table"] == ["QS", "JD"]


def test_save_meld_zero_saves_a_side_that_took_no_trick() -> None:
    """README: "a save is judged as Part A's `save_meld` says (card points for `trick_point`
    and an integer); §10.3's pseudocode also asks for a trick, which differs only for a
    declaring side whose points come from its discards alone, and under `save_meld: 0` for a
    side that took no trick (0 card points is at least 0, so its meld counts)"."""
    query = {
        "kind": "hand_score",
        "options": {"save_meld": 0},
        "bid": 250,
        "declarer": 0,
        "meld": [0, 60, 0, 0],
        "points": [250, 0],
        "tricks": [12, 0],
    }
    assert answer_query(query) == {"delta": [250, 60], "saved": [True, True]}
    assert answer_query({**query, "options": {"save_meld": 1}})["saved"] == [True, False]


def test_a_conceded_cutthroat_hand_saves_every_defender() -> None:
    """README: "on a concession the declaring side's `saved` is false and every other side's
    true" (in a game: the defenders took no trick, and their meld still counts)."""
    declarer = "KS QS AH AH 10H 10H KH QH JH 9H AC AC 10C 10C AD"
    state = begin("cutthroat", {}, ("KD QD", declarer), widow="9D 9D 9C")
    state = win_auction(state, 1)
    state = act(state, 1, "declare_trump", suit="H")
    state = meld_all(state, {1: "KS QS", 0: "KD QD"})
    state = act(state, 1, "discard", cards=["9D", "9D", "9C"])
    state, events = apply(state, 1, decode_action({"type": "concede"}))
    (result,) = [seen_data(e) for e in events if e.kind == "hand_result"]
    assert result["saved"] == [True, False, True]
    assert result["delta"] == [20, -300, 0]


def test_the_hoyle_profile_still_scores_a_turned_up_nine_for_the_dealer() -> None:
    """README (two-handed): under the Hoyle/Bicycle profile "the dix scoring only by exchange
    or show" (a turned-up 9 still scoring for the dealer at the deal, A.8 item 8)."""
    state, events = begin2([THE_WINNER, LOSER], "9H", options=dict(HOYLE))
    assert [e.data for e in events if e.kind == "dix_turned"] == [
        {"seat": 1, "card": "9H", "points": 10}
    ]
    assert state.hand is not None and state.hand.meld_points == (0, 10)
