"""A model-based (stateful) test of ``referee.store.base.GameStore``, once per backend.

Hypothesis drives a :class:`StoreMachine` through random sequences of the store's operations:
creating games (new ids and taken ones); commits at the right, a stale or a future version,
reusing a request id the game stored, to an unknown game, with the rows numbered by the store
or by the caller (rightly or wrongly), malformed ones; several commits issued before any is
awaited, always two of them at one game's current version (exactly one may win); the same
race between two stores on one database (two replicas); refusals; games ending (and commits
to ended games, refused); commits still queued when the store closes; closing and reopening
the store on the same database.

A plain in-memory model (:class:`ModelGame` per game) keeps what the store must hold: each
game's record (version, over, last activity), its log rows and their seqs, the response stored
for each request id and its audit rows. After every step the store must agree with it exactly:
``get_game``, ``load_log`` (whole and after a seq), ``stored_response`` (the game's ids, other
games' ids, an id nobody stored), ``audit_log`` (whole and paged), ``verify_audit_log``,
``list_games`` (also active only) and ``count_active_games`` (also with ``active_since`` and
``excluding``); unknown ids must stay unknown. The expected audit rows, hashes included, are
derived here from the documented definition (SHA-256 of ``json.dumps(content, sort_keys=True,
separators=(",", ":"))`` over ``AuditRow.content()``'s fields, the first row linked to 64
zeros), not with the store's hashing code.

Commits of one game from one store are predicted in the order they were submitted: both stores
document that order (SQLite runs a batch's jobs in queue order; PostgreSQL runs one store's
writes of a game in submission order). Between two stores the winner is whichever the store
reports, and the model takes it.

Values stay inside what the service stores: no U+0000 in text columns (PostgreSQL text cannot
hold it; the service refuses it in game and request ids), JSON of strings, booleans, null and
integers within 2**53, and times that are clock readings (never negative, but -0.0).

``sqlite`` uses a fresh file per example; ``postgres`` a fresh schema per example in the test
database (``PINOCHLE_REFEREE_TEST_POSTGRES``, see ``tests/test_store.py``), dropped after it.
Where no PostgreSQL is reachable the ``postgres`` case is skipped with one reason line saying
why, like every other PostgreSQL test.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import tempfile
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from referee.store.base import (
    AuditRow,
    AuditVerification,
    Commit,
    GameExists,
    GameOver,
    GameRecord,
    GameStore,
    LogRow,
    StoreError,
    UnknownGame,
    VersionConflict,
)
from referee.store.postgres import PostgresStore
from referee.store.sqlite import SqliteStore
from tests.test_store import POSTGRES_URL, postgres_marks, postgres_schema

T = TypeVar("T")

# Each backend's run is bounded to well under 20 s on a loaded two-core machine.
RUNS = {
    "sqlite": settings(
        max_examples=25,
        stateful_step_count=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    ),
    "postgres": settings(
        max_examples=10,
        stateful_step_count=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    ),
}
STEP_TIMEOUT = 20.0  # a step that hangs (a write never acknowledged) fails instead

ZERO_HASH = "0" * 64  # what the first audit row links to (the documented genesis)

# A few game ids (one non-ASCII, one with a space): creations hit new and taken ids alike.
GAME_IDS = ("g1", "G2", "ж-3", "g 4")
NEVER_STORED = "never-stored-request"

# -- strategies -------------------------------------------------------------------------------

# PostgreSQL text cannot hold U+0000; the service never stores one in a text column.
texts = st.text(st.characters(exclude_characters="\x00", codec="utf-8"), max_size=8)
nonempty_texts = st.text(
    st.characters(exclude_characters="\x00", codec="utf-8"), min_size=1, max_size=8
)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.text(max_size=6)
)
# Small on purpose: generating the data is a good part of each step's time.
json_values = json_scalars | st.lists(json_scalars, max_size=2)
json_objects = st.dictionaries(st.text(max_size=4), json_values, max_size=3)
# Clock readings: seconds since 1970, plus tiny and huge ones whose repr has an exponent
# (the canonical JSON's fast path and its fallback), and -0.0, which every store keeps as 0.0
# (SQLite cannot keep its sign; the audit hash covers the time).
times = (
    st.floats(min_value=1_600_000_000.0, max_value=2_000_000_000.0)
    | st.floats(min_value=0.0, max_value=1e18, allow_nan=False, allow_infinity=False)
    | st.just(-0.0)
)
seats = st.none() | st.integers(min_value=0, max_value=3)


@st.composite
def audit_drafts(draw: st.DrawFn, outcome: str) -> AuditRow:
    """An audit row as a caller hands it over (seq, previous_hash and hash not yet set)."""
    action = draw(st.none() | json_objects)
    return AuditRow(
        seq=0,
        time=draw(times),
        role=draw(st.sampled_from(["seat", "spectator", "adjudicator", "anonymous"])),
        seat=draw(seats),
        rpc=draw(st.sampled_from(["SubmitAction", "Claim", "Concede"]) | texts),
        action=action,
        public_action=draw(st.none() | json_objects),
        outcome=outcome,
        code="" if outcome == "accepted" else draw(nonempty_texts),
        request_id=draw(texts),
        version=draw(st.integers(min_value=0, max_value=1000)),
        previous_hash="",
    )


@st.composite
def log_rows(draw: st.DrawFn, kind: str, version: int) -> LogRow:
    """A log row as a caller hands it over (seq 0: numbered by the store unless changed)."""
    return LogRow(
        seq=0,
        version=version,
        kind=kind,
        seat=None if kind == "deal" else draw(seats),
        payload=draw(json_objects),
        events=draw(st.lists(json_objects, max_size=2)),
    )


@st.composite
def game_records(draw: st.DrawFn, game_id: str) -> GameRecord:
    return GameRecord(
        game_id=game_id,
        variant=draw(st.sampled_from(["partnership", "two-handed", "cutthroat"]) | texts),
        options=draw(json_objects),
        first_dealer=draw(st.integers(min_value=0, max_value=3)),
        deal_source=draw(json_objects),
        seat_token_hashes=tuple(draw(st.lists(texts, max_size=4))),
        spectator_token_hash=draw(texts),
        adjudicator_token_hash=draw(texts),
        players=tuple(draw(st.lists(texts, max_size=4))),
        created_at=draw(times),
        version=draw(st.sampled_from([0, 0, 0, 3])),
        over=draw(st.sampled_from([False, False, False, True])),
        # The store keeps its own: the creation time, until an action is accepted.
        last_active_at=draw(times),
    )


# -- the model ---------------------------------------------------------------------------------


def chain_hash(row: AuditRow) -> str:
    """The documented hash of an audit row (base.AuditRow.content, canonical JSON, SHA-256),
    written out here rather than taken from the store's code."""
    content = {
        "seq": row.seq,
        "time": row.time,
        "role": row.role,
        "seat": row.seat,
        "rpc": row.rpc,
        "action": row.action,
        "public_action": row.public_action,
        "outcome": row.outcome,
        "code": row.code,
        "request_id": row.request_id,
        "version": row.version,
        "previous_hash": row.previous_hash,
    }
    text = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class ModelGame:
    """What one stored game must hold."""

    record: GameRecord  # as get_game must return it
    log: list[LogRow]
    responses: dict[str, bytes] = field(default_factory=dict)
    audit: list[AuditRow] = field(default_factory=list)
    responses_kept: bool = True  # until forget_responses takes the game
    forgotten: set[str] = field(default_factory=set)  # request ids whose responses it deleted

    def last_seq(self) -> int:
        return self.log[-1].seq if self.log else 0

    def chain(self, draft: AuditRow) -> AuditRow:
        """``draft`` appended to this game's audit log: seq, link and hash."""
        previous = self.audit[-1].hash if self.audit else ZERO_HASH
        row = draft._replace(
            seq=len(self.audit) + 1,
            time=0.0 if draft.time == 0 else draft.time,  # -0.0 is stored as 0.0
            previous_hash=previous,
            hash="",
        )
        return row._replace(hash=chain_hash(row))


