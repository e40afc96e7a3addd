"""A second review of two-handed (RULES.md A.8, §2.2-§2.5, §9 SEED2, §10.5) by hand-built deals:
the meld vectors that name a two-handed value (M3, M5, M8 "V1: 80", M9 "V1: 200", M10) and
SEED2's second run (§9 item 2: 150 each, five new cards for the second) played out through
``apply`` with progressive melding, one set per meld, rather than as a rules query.

Trump is hearts throughout; seat 1 (the dealer) holds no heart and no ace, so seat 0's leads win.
"""

from __future__ import annotations

from typing import Any

from referee.engine.events import EVERYONE
from referee.engine.state import GameState
from referee.engine.views import ADJUDICATOR, SPECTATOR, view
from tests.test_two_handed import (
    LOSER,
    begin2,
    meld,
    meld_events,
    refuse,
    send,
    send_events,
    table_of,
    win_trick,
)
from tests.test_two_handed_review import window_12


def hand_view(state: GameState, role: int | str) -> dict[str, Any]:
    hand = view(state, role)["hand"]
    assert isinstance(hand, dict)
    return hand


def meld_points(state: GameState) -> tuple[int, ...]:
    assert state.hand is not None
    return state.hand.meld_points


class TestDoublesScoreTwiceTheSingle:
    """§1.8 / §9 SEED2 item 1: in V1 a "double" is the meld scored a second time with entirely
    new cards (R5), each set at its single value; never the abundance value."""

    def test_m8_two_pinochles_melded_separately_score_80(self) -> None:
        state, _ = begin2(["QS QS JD JD 10H 10H AC AC AD AD KH QH", LOSER], "JH")
        state = win_trick(state, 0, "10H")
        # One set per meld (A.8 item 1): both pinochles shown at once are no combination.
        code = refuse(state, 0, "meld", name="pinochle", cards=["QS", "QS", "JD", "JD"])
        assert code == "INVALID_MELD"
        state, first = send_events(state, 0, "meld", name="pinochle", cards=["QS", "JD"])
        state = win_trick(state, 0, "10H")
        state, second = send_events(state, 0, "meld", name="pinochle", cards=["JD", "QS"])
        assert [(m["points"], m["from_table"]) for m in meld_events(first + second)] == [
            (40, []),
            (40, []),
        ]
        assert meld_points(state) == (80, 0)
        assert table_of(state, 0) == ["QS", "QS", "JD", "JD"]

    def test_m8_a_second_pinochle_with_an_old_card_does_not_score(self) -> None:
        state, _ = begin2(["QS QS JD 10H 10H AC AC AD AD KH QH KS", LOSER], "JH")
        state = win_trick(state, 0, "10H")
        state = meld(state, 0, "pinochle", "QS JD")
        state = win_trick(state, 0, "10H")
        # R5: the only J♦ is the melded one.
        code = refuse(state, 0, "meld", name="pinochle", cards=["QS", "JD"])
        assert code == "MELD_CARD_REUSED"
        assert meld_points(state) == (40, 0)

    def test_m9_all_eight_aces_score_200_in_two_melds(self) -> None:
        state, _ = begin2(["AS AS AH AH AD AD AC AC 10H 10H KH QH", LOSER], "JH")
        state = win_trick(state, 0, "10H")
        code = refuse(
            state,
            0,
            "meld",
            name="aces_around",
            cards=["AS", "AS", "AH", "AH", "AD", "AD", "AC", "AC"],
        )
        assert code == "INVALID_MELD"
        state = meld(state, 0, "aces_around", "AS AH AD AC")
        assert meld_points(state) == (100, 0)
        state = win_trick(state, 0, "10H")
        state = meld(state, 0, "aces_around", "AC AD AH AS")
        assert meld_points(state) == (200, 0)
        assert table_of(state, 0) == ["AS", "AS", "AH", "AH", "AD", "AD", "AC", "AC"]

    def test_m10_seven_aces_make_one_set(self) -> None:
        state, _ = begin2(["AS AS AH AH AD AD AC 10H 10H KH QH KS", LOSER], "JH")
        state = win_trick(state, 0, "10H")
        state = meld(state, 0, "aces_around", "AS AH AD AC")
        state = win_trick(state, 0, "10H")
        # The second set would need the melded A♣ again (R5).
        code = refuse(state, 0, "meld", name="aces_around", cards=["AS", "AH", "AD", "AC"])
        assert code == "MELD_CARD_REUSED"
        assert meld_points(state) == (100, 0)


