"""The Python client's typed RulesService methods (``score_meld``, ``legal_plays``,
``trick_winner``, ``score_hand``) against an in-process server: every answer is compared with the
reference engine (``referee.query.answer_query`` on the same query), and a refused query raises
``RefereeError`` with INVALID_ARGUMENT and the BadRequest field.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio
from pinochle_client import HandScore, MeldResult, MeldScore, RefereeError

from referee.query import answer_query
from tests.service_helpers import Served, serving

INVALID = grpc.StatusCode.INVALID_ARGUMENT


@pytest_asyncio.fixture
async def srv(tmp_path: Path) -> AsyncIterator[Served]:
    async with serving(tmp_path) as served:
        yield served


def reference(kind: str, **query: Any) -> dict[str, object]:
    """The reference engine's answer to the same query (never an error here)."""
    answer = answer_query({"kind": kind, **query})
    assert "error" not in answer, answer
    return answer


async def refusal(call: Any) -> RefereeError:
    with pytest.raises(RefereeError) as caught:
        await call
    return caught.value


# ----------------------------------------------------------------------------------------------
# ScoreMeld


async def test_score_meld_is_typed_and_matches_the_reference(srv: Served) -> None:
    result = await srv.client.score_meld("partnership", ["AH", "10H", "KH", "QH", "JH", "9H"], "H")
    assert isinstance(result, MeldResult)
    assert result == MeldResult(
        160,
        [
            MeldScore("run", 1, 150, ["AH", "10H", "KH", "QH", "JH"]),
            MeldScore("dix", 1, 10, ["9H"]),
        ],
    )
    cases: list[dict[str, Any]] = [
        {"variant": "double-deck", "hand": ["AS", "AH", "AD", "AC", "QS", "JD", "KS", "KH", "QH"]},
        {"variant": "two-handed", "hand": ["KS", "QS", "QS", "JD", "JD", "AS", "10S"]},
        {
            "variant": "partnership",
            "hand": ["AH", "10H", "KH", "QH", "JH", "9H"],
            "options": {"run_counts_its_royal_marriage": True},
        },
        {"variant": "cutthroat", "hand": []},
    ]
    for case in cases:
        expected = reference("meld", trump="S", **case)
        got = await srv.client.score_meld(case["variant"], case["hand"], "S", case.get("options"))
        assert asdict(got) == expected, case
    assert await srv.client.score_meld("cutthroat", [], "D") == MeldResult(0, [])


async def test_score_meld_refused(srv: Served) -> None:
    error = await refusal(srv.client.score_meld("partnership", ["AH", "ZZ"], "H"))
    assert error.code == INVALID and error.fields == ["hand[1]"]
    error = await refusal(srv.client.score_meld("partnership", ["AH"], "X"))
    assert error.code == INVALID and error.fields == ["trump"]
    error = await refusal(srv.client.score_meld("partnership", ["AH"], "H", {"target": -1}))
    assert error.code == INVALID and error.fields == ["options.target"]


# ----------------------------------------------------------------------------------------------
# LegalPlays


async def test_legal_plays_matches_the_reference(srv: Served) -> None:
    # The partner sits opposite: its card is trick[1] (here the winning 10).
    hand, trick = ["AS", "9S", "AH", "JD"], ["KS", "10S", "QS"]
    no_head = {"head_over_partner": False}
    cases: list[dict[str, Any]] = [
        {"variant": "partnership", "hand": ["AS", "10S", "KH", "9D", "QC"], "trick": ["QS", "AD"]},
        {"variant": "partnership", "hand": hand, "trick": trick},
        {"variant": "partnership", "hand": hand, "trick": trick, "options": no_head},
        {
            "variant": "partnership",
            "hand": hand,
            "trick": trick,
            "options": no_head,
            "seat_of_partner_in_trick": 1,
        },
        {"variant": "two-handed", "hand": hand, "trick": ["AS"], "phase": "stock"},
        {"variant": "two-handed", "hand": hand, "trick": ["AS"], "phase": "playoff"},
        {"variant": "cutthroat", "hand": hand, "trick": []},
    ]
    for case in cases:
        expected = reference("legal_plays", trump="D", **case)
        got = await srv.client.legal_plays(
            case["variant"],
            case["hand"],
            case["trick"],
            "D",
            case.get("options"),
            phase=case.get("phase"),
            seat_of_partner_in_trick=case.get("seat_of_partner_in_trick"),
        )
        assert got == expected["legal"], case
    # The partner's winning card frees the player from heading it (head_over_partner off).
    assert await srv.client.legal_plays("partnership", hand, trick, "D", no_head) == ["AS"]
    assert await srv.client.legal_plays(
        "partnership", hand, trick, "D", no_head, seat_of_partner_in_trick=1
    ) == ["AS", "9S"]


async def test_legal_plays_refused(srv: Served) -> None:
    error = await refusal(srv.client.legal_plays("partnership", ["AS"], ["QS", "AQ"], "H"))
    assert error.code == INVALID and error.fields == ["trick[1]"]
    error = await refusal(
        srv.client.legal_plays("partnership", ["AS"], ["QS"], "H", seat_of_partner_in_trick=3)
    )
    assert error.code == INVALID and error.fields == ["seat_of_partner_in_trick"]
    # An opponent's card named as the partner's: a position no partnership game reaches.
    error = await refusal(
        srv.client.legal_plays("partnership", ["AS"], ["QS", "KS"], "H", seat_of_partner_in_trick=1)
    )
    assert error.code == INVALID and error.fields == ["seat_of_partner_in_trick"]
    error = await refusal(srv.client.legal_plays("partnership", ["AS"], [], "H", phase="stock"))
    assert error.code == INVALID and error.fields == ["phase"]