@dataclass(frozen=True)
class Refused:
    """A predicted refusal: the exception's type and, for a VersionConflict or a GameOver, the
    version it carries (``current``, ``version``)."""

    error: type[BaseException]
    current: int | None = None


class Model:
    def __init__(self) -> None:
        self.games: dict[str, ModelGame] = {}

    def predict_commit(self, commit: Commit) -> Refused | None:
        """How the store must answer ``commit`` now (None: accepted)."""
        new_version = commit.expected_version + 1
        if (
            not commit.request_id
            or not commit.rows
            or any(row.version != new_version for row in commit.rows)
        ):
            return Refused(ValueError)
        game = self.games.get(commit.game_id)
        if game is None:
            return Refused(UnknownGame)
        current = game.record.version
        if commit.expected_version != current:
            return Refused(VersionConflict, current)
        if game.record.over:
            return Refused(GameOver, current)
        first = game.last_seq() + 1
        if any(row.seq not in (0, first + i) for i, row in enumerate(commit.rows)):
            return Refused(StoreError)
        if commit.request_id in game.responses:
            return Refused(VersionConflict, current)
        return None

    def apply_commit(self, commit: Commit) -> AuditRow:
        """Apply an accepted commit; the audit row the store must hand back."""
        game = self.games[commit.game_id]
        first = game.last_seq() + 1
        game.log.extend(row._replace(seq=first + i) for i, row in enumerate(commit.rows))
        game.responses[commit.request_id] = commit.response
        row = game.chain(commit.audit)
        game.audit.append(row)
        game.record = dataclasses.replace(
            game.record,
            version=commit.expected_version + 1,
            over=commit.over,
            last_active_at=row.time,
        )
        return row

    def check_commit(self, commit: Commit, outcome: object) -> None:
        """``outcome`` (the audit row or the exception the store answered) against the model,
        which then takes the commit if it was accepted."""
        refused = self.predict_commit(commit)
        if refused is None:
            if isinstance(outcome, BaseException):
                raise AssertionError(f"commit {commit!r} was refused: {outcome!r}") from outcome
            assert outcome == self.apply_commit(commit), "the stored audit row differs"
            return
        assert isinstance(outcome, refused.error), (
            f"commit {commit!r}: expected {refused.error.__name__}, got {outcome!r}"
        )
        if isinstance(outcome, VersionConflict):
            assert outcome.current == refused.current
        elif isinstance(outcome, GameOver):
            assert outcome.version == refused.current

    def active(self) -> list[str]:
        return sorted(gid for gid, game in self.games.items() if not game.record.over)


