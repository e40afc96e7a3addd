"""The refusal budget (referee/service/limits.py): callers without a seat cannot grow a game's
audit log without bound, and seats are never throttled."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
import pytest_asyncio
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import REGISTRY

from protos.pinochle.referee.v1 import referee_pb2 as pb
from referee.cli import build_parser
from referee.service.limits import RefusalBudgets, TokenBucket
from referee.service.settings import (
    ENV_PREFIX,
    REFUSAL_BURST,
    REFUSAL_RATE,
    Settings,
    settings_from,
)
from tests.service_helpers import Served, Table, new_table, refused, serving

BURST = 3
RATE = 0.5  # one token every 2 s


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest_asyncio.fixture
async def srv(tmp_path: Path) -> AsyncIterator[Served]:
    async with serving(tmp_path, refusal_burst=BURST, refusal_rate=RATE) as served:
        served.running.games.monotonic = FakeMonotonic()
        yield served


def _clock(srv: Served) -> FakeMonotonic:
    clock = srv.running.games.monotonic
    assert isinstance(clock, FakeMonotonic)
    return clock


def _throttled_count() -> float:
    return REGISTRY.get_sample_value("referee_refusals_throttled_total") or 0.0


async def _refused_rows(table: Table) -> list[dict[str, object]]:
    assert table.adjudicator is not None
    return [
        e for e in await table.adjudicator.audit_log() if e["outcome"] == "AUDIT_OUTCOME_REFUSED"
    ]


# ----------------------------------------------------------------------------------------------
# The bucket


def test_a_new_bucket_gives_its_burst_then_says_how_long_to_wait() -> None:
    bucket = TokenBucket.full(rate=2.0, burst=3, now=10.0)
    assert [bucket.take(10.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.take(10.0) == pytest.approx(0.5)
    assert bucket.take(10.25) == pytest.approx(0.25)  # half a token has come back
    assert bucket.take(10.5) == 0.0
    assert bucket.take(10.5) == pytest.approx(0.5)


def test_a_bucket_never_holds_more_than_its_burst_and_ignores_a_clock_going_back() -> None:
    bucket = TokenBucket.full(rate=1.0, burst=2, now=0.0)
    assert bucket.take(3600.0) == 0.0
    assert bucket.take(3600.0) == 0.0
    assert bucket.take(3600.0) == pytest.approx(1.0)  # an hour idle still gave only 2
    assert bucket.take(3500.0) == pytest.approx(1.0)  # earlier time: nothing added, none taken
    # The refill still counts from 3600, not from the earlier reading.
    assert bucket.take(3600.5) == pytest.approx(0.5)
    assert bucket.take(3601.0) == 0.0


@pytest.mark.parametrize(
    ("rate", "burst"),
    [(0.0, 1), (-1.0, 5), (1.0, 0), (float("nan"), 3), (1e-9, 3), (float("inf"), 3)],
)
def test_a_bucket_that_could_never_give_a_token_is_refused(rate: float, burst: int) -> None:
    """A rate below MIN_RATE is refused too: its retry delay would overflow RetryInfo."""
    with pytest.raises(ValueError, match="rate < inf and burst >= 1"):
        TokenBucket.full(rate, burst, 0.0)
    with pytest.raises(ValueError):
        RefusalBudgets(rate, burst)


def test_each_key_has_its_own_bucket() -> None:
    budgets = RefusalBudgets(rate=1.0, burst=2)
    assert [budgets.take("a", 0.0) for _ in range(3)] == [0.0, 0.0, pytest.approx(1.0)]
    assert budgets.take("b", 0.0) == 0.0
    assert budgets.take("a", 0.5) == pytest.approx(0.5)


def test_buckets_are_forgotten_only_once_refilled() -> None:
    """The map stays as small as the recent refusals; a key that is still short is kept (it
    must not come back full), a refilled one is dropped (a new bucket is the same)."""
    budgets = RefusalBudgets(rate=1.0, burst=2)
    floor = RefusalBudgets.SWEEP_FLOOR
    assert budgets.take("spent", 0.0) == 0.0
    assert budgets.take("spent", 0.0) == 0.0
    for n in range(floor - 1):
        assert budgets.take(f"game-{n}", 0.0) == 0.0  # one token taken: not full
    assert len(budgets) == floor
    assert budgets.take("late", 1.5) == 0.0  # a sweep at 1.5 s: the others refilled by 1.0 s
    assert len(budgets) == 2  # "spent" (1.5 of 2 tokens) and "late"
    assert budgets.take("spent", 1.5) == 0.0
    assert budgets.take("spent", 1.5) == pytest.approx(0.5)  # it kept its state


@given(uses=st.lists(st.tuples(st.integers(0, 300), st.floats(0.0, 2.0)), min_size=1, max_size=400))
def test_the_map_is_bounded_by_the_keys_refused_within_a_refill(
    uses: list[tuple[int, float]],
) -> None:
    """At most twice the most keys ever used within one refill time (burst / rate), or the
    sweep floor: the map grows with the rate of refusals, not with the number of games."""
    budgets = RefusalBudgets(rate=1.0, burst=3)
    refill = 3 / 1.0
    last_use: dict[int, float] = {}
    now, most_recent = 0.0, 0
    for key, gap in uses:
        now += gap
        budgets.take(str(key), now)
        last_use[key] = now
        most_recent = max(most_recent, sum(1 for t in last_use.values() if now - t < refill))
        assert len(budgets) <= max(RefusalBudgets.SWEEP_FLOOR, 2 * most_recent)


# ----------------------------------------------------------------------------------------------
# Through the service


async def test_a_wrong_token_is_audited_until_the_budget_is_spent(srv: Served) -> None:
    table = await new_table(srv.client, "partnership", seed="throttle-wrong-token")
    intruder = srv.client.seat(table.game_id, "not-a-token-of-this-game")
    for _ in range(BURST):
        error = await refused(intruder.submit({"type": "pass"}))
        assert error.code == grpc.StatusCode.UNAUTHENTICATED
        assert error.retry_delay is None
    before = _throttled_count()
    error = await refused(intruder.submit({"type": "pass"}))
    assert error.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error.reason == "TOO_MANY_REFUSALS"
    assert error.retry_delay == pytest.approx(1 / RATE)
    assert error.metadata["refused"] == "UNAUTHENTICATED"  # what waiting would not change
    assert "try again in 2.0 s" in error.message
    assert _throttled_count() == before + 1
    rows = await _refused_rows(table)
    assert len(rows) == BURST  # the throttled request wrote nothing
    assert {row["code"] for row in rows} == {"UNAUTHENTICATED"}
    assert (await table.seats[0].view())["version"] == 0  # and changed nothing


async def test_no_token_and_the_spectator_token_draw_from_the_same_budget(srv: Served) -> None:
    table = await new_table(srv.client, "partnership", seed="throttle-roles")
    spectator = srv.client.seat(table.game_id, table.spectator_token)
    anonymous = srv.client.referee
    for _ in range(2):
        error = await refused(spectator.submit({"type": "pass"}))
        assert error.code == grpc.StatusCode.PERMISSION_DENIED
    request = pb.SubmitActionRequest(game_id=table.game_id, action=pb.Action(pass_turn=pb.Pass()))
    error = await refused(anonymous.SubmitAction(request))
    assert error.code == grpc.StatusCode.UNAUTHENTICATED
    for error in (
        await refused(spectator.submit({"type": "pass"})),
        await refused(anonymous.SubmitAction(request)),
    ):
        assert error.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert error.reason == "TOO_MANY_REFUSALS"
    assert len(await _refused_rows(table)) == BURST


async def test_a_retry_delay_keeps_its_fraction_of_a_second(srv: Served) -> None:
    """Issue 4 (RESOURCE_EXHAUSTED for limits): the client's ``retry_delay`` is RetryInfo's whole
    Duration in seconds, nanoseconds included: 0.5 s after the budget is spent, the next token
    is 1.5 s away, not 1."""
    table = await new_table(srv.client, "partnership", seed="throttle-fraction")
    intruder = srv.client.seat(table.game_id, "wrong")
    for _ in range(BURST):
        await refused(intruder.submit({"type": "pass"}))
    _clock(srv).now += 0.5
    error = await refused(intruder.submit({"type": "pass"}))
    assert error.reason == "TOO_MANY_REFUSALS"
    assert error.retry_delay == pytest.approx(1.5)


async def test_the_budget_refills_at_its_rate(srv: Served) -> None:
    table = await new_table(srv.client, "partnership", seed="throttle-refill")
    intruder = srv.client.seat(table.game_id, "wrong")
    for _ in range(BURST):
        await refused(intruder.submit({"type": "pass"}))
    assert (await refused(intruder.submit({"type": "pass"}))).reason == "TOO_MANY_REFUSALS"
    _clock(srv).now += 1.0  # half a token
    error = await refused(intruder.submit({"type": "pass"}))
    assert error.reason == "TOO_MANY_REFUSALS"
    assert error.retry_delay == pytest.approx(1.0)
    _clock(srv).now += 1.0
    error = await refused(intruder.submit({"type": "pass"}))
    assert error.code == grpc.StatusCode.UNAUTHENTICATED
    assert len(await _refused_rows(table)) == BURST + 1


async def test_seats_and_the_adjudicator_are_never_throttled(srv: Served) -> None:
    table = await new_table(srv.client, "partnership", seed="throttle-seats")
    intruder = srv.client.seat(table.game_id, "wrong")
    for _ in range(BURST + 1):
        await refused(intruder.submit({"type": "pass"}))
    # Every seat but the one to act breaks a rule many times: each refusal is audited.
    view = await table.seats[0].view()
    turn = view["hand"]["turn"]
    waiting = [seat for seat in range(4) if seat != turn]
    for seat in waiting:
        for _ in range(BURST + 1):
            error = await refused(table.seats[seat].submit({"type": "pass"}))
            assert error.reason == "NOT_YOUR_TURN"
    adjudicator = srv.client.seat(table.game_id, table.adjudicator_token)
    for _ in range(BURST + 1):
        assert (await refused(adjudicator.submit({"type": "pass"}))).code == (
            grpc.StatusCode.PERMISSION_DENIED
        )
    result = await table.seats[turn].submit({"type": "pass"})
    assert result["version"] == 1
    codes = [row["code"] for row in await _refused_rows(table)]
    assert codes.count("NOT_YOUR_TURN") == 3 * (BURST + 1)
    assert codes.count("PERMISSION_DENIED") == BURST + 1
    assert codes.count("UNAUTHENTICATED") == BURST


async def test_a_game_rebuilt_from_the_store_keeps_its_spent_budget(srv: Served) -> None:
    """A game leaves memory (a finished game pushed out of the cache) and is rebuilt on the
    next request: the budget is kept by game id, so it does not come back full."""
    table = await new_table(srv.client, "partnership", seed="throttle-rebuilt")
    intruder = srv.client.seat(table.game_id, "wrong")
    for _ in range(BURST):
        await refused(intruder.submit({"type": "pass"}))
    manager = srv.running.games
    assert manager.games.pop(table.game_id) is not None  # as _retire does for a finished game
    error = await refused(intruder.submit({"type": "pass"}))
    assert error.reason == "TOO_MANY_REFUSALS"
    assert table.game_id in manager.games  # it was rebuilt to answer
    assert len(await _refused_rows(table)) == BURST


async def test_each_game_has_its_own_budget(srv: Served) -> None:
    first = await new_table(srv.client, "partnership", seed="throttle-one")
    second = await new_table(srv.client, "partnership", seed="throttle-two")
    for _ in range(BURST):
        await refused(srv.client.seat(first.game_id, "wrong").submit({"type": "pass"}))
    spent = await refused(srv.client.seat(first.game_id, "wrong").submit({"type": "pass"}))
    assert spent.reason == "TOO_MANY_REFUSALS"
    fresh = await refused(srv.client.seat(second.game_id, "wrong").submit({"type": "pass"}))
    assert fresh.code == grpc.StatusCode.UNAUTHENTICATED


# ----------------------------------------------------------------------------------------------
# Settings


def _serve_settings(*flags: str) -> Settings:
    return settings_from(build_parser().parse_args(["serve", *flags]))


def test_the_budget_defaults_and_comes_from_flags_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("REFUSAL_BURST", "REFUSAL_RATE"):
        monkeypatch.delenv(ENV_PREFIX + name, raising=False)
    defaults = _serve_settings()
    assert (defaults.refusal_burst, defaults.refusal_rate) == (REFUSAL_BURST, REFUSAL_RATE)
    monkeypatch.setenv(ENV_PREFIX + "REFUSAL_BURST", "7")
    monkeypatch.setenv(ENV_PREFIX + "REFUSAL_RATE", "0.25")
    from_env = _serve_settings()
    assert (from_env.refusal_burst, from_env.refusal_rate) == (7, 0.25)
    by_flag = _serve_settings("--refusal-burst", "9", "--refusal-rate", "3")
    assert (by_flag.refusal_burst, by_flag.refusal_rate) == (9, 3.0)


@pytest.mark.parametrize(
    "flags",
    [
        ("--refusal-burst", "0"),
        ("--refusal-burst", "-2"),
        ("--refusal-rate", "0"),
        ("--refusal-rate", "-1"),
        ("--refusal-rate", "inf"),
        ("--refusal-rate", "nan"),
        ("--refusal-rate", "1e-9"),
        ("--refusal-rate", "often"),
        ("--refusal-burst", "1.5"),
    ],
)
def test_a_budget_that_could_never_audit_is_refused_at_start_up(
    flags: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        _serve_settings(*flags)
    assert exit_info.value.code == 2
    assert flags[0] in capsys.readouterr().err


def test_a_bad_budget_in_the_environment_is_refused_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(ENV_PREFIX + "REFUSAL_BURST", "0")
    with pytest.raises(SystemExit):
        _serve_settings()
    assert "--refusal-burst: must be at least 1" in capsys.readouterr().err