# ----------------------------------------------------------------------------------------------
# TrickWinner


async def test_trick_winner_matches_the_reference(srv: Served) -> None:
    assert await srv.client.trick_winner("partnership", ["KS", "AS", "9H", "AS"], "H") == 2
    cases: list[dict[str, Any]] = [
        {"variant": "partnership", "trick": ["KS", "AS", "AS", "10S"], "trump": "D"},
        {"variant": "cutthroat", "trick": ["KS", "AS", "AS"], "trump": "D"},
        {"variant": "two-handed", "trick": ["9C", "QC"], "trump": "C"},
        {"variant": "double-deck", "trick": ["JD"], "trump": "S"},
    ]
    for case in cases:
        expected = reference("trick_winner", **case)
        got = await srv.client.trick_winner(case["variant"], case["trick"], case["trump"])
        assert got == expected["winner"], case


async def test_trick_winner_refused(srv: Served) -> None:
    error = await refusal(srv.client.trick_winner("partnership", [], "H"))
    assert error.code == INVALID and error.fields == ["trick"]
    error = await refusal(srv.client.trick_winner("no-such-variant", ["AS"], "H"))
    assert error.code == INVALID and error.fields == ["variant"]


# ----------------------------------------------------------------------------------------------
# TrickPoints


async def test_trick_points_matches_the_reference(srv: Served) -> None:
    assert await srv.client.trick_points("partnership", ["AS", "10S", "KS", "QS"]) == 30
    cases: list[dict[str, Any]] = [
        {"variant": "partnership", "cards": ["QS", "JS", "9S", "9H"], "last": True},
        {"variant": "two-handed", "cards": ["AS", "KS"], "last": False},
        {"variant": "cutthroat", "cards": ["AS", "10S", "KS"], "last": True},
        {"variant": "double-deck", "cards": ["AS", "KS", "QS", "JS"], "last": True},
        {
            "variant": "partnership",
            "cards": ["AS", "10S", "KS", "QS"],
            "last": True,
            "options": {"count_scheme": "classic_11", "last_trick_bonus": 25},
        },
    ]
    for case in cases:
        expected = reference("trick_points", **case)
        got = await srv.client.trick_points(
            case["variant"], case["cards"], last=case["last"], options=case.get("options")
        )
        assert got == expected["points"], case


async def test_trick_points_refused(srv: Served) -> None:
    error = await refusal(srv.client.trick_points("partnership", ["ZZ"]))
    assert error.code == INVALID and error.fields == ["cards[0]"]
    error = await refusal(srv.client.trick_points("no-such-variant", ["AS"]))
    assert error.code == INVALID and error.fields == ["variant"]
    error = await refusal(
        srv.client.trick_points(
            "partnership", ["AS"], last=True, options={"last_trick_bonus": 2**31 - 1}
        )
    )
    assert error.code == INVALID and error.fields == ["options.last_trick_bonus"]


# ----------------------------------------------------------------------------------------------
# ScoreHand


async def test_score_hand_is_typed_and_matches_the_reference(srv: Served) -> None:
    made = await srv.client.score_hand(
        "partnership",
        bid=250,
        declarer=1,
        meld=[20, 100, 40, 60],
        points=[90, 160],
        tricks=[4, 8],
    )
    assert made == HandScore([150, 320], [True, True])
    cases: list[dict[str, Any]] = [
        {
            "variant": "partnership",
            "bid": 250,
            "declarer": 1,
            "meld": [20, 100, 40, 60],
            "points": [90, 160],
            "tricks": [4, 8],
            "conceded": True,
        },
        {
            "variant": "partnership",
            "bid": 300,
            "declarer": 0,
            "meld": [20, 100, 40, 60],
            "points": [90, 160],
            "tricks": [4, 8],
            "dix": [10, 0, 0, 0],
        },
        {
            "variant": "partnership-no-bid",
            "meld": [20, 100, 40, 60],
            "points": [90, 160],
            "tricks": [4, 0],
        },
        {
            "variant": "cutthroat",
            "bid": 300,
            "declarer": 2,
            "meld": [50, 0, 120],
            "points": [100, 0, 150],
            "tricks": [5, 0, 11],
            "options": {"save_meld": "none"},
        },
        {"variant": "two-handed", "meld": [40, 10], "points": [150, 100], "tricks": [6, 6]},
        # GAME_RECORD.md §3: tricks is optional for two-handed (an empty list is left out).
        {"variant": "two-handed", "meld": [40, 10], "points": [150, 100]},
    ]
    for case in cases:
        expected = reference("hand_score", **case)
        fields = {k: v for k, v in case.items() if k != "variant"}
        got = await srv.client.score_hand(case["variant"], **fields)
        assert asdict(got) == expected, case


async def test_score_hand_refused(srv: Served) -> None:
    error = await refusal(
        srv.client.score_hand(
            "partnership", bid=250, declarer=1, meld=[0, 0, 0], points=[0, 0], tricks=[0, 0]
        )
    )
    assert error.code == INVALID and error.fields == ["meld"]
    # Over gRPC an omitted bid is "no contract"; a declarer without a bid is refused.
    error = await refusal(
        srv.client.score_hand("partnership", declarer=1, meld=[0] * 4, points=[0, 0], tricks=[0, 0])
    )
    assert error.code == INVALID and error.fields == ["bid"]
    error = await refusal(
        srv.client.score_hand(
            "partnership-no-bid", bid=250, declarer=0, meld=[0] * 4, points=[0, 0]
        )
    )
    assert error.code == INVALID and error.fields == ["bid"]