# -- backends ----------------------------------------------------------------------------------

# A backend gets an exit stack for what it sets up and returns a maker of unopened stores on
# one fresh database (every store made shares it, so the machine can reopen it). With
# ``rival=True`` the store is one to open beside the machine's own: another replica, or for
# SQLite one standing for another process, without the serving lock the machine's store holds.
Backend = Callable[[contextlib.ExitStack], Callable[..., GameStore]]


def sqlite_backend(stack: contextlib.ExitStack) -> Callable[..., GameStore]:
    directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="store-model-"))
    path = Path(directory) / "referee.sqlite3"
    return lambda rival=False: SqliteStore(path, serving=not rival)


def postgres_backend(stack: contextlib.ExitStack) -> Callable[..., GameStore]:
    schema = stack.enter_context(postgres_schema("test_store_model"))
    return lambda rival=False: PostgresStore(POSTGRES_URL, schema=schema, max_size=8)


BACKENDS: dict[str, Backend] = {"sqlite": sqlite_backend, "postgres": postgres_backend}


# -- the machine -------------------------------------------------------------------------------


class StoreMachine(RuleBasedStateMachine):
    """One store (on one fresh database) against the model. Every store call runs on the event
    loop this machine owns (``asyncio.Runner``), closed in ``teardown``."""

    backend_name = ""  # the key in BACKENDS, set by each backend's subclass

    def __init__(self) -> None:
        super().__init__()
        self.model = Model()
        self.resources = contextlib.ExitStack()
        self.runner = asyncio.Runner()
        self.resources.callback(self.runner.close)
        self.opened = False
        self.rival: GameStore | None = None
        try:
            self.make = BACKENDS[self.backend_name](self.resources)
            self.store = self.make()
            self.run(self.store.open())
        except BaseException:
            self.resources.close()  # hypothesis calls teardown only on a machine it got
            raise
        self.opened = True

    def run(self, awaitable: Awaitable[T]) -> T:
        async def bounded() -> T:
            return await asyncio.wait_for(awaitable, STEP_TIMEOUT)

        return self.runner.run(bounded())

    def teardown(self) -> None:
        try:
            if self.opened:
                self.run(self.store.close())
            if self.rival is not None:
                self.run(self.rival.close())
        finally:
            self.resources.close()

    # -- helpers --------------------------------------------------------------------------

    def known(self) -> list[str]:
        return sorted(self.model.games)

    def draw_commit(
        self, data: st.DataObject, game_id: str, expected: int, *, fresh: bool = False
    ) -> Commit:
        """A commit of ``game_id`` at ``expected``: an action row and maybe a deal row, numbered
        by the store or by the caller (rarely wrongly), with a new request id or (unless
        ``fresh``) one this game already stored."""
        version = expected + 1
        rows = [data.draw(log_rows("action", version), label="action")]
        if data.draw(st.booleans(), label="with_deal"):
            rows.append(data.draw(log_rows("deal", version), label="deal"))
        game = self.model.games.get(game_id)
        numbering = data.draw(
            st.sampled_from(["store", "store", "caller", "wrong"]), label="numbering"
        )
        if numbering != "store":
            first = (game.last_seq() if game is not None else 0) + 1
            wrong = data.draw(st.integers(0, len(rows) - 1)) if numbering == "wrong" else -1
            rows = [
                row._replace(seq=first + i + (1 if i == wrong else 0)) for i, row in enumerate(rows)
            ]
        stored = sorted(game.responses) if game is not None else []
        if stored and not fresh and data.draw(st.integers(0, 4), label="reuse") == 0:
            request_id = data.draw(st.sampled_from(stored), label="request_id")
        else:
            request_id = data.draw(nonempty_texts, label="request_id")
        # A commit's entry holds its action row's action, seat and version (the stores refuse
        # any other: VerifyAuditLog compares the two).
        audit = data.draw(audit_drafts("accepted"), label="audit")._replace(
            request_id=request_id, version=version, seat=rows[0].seat, action=rows[0].payload
        )
        return Commit(
            game_id=game_id,
            expected_version=expected,
            rows=rows,
            audit=audit,
            request_id=request_id,
            response=data.draw(st.binary(max_size=12), label="response"),
            # Rarely: an ended game takes no more commits.
            over=data.draw(st.integers(0, 9), label="over") == 0,
        )

    def game_ids(self) -> st.SearchStrategy[str]:
        """Mostly a stored game's id, sometimes any (perhaps unknown)."""
        known = self.known()
        return (
            st.sampled_from(known) | st.sampled_from(GAME_IDS)
            if known
            else st.sampled_from(GAME_IDS)
        )

    def contenders(self, data: st.DataObject, game_id: str) -> list[Commit]:
        """Two well-formed commits of ``game_id`` (in progress) at its current version with
        request ids it has not stored (and different from each other): either alone would be
        accepted."""
        version, stored = self.current(game_id), self.model.games[game_id].responses
        pair = []
        for i in range(2):
            commit = self.draw_commit(data, game_id, version, fresh=True)
            request_id = f"{commit.request_id}#{i}"
            while request_id in stored:
                request_id += "'"
            pair.append(
                commit._replace(
                    request_id=request_id,
                    rows=[row._replace(seq=0) for row in commit.rows],
                    audit=commit.audit._replace(request_id=request_id),
                )
            )
        return pair

    def draw_queue(
        self,
        data: st.DataObject,
        game_ids: Sequence[str],
        *,
        min_size: int = 0,
        after: dict[str, int] | None = None,
    ) -> list[Commit]:
        """Up to four commits of ``game_ids``, each mostly at the version the ones before it
        leave its game at (so most would be accepted in this order), else one past it or
        stale; ``after`` gives the version a game starts at (else its current one) and no
        commit of it goes below that."""
        planned = dict(after or {})
        commits = []
        for game_id, drawn in data.draw(
            st.lists(
                st.tuples(st.sampled_from(game_ids), st.sampled_from([0, 0, 0, 1, -1])),
                min_size=min_size,
                max_size=4,
            ),
            label="queue",
        ):
            version = planned.get(game_id, self.current(game_id))
            # Never below the version ``after`` gives.
            offset = max(drawn, 0) if after is not None and game_id in after else drawn
            commits.append(self.draw_commit(data, game_id, version + offset))
            planned[game_id] = version + 1 if offset == 0 else version
        return commits

    def current(self, game_id: str) -> int:
        game = self.model.games.get(game_id)
        return game.record.version if game is not None else 0

    def issue(self, commits: Sequence[Commit]) -> list[object]:
        """Every commit issued before any is awaited; their outcomes in order."""

        async def go() -> list[object]:
            pending = [self.store.commit(commit) for commit in commits]
            return list(await asyncio.gather(*pending, return_exceptions=True))

        return self.run(go())

    # -- rules ----------------------------------------------------------------------------

    @initialize(
        game_ids=st.lists(st.sampled_from(GAME_IDS), min_size=1, max_size=3), data=st.data()
    )
    def first_games(self, game_ids: list[str], data: st.DataObject) -> None:
        """Every run starts with a game or a few (an id drawn twice is refused the second time)."""
        for game_id in game_ids:
            self.create_game(game_id, data)

    @rule(game_id=st.sampled_from(GAME_IDS), data=st.data())
    def create_game(self, game_id: str, data: st.DataObject) -> None:
        record = data.draw(game_records(game_id), label="record")
        first_rows = data.draw(
            st.lists(log_rows("deal", record.version), min_size=0, max_size=2), label="rows"
        )
        if data.draw(st.booleans(), label="caller_numbers"):
            first_rows = [row._replace(seq=i) for i, row in enumerate(first_rows, start=1)]
        outcome: object
        try:
            outcome = self.run(self.store.create_game(record, first_rows))
        except Exception as exc:
            outcome = exc
        if game_id in self.model.games:
            assert isinstance(outcome, GameExists), f"a taken id was created again: {outcome!r}"
            return
        assert outcome is None, f"create_game({game_id!r}) failed: {outcome!r}"
        self.model.games[game_id] = ModelGame(
            record=dataclasses.replace(record, last_active_at=record.created_at),
            log=[row._replace(seq=i) for i, row in enumerate(first_rows, start=1)],
        )

    # Hypothesis favours the rules it sorts first (fewest arguments, then by name): ``commit``
    # is the first of the one-argument rules and no rule has none.

    @rule(data=st.data())
    def commit(self, data: st.DataObject) -> None:
        """One commit, awaited: to a game mostly at its version, else stale or ahead, or to an
        id no game has."""
        game_id = data.draw(self.game_ids(), label="game_id")
        offset = data.draw(st.sampled_from([0, 0, 0, 0, 0, -1, 1, 2]), label="offset")
        commit = self.draw_commit(data, game_id, self.current(game_id) + offset)
        (outcome,) = self.issue([commit])
        self.model.check_commit(commit, outcome)

    @rule(data=st.data())
    def malformed_commit(self, data: st.DataObject) -> None:
        """No request id, no rows, or a row of the wrong version: ValueError, nothing written."""
        game_id = data.draw(self.game_ids())
        commit = self.draw_commit(data, game_id, self.current(game_id), fresh=True)
        flaw = data.draw(st.sampled_from(["request_id", "rows", "version"]))
        if flaw == "request_id":
            commit = commit._replace(request_id="")
        elif flaw == "rows":
            commit = commit._replace(rows=[])
        else:
            rows = list(commit.rows)
            rows[-1] = rows[-1]._replace(version=commit.expected_version)
            commit = commit._replace(rows=rows)
        (outcome,) = self.issue([commit])
        assert isinstance(outcome, ValueError), f"a malformed commit gave {outcome!r}"

    @precondition(lambda self: bool(self.model.active()))
    @rule(data=st.data())
    def concurrent_commits(self, data: st.DataObject) -> None:
        """Two commits of one game in progress at its current version (new request ids), and a
        few more of any game at or just past its version, all issued before any is awaited."""
        game_id = data.draw(st.sampled_from(self.model.active()), label="contested")
        version = self.current(game_id)
        pair = self.contenders(data, game_id)
        # The others reach the contested game only past the pair's version.
        others = self.draw_queue(data, GAME_IDS, after={game_id: version + 1})
        commits = data.draw(st.permutations([*pair, *others]), label="order")
        outcomes = self.issue(commits)
        winners = [
            outcome
            for commit, outcome in zip(commits, outcomes, strict=True)
            if any(commit is contender for contender in pair)
            and not isinstance(outcome, BaseException)
        ]
        assert len(winners) == 1, f"{len(winners)} of two commits at version {version} won"
        won = [
            (commit.game_id, commit.expected_version)
            for commit, outcome in zip(commits, outcomes, strict=True)
            if not isinstance(outcome, BaseException)
        ]
        assert len(won) == len(set(won)), f"two commits won at one version: {won}"
        for commit, outcome in zip(commits, outcomes, strict=True):
            self.model.check_commit(commit, outcome)

    @precondition(lambda self: bool(self.model.active()))
    @rule(data=st.data())
    def rival_commits(self, data: st.DataObject) -> None:
        """Two stores on one database (two replicas) commit one game in progress at its version
        at once: the database's version check lets exactly one win; the other gets
        VersionConflict carrying the winner's version."""
        game_id = data.draw(st.sampled_from(self.model.active()), label="contested")
        version = self.current(game_id)
        pair = self.contenders(data, game_id)
        rival = self.rival_store()

        async def go() -> list[object]:
            both = self.store.commit(pair[0]), rival.commit(pair[1])
            return list(await asyncio.gather(*both, return_exceptions=True))

        outcomes = self.run(go())
        winners = [i for i, outcome in enumerate(outcomes) if not isinstance(outcome, Exception)]
        assert len(winners) == 1, f"rival commits at version {version}: {outcomes!r}"
        (winner,) = winners
        loser = outcomes[1 - winner]
        assert isinstance(loser, VersionConflict), f"the losing rival got {loser!r}"
        assert loser.current == version + 1
        self.model.check_commit(pair[winner], outcomes[winner])

    @rule(data=st.data(), draft=audit_drafts("refused"))
    def record_refusal(self, data: st.DataObject, draft: AuditRow) -> None:
        game_id = data.draw(self.game_ids(), label="game_id")
        outcome: object
        try:
            outcome = self.run(self.store.record_refusal(game_id, draft))
        except Exception as exc:
            outcome = exc
        game = self.model.games.get(game_id)
        if game is None:
            assert isinstance(outcome, UnknownGame), f"a refusal of no game gave {outcome!r}"
            return
        row = game.chain(draft)
        assert outcome == row, "the stored refusal differs"
        game.audit.append(row)

    @rule(open_twice=st.booleans())
    def reopen(self, open_twice: bool) -> None:
        """Close the store and open a new one on the same database (``open`` is idempotent:
        maybe twice)."""
        self.opened = False
        self.run(self.store.close())
        self.reopen_store(open_twice)

    def rival_store(self) -> GameStore:
        """A second store on the same database, open until teardown (another replica)."""
        if self.rival is None:
            rival = self.make(rival=True)
            self.run(rival.open())
            self.rival = rival
        return self.rival

    def reopen_store(self, open_twice: bool = False) -> None:
        self.store = self.make()
        self.run(self.store.open())
        self.opened = True
        if open_twice:
            self.run(self.store.open())

    @precondition(lambda self: bool(self.model.games))
    @rule(data=st.data())
    def queued_commits_then_close(self, data: st.DataObject) -> None:
        """Commits issued, then the store closed before they are awaited: close() finishes
        them, and each is answered as if awaited (reopen, then the invariants, check that what
        was acknowledged is there)."""
        commits = self.draw_queue(data, self.known(), min_size=1)
        store = self.store
        yield_first = data.draw(st.booleans(), label="yield_first")

        async def go() -> list[object]:
            submitted = [store.commit(commit) for commit in commits]
            if yield_first or not all(isinstance(one, asyncio.Future) for one in submitted):
                # A coroutine submits its write when it first runs (PostgreSQL); SQLite's
                # commit has queued it already, and its batch starts on the loop's next turn:
                # closing before that turn, or after it, are both tried.
                submitted = [asyncio.ensure_future(one) for one in submitted]
                await asyncio.sleep(0)
            self.opened = False
            await store.close()
            return list(await asyncio.gather(*submitted, return_exceptions=True))

        outcomes = self.run(go())
        for commit, outcome in zip(commits, outcomes, strict=True):
            self.model.check_commit(commit, outcome)

        async def too_late() -> AuditRow:
            return await store.commit(commits[0]._replace(request_id=NEVER_STORED))

        with pytest.raises(StoreError):  # a closed store takes no more writes
            self.run(too_late())
        self.reopen_store()

    @rule(
        after_seq=st.integers(min_value=-1, max_value=12),
        limit=st.integers(min_value=-1, max_value=6),
        data=st.data(),
    )
    def read_pages(self, after_seq: int, limit: int, data: st.DataObject) -> None:
        """load_log and audit_log from any seq, audit_log with any limit."""
        if not self.model.games:
            return
        game_id = data.draw(st.sampled_from(self.known()))
        game = self.model.games[game_id]
        log = self.run(self.store.load_log(game_id, after_seq=after_seq))
        assert log == [row for row in game.log if row.seq > after_seq]
        audit = self.run(self.store.audit_log(game_id, after_seq=after_seq, limit=limit))
        assert audit == [row for row in game.audit if row.seq > after_seq][: max(limit, 0)]

    @rule(
        since=st.none() | times,
        excluding=st.lists(st.sampled_from([*GAME_IDS, "unknown"]), max_size=4, unique=True),
        data=st.data(),
    )
    def count_active(self, since: float | None, excluding: list[str], data: st.DataObject) -> None:
        if since is not None and self.model.games and data.draw(st.booleans()):
            # Exactly some game's last activity, to probe the boundary (at or after counts).
            since = data.draw(
                st.sampled_from([g.record.last_active_at for g in self.model.games.values()])
            )
        expected = sum(
            1
            for game_id, game in self.model.games.items()
            if not game.record.over
            and (since is None or game.record.last_active_at >= since)
            and game_id not in excluding
        )
        count = self.run(self.store.count_active_games(active_since=since, excluding=excluding))
        assert count == expected, f"count_active_games({since!r}, {excluding!r})"

    @rule(before=times, limit=st.integers(min_value=1, max_value=3), data=st.data())
    def forget_responses(self, before: float, limit: int, data: st.DataObject) -> None:
        """The responses of at most ``limit`` games that ended before ``before``, the longest
        ended first (ties by id, in code point order), each game once."""
        finished = [g.record.last_active_at for g in self.model.games.values() if g.record.over]
        if finished and bool(data.draw(st.booleans())):
            # Exactly a finished game's last activity, to probe the boundary (strictly before).
            before = data.draw(st.sampled_from(finished))
        ended = sorted(
            (game.record.last_active_at, game_id)
            for game_id, game in self.model.games.items()
            if game.record.over and game.responses_kept and game.record.last_active_at < before
        )[:limit]
        assert self.run(self.store.forget_responses(before, limit)) == len(ended)
        for _, game_id in ended:
            game = self.model.games[game_id]
            game.forgotten |= set(game.responses)
            game.responses.clear()
            game.responses_kept = False

    # -- invariants -----------------------------------------------------------------------

    @invariant()
    def store_agrees_with_model(self) -> None:
        self.run(self.check_everything())

    async def check_everything(self) -> None:
        store, model = self.store, self.model
        checks: list[Coroutine[Any, Any, None]] = [self.check_game(gid) for gid in model.games]
        checks += [self.check_unknown(gid) for gid in GAME_IDS if gid not in model.games]
        await asyncio.gather(*checks)
        assert sorted(await store.list_games()) == sorted(model.games)
        assert sorted(await store.list_games(active_only=True)) == model.active()
        active = model.active()
        assert await store.count_active_games() == len(active)
        assert await store.count_active_games(excluding=[*active[:1], "unknown"]) == len(active[1:])

    async def check_game(self, game_id: str) -> None:
        store, game = self.store, self.model.games[game_id]

        async def equal(read: Awaitable[object], expected: object, what: str) -> None:
            got = await read
            assert got == expected, f"{game_id!r}: {what}: {got!r} != {expected!r}"

        last, entries = game.last_seq(), len(game.audit)
        checks = [
            equal(store.get_game(game_id), game.record, "get_game"),
            equal(store.load_log(game_id), game.log, "load_log"),
            equal(store.audit_log(game_id), game.audit, "audit_log"),
            equal(
                store.audit_log(game_id, after_seq=entries // 2, limit=2),
                game.audit[entries // 2 :][:2],
                f"audit_log after {entries // 2}, limit 2",
            ),
            equal(
                store.verify_audit_log(game_id),
                AuditVerification(True, entries),
                "verify_audit_log",
            ),
        ]
        checks += [
            equal(
                store.load_log(game_id, after_seq=after),
                [row for row in game.log if row.seq > after],
                f"load_log after {after}",
            )
            for after in sorted({last // 2, last})
        ]
        checks += [
            equal(store.stored_response(game_id, request_id), response, f"{request_id!r}")
            for request_id, response in game.responses.items()
        ]
        # Request ids other games stored (ids are per game), and one nobody stored.
        others = sorted(
            {
                request_id
                for other in self.model.games.values()
                for request_id in other.responses
                if request_id not in game.responses
            }
        )
        checks += [
            equal(store.stored_response(game_id, request_id), None, f"{request_id!r}")
            for request_id in [*others[:1], NEVER_STORED, *sorted(game.forgotten)[:2]]
            if request_id not in game.responses
        ]
        await asyncio.gather(*checks)

    async def check_unknown(self, game_id: str) -> None:
        store = self.store
        with pytest.raises(UnknownGame):
            await store.get_game(game_id)
        with pytest.raises(UnknownGame):
            await store.load_log(game_id)
        with pytest.raises(UnknownGame):
            await store.load_log(game_id, after_seq=1)
        with pytest.raises(UnknownGame):
            await store.audit_log(game_id)
        with pytest.raises(UnknownGame):
            await store.verify_audit_log(game_id)
        assert await store.stored_response(game_id, NEVER_STORED) is None


class SqliteStoreMachine(StoreMachine):
    backend_name = "sqlite"


class PostgresStoreMachine(StoreMachine):
    backend_name = "postgres"


MACHINES: dict[str, type[StoreMachine]] = {
    "sqlite": SqliteStoreMachine,
    "postgres": PostgresStoreMachine,
}


@pytest.mark.parametrize(
    "backend",
    [
        pytest.param(name, marks=postgres_marks() if name == "postgres" else [])
        for name in sorted(BACKENDS)
    ],
)
def test_store_agrees_with_its_model(backend: str) -> None:
    run_state_machine_as_test(MACHINES[backend], settings=RUNS[backend])
