"""Client mistakes at the edges of the inputs (issue 4's error model): huge or fractional integer
options, figures that would overflow an int32 answer, the BadRequest field of every rules-service
refusal, ListVariants offering exactly what CreateGame accepts, and the log line of a refusal.

Everything goes through a real in-process ``grpc.aio`` server on port 0, as in
``test_service.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio
from google.protobuf import struct_pb2

from protos.pinochle.referee.v1 import referee_pb2 as pb
from referee.query import answer_query
from referee.rules.options import (
    INT_OPTION_MAX,
    INT_OPTION_MIN,
    MELD_VALUE_MAX,
    VARIANT_IDS,
    option_schema,
)
from referee.service.convert import dict_to_struct, struct_to_dict
from referee.service.observability import configure_logging
from referee.service.servicers import MAX_HAND_FIGURE
from tests.service_helpers import (
    ADJUDICATOR_TOKEN,
    Served,
    bearer,
    log_lines,
    new_table,
    refused,
    serving,
    stream_refused,
)

INVALID = grpc.StatusCode.INVALID_ARGUMENT


@pytest_asyncio.fixture
async def srv(tmp_path: Path) -> AsyncIterator[Served]:
    async with serving(tmp_path) as served:
        yield served


# ----------------------------------------------------------------------------------------------
# Integer options: bounded, never a server fault


@pytest.mark.parametrize(
    ("variant", "options", "field"),
    [
        ("partnership", {"target": 1e300}, "options.target"),
        ("two-handed", {"target": 2**40}, "options.target"),
        ("partnership", {"target": INT_OPTION_MAX + 1}, "options.target"),
        ("partnership", {"target": 2.5}, "options.target"),
        ("cutthroat", {"target": -1e300}, "options.target"),
        ("partnership", {"last_trick_bonus": 1e300}, "options.last_trick_bonus"),
        ("partnership", {"last_trick_bonus": -1e300}, "options.last_trick_bonus"),
        ("partnership", {"last_trick_bonus": 0.5}, "options.last_trick_bonus"),
        ("partnership", {"min_bid": 1e300}, "options.min_bid"),
        ("double-deck", {"bid_step": 1e20}, "options.bid_step"),
        ("cutthroat", {"max_raise": 1e300}, "options.max_raise"),
        ("partnership", {"exchange_count": 1e300}, "options.exchange_count"),
        ("partnership", {"save_meld": 1e300}, "options.save_meld"),
        ("partnership", {"min_meld_to_record": -1e300}, "options.min_meld_to_record"),
        ("double-deck", {"deck": 1e300}, "options.deck"),
        ("partnership", {"bid_schedule": [[1e300, 10]]}, "options.bid_schedule"),
        ("partnership", {"bid_schedule": [[250, 1e300]]}, "options.bid_schedule"),
        ("partnership", {"bid_schedule": [[250, 2.5]]}, "options.bid_schedule"),
        ("partnership", {"meld_values": {"run": [1e300]}}, "options.meld_values.run"),
        ("partnership", {"meld_values": {"dix": [MELD_VALUE_MAX + 1]}}, "options.meld_values.dix"),
        ("partnership", {"meld_values": {"dix": [10.5]}}, "options.meld_values.dix"),
    ],
)
async def test_huge_or_fractional_integer_options_are_invalid_argument(
    srv: Served, variant: str, options: dict[str, object], field: str
) -> None:
    error = await refused(srv.client.create_game(variant, options))
    assert error.code == INVALID, error
    assert error.fields == [field]
    assert field.removeprefix("options.") in error.message
    # A rules query checks options the same way.
    error = await refused(
        srv.rules.ScoreMeld(
            pb.ScoreMeldRequest(
                variant=variant, options=dict_to_struct(options), hand=["AS"], trump="H"
            )
        )
    )
    assert error.code == INVALID and error.fields == [field]


async def test_integer_options_at_their_bounds_are_accepted(srv: Served) -> None:
    await srv.client.create_game("partnership", {"target": INT_OPTION_MAX})
    await srv.client.create_game("two-handed", {"last_trick_bonus": INT_OPTION_MIN})
    await srv.client.create_game("double-deck", {"meld_values": {"run": [MELD_VALUE_MAX]}})
    await srv.client.create_game("cutthroat", {"min_bid": INT_OPTION_MAX, "save_meld": 0})


async def test_non_finite_numbers_in_rules_options_are_invalid_argument(srv: Served) -> None:
    options = struct_pb2.Struct()
    options.update({"target": float("inf")})
    error = await refused(
        srv.rules.TrickWinner(
            pb.TrickWinnerRequest(variant="partnership", options=options, trick=["AS"], trump="H")
        )
    )
    assert error.code == INVALID and error.fields == ["options"]


@pytest.mark.parametrize("number", [float("inf"), float("-inf"), float("nan")])
async def test_non_finite_numbers_in_create_game_are_invalid_argument(
    srv: Served, number: float
) -> None:
    options = struct_pb2.Struct()
    options.update({"target": number})
    error = await refused(
        srv.referee.CreateGame(pb.CreateGameRequest(variant="partnership", options=options))
    )
    assert error.code == INVALID and error.fields == ["options"]
    deal = struct_pb2.Struct()
    deal.update({"hands": [], "widow": number})
    error = await refused(
        srv.referee.CreateGame(
            pb.CreateGameRequest(
                variant="partnership", given_deals=pb.GivenDeals(deals=[deal, deal])
            ),
            metadata=bearer(ADJUDICATOR_TOKEN),
        )
    )
    assert error.code == INVALID and error.fields == ["given_deals.deals[0]"]


# ----------------------------------------------------------------------------------------------
# ScoreHand figures and int32 answers


async def test_score_hand_with_a_huge_bid_and_meld_is_invalid_argument(srv: Served) -> None:
    request = pb.ScoreHandRequest(
        variant="partnership",
        bid=2**31 - 1,
        declarer=0,
        meld=[2**31 - 1] * 4,
        points=[0, 1],
        tricks=[1, 1],
    )
    error = await refused(srv.rules.ScoreHand(request))
    assert error.code == INVALID and error.fields == ["meld[0]"]
    request = pb.ScoreHandRequest(
        variant="two-handed", meld=[0, 0], points=[0, MAX_HAND_FIGURE + 1], tricks=[1, 1]
    )
    error = await refused(srv.rules.ScoreHand(request))
    assert error.code == INVALID and error.fields == ["points[1]"]


async def test_score_hand_figures_at_their_bound_fit_the_answer(srv: Served) -> None:
    # A huge bid alone is fine: the declaring side is set by it.
    answer = await srv.rules.ScoreHand(
        pb.ScoreHandRequest(
            variant="partnership",
            bid=2**31 - 1,
            declarer=0,
            meld=[0, 0, 0, 0],
            points=[250, 0],
            tricks=[12, 0],
        )
    )
    assert list(answer.delta) == [-(2**31 - 1), 0]
    # The largest side total: two seats' meld and the side's card points, all at the bound.
    answer = await srv.rules.ScoreHand(
        pb.ScoreHandRequest(
            variant="partnership",
            bid=250,
            declarer=0,
            meld=[MAX_HAND_FIGURE, 0, MAX_HAND_FIGURE, 0],
            points=[MAX_HAND_FIGURE, 0],
            tricks=[12, 0],
        )
    )
    assert list(answer.delta) == [3 * MAX_HAND_FIGURE, 0]


async def test_score_hand_takes_points_down_to_a_negative_last_trick_bonus(srv: Served) -> None:
    """A side that takes the last trick and no counters has the bonus as its card points; with
    the lowest bonus (any int32 is allowed) that is -2**31, and the answer still fits int32.
    Was INVALID_ARGUMENT "points[0]: must be >= 0" for a figure a game produces."""
    lowest = -(2**31)
    answer = await srv.rules.ScoreHand(
        pb.ScoreHandRequest(
            variant="partnership",
            options=dict_to_struct({"last_trick_bonus": lowest}),
            bid=250,
            declarer=1,
            meld=[0, 300, 0, 0],
            points=[lowest, 240],
            tricks=[1, 11],
        )
    )
    assert list(answer.delta) == [lowest, 540]


# ----------------------------------------------------------------------------------------------
# Every rules-service refusal names its field


def _hand(**fields: Any) -> pb.ScoreHandRequest:
    base: dict[str, Any] = {
        "variant": "partnership",
        "bid": 250,
        "declarer": 0,
        "meld": [0, 0, 0, 0],
        "points": [250, 0],
        "tricks": [12, 0],
    }
    return pb.ScoreHandRequest(**(base | fields))


RULES_REFUSALS: list[tuple[str, Any, str]] = [
    ("ScoreMeld", pb.ScoreMeldRequest(hand=["AS", "ZZ"], trump="H"), "hand[1]"),
    ("ScoreMeld", pb.ScoreMeldRequest(hand=["AS"], trump="X"), "trump"),
    ("ScoreMeld", pb.ScoreMeldRequest(variant="bogus", hand=["AS"], trump="H"), "variant"),
    ("ScoreMeld", pb.ScoreMeldRequest(hand=["AS"] * 3, trump="S"), "hand"),
    (
        "ScoreMeld",
        pb.ScoreMeldRequest(options=dict_to_struct({"no_such": 1}), hand=["AS"], trump="H"),
        "options.no_such",
    ),
    (
        "ScoreMeld",
        pb.ScoreMeldRequest(
            options=dict_to_struct({"meld_values": {"flush": [1]}}), hand=["AS"], trump="H"
        ),
        "options.meld_values.flush",
    ),
    ("LegalPlays", pb.LegalPlaysRequest(hand=["AS"], trump="H", trick=["KS"] * 4), "trick"),
    ("LegalPlays", pb.LegalPlaysRequest(hand=[], trump="H"), "hand"),
    ("LegalPlays", pb.LegalPlaysRequest(hand=["AS"], trump="H", trick=["KS", "1S"]), "trick[1]"),
    ("LegalPlays", pb.LegalPlaysRequest(hand=["AS"], trump="H", phase="stock"), "phase"),
    (
        "LegalPlays",
        pb.LegalPlaysRequest(hand=["AS"], trump="H", trick=["KS"], seat_of_partner_in_trick=3),
        "seat_of_partner_in_trick",
    ),
    ("TrickWinner", pb.TrickWinnerRequest(trick=[], trump="H"), "trick"),
    ("TrickWinner", pb.TrickWinnerRequest(trick=["AS"], trump=""), "trump"),
    ("TrickWinner", pb.TrickWinnerRequest(trick=["AS"] * 3, trump="H"), "trick"),
    ("TrickPoints", pb.TrickPointsRequest(cards=["AS", "1S"]), "cards[1]"),
    ("TrickPoints", pb.TrickPointsRequest(variant="x", cards=["AS"]), "variant"),
    ("ScoreHand", _hand(declarer=9), "declarer"),
    ("ScoreHand", _hand(bid=-5), "bid"),
    ("ScoreHand", _hand(meld=[0]), "meld"),
    ("ScoreHand", _hand(meld=[0, -1, 0, 0]), "meld[1]"),
    ("ScoreHand", _hand(points=[250, -3]), "points[1]"),
    ("ScoreHand", _hand(dix=[10, 0, 0, 0]), "dix[0]"),
    ("ScoreHand", pb.ScoreHandRequest(variant="partnership", bid=250, meld=[0] * 4), "declarer"),
    (
        "ScoreHand",
        pb.ScoreHandRequest(
            variant="partnership", meld=[0] * 4, points=[0, 0], tricks=[0, 0], conceded=True
        ),
        "conceded",
    ),
    ("ScoreHand", _hand(variant="partnership-no-bid"), "bid"),
    ("ScoreHand", _hand(options=dict_to_struct({"target": 0})), "options.target"),
]


@pytest.mark.parametrize(("method", "request_", "field"), RULES_REFUSALS)
async def test_rules_service_refusals_name_the_field(
    srv: Served, method: str, request_: Any, field: str
) -> None:
    error = await refused(getattr(srv.rules, method)(request_))
    assert error.code == INVALID, error
    assert error.reason == "INVALID_ARGUMENT"
    assert error.fields == [field], error.message
    assert error.message


def test_a_struct_decodes_with_type_first_and_the_other_keys_sorted_at_every_depth() -> None:
    """A Struct is a map, so its fields arrive in no fixed order; decoding fixes one (the
    Python client's answers, ListLegalActions' descriptors included, print alike in every run)."""
    data = {"step": 10, "min": 250, "type": "bid", "max": 260, "z": [{"y": 1, "type": "x"}]}
    plain = struct_to_dict(dict_to_struct(data))
    assert plain == data
    assert list(plain) == ["type", "max", "min", "step", "z"]
    inner = plain["z"]
    assert isinstance(inner, list) and list(inner[0]) == ["type", "y"]


def test_the_json_answer_format_is_unchanged() -> None:
    answer = answer_query({"id": 7, "kind": "meld", "hand": ["AS", "ZZ"], "trump": "H"})
    assert list(answer) == ["id", "error"]
    assert str(answer["error"]).startswith("hand[1]: ")
    answer = answer_query({"kind": "meld", "hand": [], "trump": "H", "options": {"target": 0}})
    assert list(answer) == ["error"] and '"target"' in str(answer["error"])


# ----------------------------------------------------------------------------------------------
# ListVariants offers exactly what CreateGame accepts


def _as_int(value: object) -> int:
    assert isinstance(value, int | float) and not isinstance(value, bool)
    assert float(value).is_integer()
    return int(value)


def _companions(variant: str, name: str) -> dict[str, object]:
    """Other options a value needs to make sense (the ``requires`` conditions)."""
    if name == "max_raise":
        return {"bid_step": 1}  # max_raise 1 is refused under a larger step
    if name == "bid_step":
        return {"max_raise": None}  # partnership's max_raise 20 refuses a larger step
    return {}


def _candidates(variant: str, name: str) -> list[object]:
    """Values OPTIONS.json mentions for an option (any variant), their neighbours for integers,
    and a value of no meaning at all: whatever of these ListVariants does not list must be
    refused."""
    entry = next(e for e in option_schema() if e["name"] == name)
    found: list[object] = ["not-a-value"]
    values = entry.get("values")
    if isinstance(values, list):
        found += values
    for key in ("values_by_variant", "game_values_by_variant", "not_supported"):
        by_variant = entry.get(key) or {}
        assert isinstance(by_variant, dict)
        for listed in by_variant.values():
            found += list(listed)
    if entry["type"] == "bool":
        found += [True, False]
    found += [v + 1 for v in found if isinstance(v, int | float) and not isinstance(v, bool)]
    return found


def _listed(value: object, allowed: list[object]) -> bool:
    return any(type(a) is type(value) and a == value for a in allowed) or any(
        isinstance(a, float) and _is_number(value) and a == value for a in allowed
    )


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


async def _accepts(srv: Served, variant: str, options: dict[str, object]) -> None:
    await srv.client.create_game(variant, options)


async def _refuses(srv: Served, variant: str, name: str, value: object) -> None:
    options = _companions(variant, name) | {name: value}
    error = await refused(srv.client.create_game(variant, options))
    assert error.code == INVALID, (variant, name, value, error)
    assert error.fields == [f"options.{name}"], (variant, name, value, error.message)


@pytest.mark.parametrize("variant", VARIANT_IDS)
async def test_list_variants_offers_exactly_what_create_game_accepts(
    srv: Served, variant: str
) -> None:
    listed = next(v for v in await srv.client.list_variants() if v["id"] == variant)
    checked = 0
    for option in listed["options"]:
        name, allowed = option["name"], option["allowed"]
        companions = _companions(variant, name)
        if isinstance(allowed, list):
            for value in allowed:
                await _accepts(srv, variant, companions | {name: value})
            for value in _candidates(variant, name):
                if not _listed(value, allowed):
                    await _refuses(srv, variant, name, value)
            checked += 1
        elif isinstance(allowed, dict) and "min" in allowed:
            low, high = _as_int(allowed["min"]), _as_int(allowed["max"])
            for value in (low, high):
                await _accepts(srv, variant, companions | {name: value})
            if allowed.get("nullable"):
                await _accepts(srv, variant, companions | {name: None})
            for value in (low - 1, high + 1):
                await _refuses(srv, variant, name, value)
            await _refuses(srv, variant, name, "not-a-value")
            checked += 1
        elif isinstance(allowed, dict):  # int_or_string
            assert set(allowed) == {"strings", "int"}
            for value in allowed["strings"]:
                await _accepts(srv, variant, {name: value})
            low, high = _as_int(allowed["int"]["min"]), _as_int(allowed["int"]["max"])
            for value in (low, high):
                await _accepts(srv, variant, {name: value})
            for value in (low - 1, high + 1, "not-a-value"):
                await _refuses(srv, variant, name, value)
            checked += 1
        else:  # meld_values, bid_schedule: a description
            assert isinstance(allowed, str) and allowed
            if name == "meld_values":
                await _accepts(srv, variant, {name: {"dix": [MELD_VALUE_MAX]}})
                error = await refused(
                    srv.client.create_game(variant, {name: {"dix": [MELD_VALUE_MAX + 1]}})
                )
                assert error.fields == ["options.meld_values.dix"]
    assert checked >= 10


async def test_two_handed_lists_only_false_for_the_run_options(srv: Served) -> None:
    listed = next(v for v in await srv.client.list_variants() if v["id"] == "two-handed")
    by_name = {o["name"]: o["allowed"] for o in listed["options"]}
    assert by_name["run_counts_its_royal_marriage"] == [False]
    assert by_name["run_shares_marriage_cards"] == [False]
    assert by_name["meld_declaration"] == ["declared"]
    assert by_name["classic_rounding_7_9"] == [False]


# ----------------------------------------------------------------------------------------------
# Refusals on the canonical log line


@pytest.mark.usefixtures("json_logs")
async def test_refused_watch_and_rules_calls_log_outcome_and_code(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    async with serving(tmp_path) as srv:
        configure_logging("json")  # serving() quiets the logs; this test wants them
        table = await new_table(srv.client, "partnership", seed="log-refusals")
        capfd.readouterr()
        watch = await stream_refused(
            srv.referee.WatchGame(pb.WatchGameRequest(game_id=table.game_id), metadata=bearer("x"))
        )
        assert watch.code == grpc.StatusCode.UNAUTHENTICATED
        missing = await stream_refused(srv.referee.WatchGame(pb.WatchGameRequest()))
        assert missing.code == INVALID and missing.fields == ["game_id"]
        rules = await refused(srv.rules.ScoreMeld(pb.ScoreMeldRequest(hand=["ZZ"], trump="H")))
        assert rules.code == INVALID
        lines = await log_lines(capfd, rpcs=3)
    rpcs = [line for line in lines if line.get("event") == "rpc"]
    assert [line["rpc"] for line in rpcs] == ["WatchGame", "WatchGame", "ScoreMeld"]
    for line, grpc_code in zip(
        rpcs, ("UNAUTHENTICATED", "INVALID_ARGUMENT", "INVALID_ARGUMENT"), strict=True
    ):
        assert line["outcome"] == "refused", line
        assert line["code"], line
        assert line["grpc_code"] == grpc_code, line
    assert rpcs[0]["game"] == table.game_id