class TestTwoRuns:
    """§9 SEED2 item 2: no double run in V1; each separately melded run scores 150 and the
    second needs five new cards (300 in all)."""

    HAND = "AH AH 10H 10H KH KH QH QH JH JH AS AS"

    def test_two_runs_of_new_cards_score_300(self) -> None:
        state, _ = begin2([self.HAND, LOSER], "9H")  # the dealer (seat 1) scores the turned 9
        state = win_trick(state, 0, "AS")
        run = ["AH", "10H", "KH", "QH", "JH"]
        code = refuse(state, 0, "meld", name="run", cards=run + run)
        assert code == "INVALID_MELD"
        state, first = send_events(state, 0, "meld", name="run", cards=run)
        state = win_trick(state, 0, "AS")
        state, second = send_events(state, 0, "meld", name="run", cards=run, points=150)
        assert [m["points"] for m in meld_events(first + second)] == [150, 150]
        assert meld_points(state) == (300, 10)

    def test_a_second_run_with_a_card_of_the_first_does_not_score(self) -> None:
        state, _ = begin2([self.HAND, LOSER], "9H")
        state = win_trick(state, 0, "AS")
        state = meld(state, 0, "run", "AH 10H KH QH JH")
        state = win_trick(state, 0, "JH")  # the concealed J♥: only the melded one is left
        code = refuse(state, 0, "meld", name="run", cards=["AH", "10H", "KH", "QH", "JH"])
        assert code == "MELD_CARD_REUSED"
        assert meld_points(state) == (150, 10)


class TestRunBesideItsMarriages:
    """M3 and M5 played out: a run, then a royal marriage of the extra K and Q (190); two dixes
    beside a run (170). The run absorbs its own K-Q (M1, D1)."""

    def test_m3_run_then_the_extra_king_and_queen_score_190(self) -> None:
        state, _ = begin2(["AH 10H KH QH JH KH QH AS AS AC AC AD", LOSER], "9H")
        state = win_trick(state, 0, "AS")
        state = meld(state, 0, "run", "AH 10H KH QH JH")
        state = win_trick(state, 0, "AS")
        state, events = send_events(state, 0, "meld", name="royal_marriage", cards=["QH", "KH"])
        assert [(m["points"], m["from_table"]) for m in meld_events(events)] == [(40, [])]
        assert meld_points(state) == (190, 10)

    def test_m5_two_dixes_beside_a_run_score_170(self) -> None:
        state, _ = begin2(["AH 10H KH QH JH 9H 9H AS AS AC AC AD", LOSER], "KH")
        state = win_trick(state, 0, "AS")
        # Dix shows do not use the turn's meld (A.8 item 2), and the 9 is not part of the run.
        state = meld(state, 0, "dix", "9H")
        state = meld(state, 0, "dix", "9H")
        state = meld(state, 0, "run", "AH 10H KH QH JH")
        assert meld_points(state) == (170, 0)


class TestTheLastDrawChoiceIsInTheView:
    """A.9 item 7 / §2.2 item 7 with ``last_draw: winner_chooses``: the winner's ``draw`` is
    public (its ``draw_chosen`` event goes to everyone) and decides who holds the turned card, so
    every view shows it until the final draw, as a snapshot sent to a watcher or a reconnecting
    client must: without it a seat that missed the event could not tell which card comes next."""

    def test_every_role_sees_the_choice_until_the_draw(self) -> None:
        options: dict[str, object] = {"last_draw": "winner_chooses"}
        state = window_12(("AC AC AD AD 10C 10D QD QC JD KD KS", LOSER[3:]), "AS", "KH", options)
        roles: list[int | str] = [0, 1, SPECTATOR, ADJUDICATOR]
        assert all(hand_view(state, role)["draw_choice"] is None for role in roles)
        state, events = send_events(state, 0, "draw", turn_up=True)
        assert [e.audience for e in events if e.kind == "draw_chosen"] == [EVERYONE]
        assert all(hand_view(state, role)["draw_choice"] is True for role in roles)
        assert hand_view(state, 1)["turn_up"] == "KH" and hand_view(state, 1)["stock_size"] == 1
        state = send(state, 0, "play", card="KH")  # the final draw: the winner took the KH
        assert state.hand is not None and state.hand.phase == "play"
        assert all(hand_view(state, role)["draw_choice"] is None for role in roles)
