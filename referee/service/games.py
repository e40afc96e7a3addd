"""Live games: authentication, the rules engine and the store, without any protobuf.

``GameManager`` is what the servicers call. It keeps each game's current state in memory (rebuilt
from the store's log on first use, so a restart loses nothing), serializes submissions per game
with a lock, checks the version again inside the store's commit (so several replicas can share
one database), and only changes its in-memory copy after the commit is durable.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
import secrets
import time
import unicodedata
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, NoReturn, TypeVar

import grpc
import orjson
import structlog

from protos.pinochle.referee.v1 import referee_pb2 as pb
from referee.audit import RecordError, parse_deal
from referee.engine.actions import decode_action, encode_action
from referee.engine.engine import apply, check_deal, legal_actions, make_setup, new_game, start_hand
from referee.engine.errors import DealError, IllegalAction
from referee.engine.events import EVERYONE, Event, visible_to
from referee.engine.game import (
    DealSource,
    GivenDeals,
    LogEntry,
    SecureDeals,
    SeededDeals,
    export_record,
)
from referee.engine.state import GameState, evolve_game
from referee.engine.views import view
from referee.rules.dealing import Deal, deal_commitment
from referee.rules.options import OptionError, RuleSet, resolve_options
from referee.service import metrics
from referee.service.auth import (
    ADJUDICATOR,
    CREATOR,
    SEAT,
    SPECTATOR,
    Caller,
    callers_by_hash,
    new_token,
    token_hash,
)
from referee.service.convert import add_event, json_text, stored_event_to_proto
from referee.service.errors import ServiceError, invalid, over_limit, schema_changed
from referee.service.limits import RefusalBudgets
from referee.service.logline import annotate
from referee.service.settings import (
    EVENTS_IN_MEMORY,
    IDLE_AFTER,
    KEEP_RESPONSES,
    MAX_WATCHERS,
    RECENT_EVENTS,
    REFUSAL_BURST,
    REFUSAL_RATE,
)
from referee.store.base import (
    ALL_GAMES,
    AuditRow,
    AuditVerification,
    Commit,
    GameOver,
    GamePosition,
    GameRecord,
    GameStore,
    GameSummary,
    LogRow,
    SchemaChanged,
    TooManyGames,
    UnknownGame,
    UnreadableAuditEntry,
    VersionConflict,
    compact_json,
)

MAX_REQUEST_ID = 128
# A refused action is audited as sent, up to this many characters of JSON; a longer one (every
# legal action is far shorter) is audited as its type, size and SHA-256, so a flood of oversized
# requests cannot grow the audit log by a mebibyte each or make its pages too large to send.
MAX_AUDITED_ACTION = 4096
# A player's name is shown in every view and kept in every stored response, so it is bounded.
# Control characters (NUL among them) and the bidirectional overrides, which can make a name
# display as another, are refused; everything else a name may hold (emoji sequences with their
# joiners, any script) is allowed, as are two players with the same name.
MAX_PLAYER_NAME = 64
_BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
# Finished games kept in memory, most recently used first; older ones are rebuilt from the store
# when asked for. Active games always stay (their number is capped by max_active_games), but
# finished ones would otherwise pile up for as long as the server runs.
FINISHED_GAMES_KEPT = 1024


T = TypeVar("T")


def _deal_source(mode: Mapping[str, object]) -> DealSource:
    kind = mode.get("mode")
    if kind == "seed":
        return SeededDeals(str(mode["seed"]))
    if kind == "given":
        deals = mode["deals"]
        assert isinstance(deals, list)
        return GivenDeals([parse_deal(d, f"deals[{i}]") for i, d in enumerate(deals)])
    return SecureDeals()


def _deal_mode_shown(source: Mapping[str, object]) -> dict[str, object]:
    """How the game is dealt, as every role's view shows it: without it a seat could not tell
    that its game's creator chose a seed or the deals (and so knows the hands, README "The
    audit log and the deal commitments"). The seed and the given deals themselves stay
    secret; ``given_deals`` says how many hands were given (the server shuffles after them).
    Named as CreateGame's ``deal_mode`` oneof names its fields."""
    kind = source.get("mode")
    if kind == "seed":
        return {"mode": "seed"}
    if kind == "given":
        deals = source.get("deals")
        return {"mode": "given_deals", "given_deals": len(deals) if isinstance(deals, list) else 0}
    return {"mode": "server_shuffle"}


@dataclass(slots=True)
class LiveGame:
    """One game as this replica knows it; replaced only after a durable commit."""

    record: GameRecord
    rules: RuleSet
    state: GameState
    last_seq: int
    deals: DealSource
    # The last events_in_memory events (seq and version inside), each as its compact JSON
    # (_packed): about 150 bytes where a dict took 400; most of a long game's memory was these
    # events while 512 were kept. Older ones are read from the store's log when asked for.
    events: list[str] = field(default_factory=list)
    event_count: int = 0
    dropped_version: int = -1  # the version of the last event dropped from ``events`` (-1: none)
    salts: dict[int, str] = field(default_factory=dict)  # hand -> salt of its deal (secret)
    # The last deal's commitment (public): every view shows it (RULES.md A.10 item 3).
    commitment: str = ""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    callers: dict[str, Caller] | None = None  # token hash -> role, built on first use
    # Tokens that have authenticated, as sent -> role: a request's SHA-256 is then skipped. Only
    # valid tokens enter (a game has a few), so guessing cannot grow it; raw tokens are kept in
    # memory only, where every request carries them anyway (the store keeps hashes alone).
    known_tokens: dict[str, Caller] = field(default_factory=dict)
    # Resolved (and dropped) when the game moves on; created by the first watcher that waits.
    changed: asyncio.Future[None] | None = None
    # The wall-clock time of its last accepted action (its creation before the first), as the
    # store keeps it: what makes it idle (IDLE_AFTER). Reads do not change it.
    active_at: float = 0.0
    watchers: int = 0  # WatchGame streams following this object (it must stay in memory)
    users: int = 0  # requests between looking this object up and letting go of its lock


@dataclass(frozen=True, slots=True)
class Created:
    game_id: str
    seat_tokens: list[str]
    spectator_token: str
    adjudicator_token: str
    version: int


def public_action(action: Mapping[str, object], accepted: bool) -> dict[str, object]:
    """What any seat may see of an action in the audit log: never another seat's hidden cards."""
    kind = action.get("type")
    if not accepted:
        return {"type": kind}
    if kind in ("pass_cards", "discard"):
        cards = action.get("cards")
        return {"type": kind, "count": len(cards) if isinstance(cards, list) else 0}
    return dict(action)


class GameManager:
    def __init__(
        self,
        store: GameStore,
        *,
        server_adjudicator_hash: str = "",
        server_creator_hash: str = "",
        max_active_games: int = 10_000,
        shared_store: bool = False,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        finished_kept: int = FINISHED_GAMES_KEPT,
        refusal_rate: float = REFUSAL_RATE,
        refusal_burst: int = REFUSAL_BURST,
        idle_after: float = IDLE_AFTER,
        max_watchers: int = MAX_WATCHERS,
        watch_window: int = RECENT_EVENTS,
        events_in_memory: int = EVENTS_IN_MEMORY,
        keep_responses: float = KEEP_RESPONSES,
    ) -> None:
        self.store = store
        self.server_adjudicator_hash = server_adjudicator_hash
        self.server_creator_hash = server_creator_hash  # "": anyone may create games
        self.max_active_games = max_active_games
        self.shared_store = shared_store  # other replicas may write: refresh before acting
        self.clock = clock  # audit times (wall clock)
        self.monotonic = monotonic  # rate limits
        self.refusal_budgets = RefusalBudgets(refusal_rate, refusal_burst)
        self.idle_after = idle_after
        self.max_watchers = max_watchers
        # How far back a watcher may resume with events rather than a snapshot (RECENT_EVENTS),
        # and how many of those each game keeps in memory (the others are read from the log).
        self.watch_window = watch_window
        self.events_in_memory = min(events_in_memory, watch_window)
        self.keep_responses = keep_responses  # seconds after a game ends; 0: for ever
        self.watching = 0  # WatchGame streams open (referee_watchers_active)
        # Set by end_watches (the server shutting down, the store no longer serving): how every
        # stream ends, resumable, given the seq it sent last and the game's version.
        self._watch_ending: Callable[[int, int], ServiceError] | None = None
        self._stopped: asyncio.Future[None] | None = None  # resolved by end_watches
        # Set when the store stopped serving its schema (follow_changes): for good, so the
        # housekeeping stops too, instead of failing and logging every round.
        self.store_stopped = False
        # The idle threshold of the last recount of referee_games_active (recount_active_games):
        # the gauge counts the games active since then, plus those created or woken after it.
        # None: every game in progress is counted (no recount yet, or games never go idle).
        self.counted_since: float | None = None
        self.games: dict[str, LiveGame] = {}  # games in progress
        self.finished: OrderedDict[str, LiveGame] = OrderedDict()  # least recently used first
        self.finished_kept = finished_kept
        self._loading: dict[str, asyncio.Lock] = {}
        # Held by a recount while it reads the store; a creation waits for it to start.
        self._counting = asyncio.Lock()
        self._creating: set[str] = set()  # ids of creations started, not yet stored or failed
        # Actions handed to the store and not yet answered, by game: whether each ends its game
        # (recount_active_games reads around those that may change what it counts).
        self._committing: dict[str, bool] = {}
        self._recount: _Recount | None = None  # the recount reading the store now, if any
        # Games whose announced change could not be folded in (the store failed meanwhile):
        # keep_house tries again, since no further announcement may come for them.
        self.behind: set[str] = set()
        # Games whose commit failed here but may have landed (``_maybe_landed``), which
        # ``follow_doubtful_commits`` catches up at once rather than at the next housekeeping.
        self._doubted: set[str] = set()
        self._doubt = asyncio.Event()

    # ----------------------------------------------------------------------------------------
    # Creating and loading games

    async def create(
        self,
        *,
        variant: str,
        options: Mapping[str, object] | None,
        first_dealer: int,
        deal_mode: Mapping[str, object],
        players: Sequence[str],
        token: str | None,
    ) -> Created:
        self.check_creator(token)
        try:
            rules = resolve_options(variant, options, for_game=True)
        except OptionError as error:
            field_name = "variant" if error.option is None else f"options.{error.option}"
            raise invalid(str(error), field_name) from None
        if not 0 <= first_dealer < rules.players:
            raise invalid(
                f"first_dealer must be a seat from 0 to {rules.players - 1}", "first_dealer"
            )
        if players and len(players) != rules.players:
            raise invalid(f"player_names must name {rules.players} players", "player_names")
        for index, name in enumerate(players):
            _check_player_name(name, f"player_names[{index}]")
        if deal_mode.get("mode") == "given":
            if token is None:
                raise ServiceError(
                    grpc.StatusCode.UNAUTHENTICATED,
                    "given deals need the server's adjudicator credential",
                )
            if (
                not self.server_adjudicator_hash
                or token_hash(token) != self.server_adjudicator_hash
            ):
                raise ServiceError(
                    grpc.StatusCode.PERMISSION_DENIED,
                    "given deals need the server's adjudicator credential",
                )
            self._check_given_deals(rules, first_dealer, deal_mode)
        game_id = secrets.token_hex(12)
        # Not while a recount reads the store: it could not tell whether it saw this creation
        # (see recount_active_games). The cap itself is counted by the store's write.
        async with self._counting:
            self._creating.add(game_id)
        try:
            return await self._create(game_id, rules, first_dealer, deal_mode, players)
        finally:
            self._creating.discard(game_id)

    async def _create(
        self,
        game_id: str,
        rules: RuleSet,
        first_dealer: int,
        deal_mode: Mapping[str, object],
        players: Sequence[str],
    ) -> Created:
        seat_tokens = [new_token() for _ in range(rules.players)]
        spectator, adjudicator = new_token(), new_token()
        record = GameRecord(
            game_id=game_id,
            variant=rules.variant,
            options=dict(rules.explicit),
            first_dealer=first_dealer,
            deal_source=dict(deal_mode),
            seat_token_hashes=[token_hash(t) for t in seat_tokens],
            spectator_token_hash=token_hash(spectator),
            adjudicator_token_hash=token_hash(adjudicator),
            players=list(players),
            created_at=self.clock(),
        )
        deals = _deal_source(deal_mode)
        state = new_game(rules, first_dealer)
        state, row, _ = self._deal(state, deals, seq=1, first_event=1)
        events = [_packed(event) for event in row.events]
        live = LiveGame(record, rules, state, 1, deals, events, len(row.events))
        _keep_recent_events(live, self.events_in_memory)  # as every commit and catch-up does
        _remember_deal(live, row)
        # Like an action's commit (see _commit): once handed to the store the game may
        # become durable even if the caller is cancelled, so it is registered here either way
        # and referee_games_active keeps matching the database.
        # The store counts the active games inside the transaction that writes this one, after
        # every creation committed before it, on any replica. Counted here first (each replica
        # admitting its own creations one at a time), two replicas counted the same games at
        # once and both created, together passing the cap.
        write = self.store.create_game(
            record, [row], max_active=self.max_active_games, active_since=self.active_since()
        )
        try:
            await _durably(write, lambda _: self._register(live))
        except TooManyGames:
            # A reason of its own, as TOO_MANY_WATCHERS and REQUEST_TOO_LARGE have: a client
            # branches on it (wait for games to end, or try another replica) where a bare
            # RESOURCE_EXHAUSTED could as well be a refusal budget or a size limit.
            raise over_limit(
                f"this server keeps at most {self.max_active_games} active games",
                reason="TOO_MANY_GAMES",
                limit=self.max_active_games,
            ) from None
        return Created(game_id, seat_tokens, spectator, adjudicator, state.version)

    def check_creator(self, token: str | None) -> None:
        """With a creator credential (``--creator-token``), only its holders and the server's
        adjudicator may create games. ``create`` checks it; the servicer checks it first, before
        anything in the request is looked at.

        Issue 4 leaves CreateGame open to anyone, which stays the default; but then anyone who
        can reach the port can fill ``--max-games``. A public deployment puts the credential in
        its frontend or tournament system, so players reach games only through their tokens.
        """
        if not self.server_creator_hash:
            return
        if token is None:
            raise ServiceError(
                grpc.StatusCode.UNAUTHENTICATED,
                "this server creates games only for the holders of its creator credential:"
                " send authorization: Bearer <credential>",
            )
        self._server_credential(token)

    def _server_credential(self, token: str) -> str:
        """Which of the server's own credentials ``token`` is (``"adjudicator"`` or
        ``"creator"``); PERMISSION_DENIED when it is neither (a game's tokens included)."""
        hashed = token_hash(token)
        if self.server_adjudicator_hash and hashed == self.server_adjudicator_hash:
            return ADJUDICATOR
        if self.server_creator_hash and hashed == self.server_creator_hash:
            return CREATOR
        raise ServiceError(
            grpc.StatusCode.PERMISSION_DENIED,
            "the credential is not this server's creator or adjudicator credential",
        )

    def check_lister(self, token: str | None) -> str:
        """Who may list the stored games (ListGames): the holders of the server's adjudicator
        or creator credential, which of the two is returned. A tournament system finds its
        games with it; nobody else learns which games the server holds, and a game's own
        tokens are not enough. A server with neither credential lists to no one, whatever is
        sent. ``list_games`` checks it; the servicer checks it first, before anything in the
        request is looked at (as ``check_creator``)."""
        if not (self.server_adjudicator_hash or self.server_creator_hash):
            raise ServiceError(
                grpc.StatusCode.PERMISSION_DENIED,
                "this server lists games to no one: it has no adjudicator or creator"
                " credential (--adjudicator-token, --creator-token)",
            )
        if token is None:
            raise ServiceError(
                grpc.StatusCode.UNAUTHENTICATED,
                "listing games needs the server's adjudicator or creator credential:"
                " send authorization: Bearer <credential>",
            )
        return self._server_credential(token)

    async def list_games(
        self,
        token: str | None,
        *,
        after: GamePosition | None,
        limit: int,
        over: bool | None,
        variant: str | None,
    ) -> list[GameSummary]:
        """A page of the stored games' public summaries (``GameStore.list_game_summaries``)."""
        annotate(role=self.check_lister(token))
        return await self.store.list_game_summaries(
            after=after, limit=limit, over=over, variant=variant
        )

    def _register(self, live: LiveGame) -> None:
        """A new game is durable: hold it in memory and count it."""
        live.active_at = live.record.created_at
        self.games[live.record.game_id] = live
        # Here, not in the servicer: the log line must name a game created after its caller
        # was cancelled too (it is stored and counts against the cap).
        annotate(game=live.record.game_id, outcome="created")
        metrics.GAMES_ACTIVE.inc()

    def active_since(self) -> float | None:
        """The wall-clock time before which a game's last accepted action makes it idle
        (``IDLE_AFTER``); None when games never become idle."""
        return self.clock() - self.idle_after if self.idle_after > 0 else None

    def _check_given_deals(
        self, rules: RuleSet, first_dealer: int, deal_mode: Mapping[str, object]
    ) -> None:
        deals = deal_mode.get("deals")
        if not isinstance(deals, list) or not deals:
            raise invalid("given_deals needs at least one deal", "given_deals.deals")
        setup = make_setup(rules)
        for index, raw in enumerate(deals):
            where = f"given_deals.deals[{index}]"
            try:
                deal = parse_deal(raw, where)
            except RecordError as error:  # its message names ``where`` already
                raise invalid(str(error), where) from None
            try:
                check_deal(setup, deal, (first_dealer + index) % rules.players)
            except DealError as error:
                raise invalid(f"{where}: {error}", where) from None

    def _deal(
        self, state: GameState, deals: DealSource, *, seq: int, first_event: int
    ) -> tuple[GameState, LogRow, list[Event]]:
        """Deal the next hand with a fresh salt and publish the deal's commitment; also the
        row's events as the engine made them (what ``_accept`` answers with)."""
        deal = deals.next_deal(state.rules, state.next_dealer, state.hands_completed)
        salt = secrets.token_bytes(16)
        hand_number = state.hands_completed
        state, events = start_hand(state, deal)
        events.insert(
            1,
            Event(
                "deal_committed",
                EVERYONE,
                {"hand": hand_number, "commitment": deal_commitment(deal, salt)},
            ),
        )
        stored = _number(events, first_event, state.version)
        payload = {"hand": hand_number, "deal": deal.to_json(), "salt": salt.hex()}
        return state, LogRow(seq, state.version, "deal", None, payload, stored), events

    async def load(self, game_id: str, refresh: bool = True) -> LiveGame:
        """The live game, rebuilt from the store's log when this replica has not got it.

        With a shared store the copy is refreshed from the log first, unless the caller will
        refresh it itself under the game's lock (``submit``), which saves a read per action.
        """
        live = self._cached(game_id)
        if live is not None:
            if self.shared_store and refresh and not live.state.over:
                live.users += 1  # see submit
                try:
                    async with live.lock:  # never fold the same rows twice, nor beside a submit
                        await self._catch_up(live)
                finally:
                    live.users -= 1
            return live
        lock = self._loading.setdefault(game_id, asyncio.Lock())
        try:
            async with lock:
                if self._loading.get(game_id) is not lock:
                    # The load that held this lock failed (its caller was cancelled, or the
                    # store failed) and dropped it from ``_loading`` while this one waited, so
                    # a later load may be rebuilding the game under a new lock: queue there.
                    # Rebuilt here too, the game would be registered twice, the later copy
                    # replacing the one its watchers follow and its actions were applied to.
                    return await self.load(game_id, refresh)
                live = self._cached(game_id)
                if live is not None:
                    return live
                try:
                    record = await self.store.get_game(game_id)
                except UnknownGame:
                    raise ServiceError(grpc.StatusCode.NOT_FOUND, f"no game {game_id!r}") from None
                rules = resolve_options(record.variant, dict(record.options), for_game=True)
                state = new_game(rules, record.first_dealer)
                live = LiveGame(record, rules, state, 0, _deal_source(record.deal_source))
                await self._catch_up(live)
                if record.over and not live.state.over:
                    self._over_in_store(live)
                live.active_at = record.last_active_at  # not now: a read does not wake it
                if live.state.over:
                    self._retire(live)
                else:
                    self.games[game_id] = live
                    if self.shared_store:
                        # Another replica's commit announced while the log was read found no
                        # game here to fold into (follow_changes passes over games it does not
                        # hold): read on from where the log ended, now that it is held.
                        async with live.lock:
                            await self._catch_up(live)
                return live
        finally:
            # Issue 4 (limits): requests naming unknown games, from anyone, must not grow this
            # map without bound. Waiters still holding the lock find the game in self.games,
            # or (the load failed) the lock gone from here, and queue again.
            if self._loading.get(game_id) is lock:
                del self._loading[game_id]

    def _cached(self, game_id: str) -> LiveGame | None:
        live = self.games.get(game_id)
        if live is None:
            live = self.finished.get(game_id)
            if live is not None:
                self.finished.move_to_end(game_id)
        return live

    async def evict_idle_games(self) -> int:
        """Drop from memory the idle games in progress (``active_since``) that no WatchGame
        stream follows; return how many. The store keeps them whole, so the next request
        rebuilds one from its log (``load``), exactly as after a restart.

        A request that may change a game, or must see its changes, counts itself on the object
        from the moment it looks it up, before any await: ``users`` until it lets go of the
        lock (SubmitAction, and a refresh from a shared store), ``watchers`` while a WatchGame
        streams. A game is dropped only while holding its lock (so a commit in flight finishes
        first) and when both counts are zero then, with no await between that check and the
        drop. So no such request can be left holding an object that has left memory, whether
        it came before the eviction or while the eviction waited for the lock; a read that does
        hold one only reads a game that no longer changes.
        """
        since = self.active_since()
        if since is None:
            return 0
        evicted = 0
        for game_id, live in list(self.games.items()):
            if live.active_at >= since or live.watchers or live.users:
                continue
            async with live.lock:
                since = self.active_since()
                assert since is not None
                if (
                    self.games.get(game_id) is live
                    and live.active_at < since
                    and not live.watchers
                    and not live.users
                ):
                    del self.games[game_id]
                    evicted += 1
        return evicted

    def _retire(self, live: LiveGame) -> None:
        """Move a finished game among the finished ones kept, dropping the least recently used.

        Safe because a finished game never changes again: a request still holding the object
        sees the same game as one that rebuilds it from the store, and a watcher's stream ends
        with the game.
        """
        game_id = live.record.game_id
        if self.games.get(game_id) is live:
            del self.games[game_id]
        self.finished[game_id] = live
        self.finished.move_to_end(game_id)
        while len(self.finished) > self.finished_kept:
            self.finished.popitem(last=False)

    async def _catch_up(self, live: LiveGame) -> None:
        """Fold log rows this replica has not seen yet (restart, or another replica's writes)."""
        rows = await self.store.load_log(live.record.game_id, live.last_seq)
        folded = 0
        try:
            for row in rows:
                if row.kind == "deal":
                    state, _ = start_hand(live.state, parse_deal(row.payload["deal"], "deal"))
                    _remember_deal(live, row)
                else:
                    assert row.seat is not None
                    state, _ = apply(live.state, row.seat, decode_action(row.payload))
                # Each row whole: should one ever fail to apply, the game stays at the row
                # before it, and the next catch-up starts from that row, not after it.
                live.state = state
                live.events.extend(map(_packed, row.events))
                live.event_count += len(row.events)
                live.last_seq = row.seq
                folded += 1
        finally:
            if folded:
                _keep_recent_events(live, self.events_in_memory)
                live.active_at = self.clock()  # another replica's actions (load sets its own)
                _announce(live)
                if live.state.over and self.games.get(live.record.game_id) is live:
                    self._retire(live)  # it ended on another replica

    async def follow_changes(self) -> None:
        """Fold in other replicas' commits as the store announces them (runs until cancelled).

        A store that stopped serving its schema (``SchemaChanged``: changed under it, see
        :mod:`referee.store.postgres`) announces nothing more, ever: every WatchGame stream
        then ends UNAVAILABLE, reason STORE_SCHEMA_CHANGED, resumable on another replica, where
        it used to stay open and silent for good; new ones are refused alike. Then this waits
        to be cancelled at shutdown, as a loop the server would otherwise start again."""
        log = structlog.get_logger("referee.games")
        try:
            async for game_id in self.store.changes():
                if game_id == ALL_GAMES:  # announcements may have been lost: check every game
                    held = list(self.games.values())
                else:
                    held = [live] if (live := self.games.get(game_id)) is not None else []
                for live in held:
                    await self._fold_in(live, log)
        except SchemaChanged:
            self.store_stopped = True
            self.end_watches(_store_lost)
            await asyncio.get_running_loop().create_future()  # until cancelled

    async def _fold_in(
        self, live: LiveGame, log: structlog.stdlib.BoundLogger, *, quiet: bool = False
    ) -> None:
        """Catch ``live`` up with the store's log; if the store fails, it goes among the games
        ``behind``, which ``keep_house`` catches up later (the failure logged unless
        ``quiet``)."""
        game_id = live.record.game_id
        # Wait for the lock even when a submit holds it: that submit may have caught up before
        # this commit landed, and watchers must still see it.
        try:
            async with live.lock:
                await self._catch_up(live)
        except Exception:
            self.behind.add(game_id)
            if not (quiet or self.store_stopped):  # else said once (see keep_house)
                log.exception("catch_up_failed", game_id=game_id)
        else:
            self.behind.discard(game_id)

    async def keep_house(self, every: float) -> None:
        """Every ``every`` seconds (until cancelled): catch up the games ``behind`` (an
        announced change that failed to fold in), drop idle games from memory
        (``evict_idle_games``) and set ``referee_games_active`` from the store. Nothing once
        the store has stopped serving its schema (``store_stopped``; see ``keep_house_once``).

        A replica counts the games it creates and sees end, but games also become idle, and
        with a shared store other replicas create and finish games too; the database's count
        puts the gauge right again (every replica reports the same total: aggregate with max,
        not sum).
        """
        log = structlog.get_logger("referee.games")
        while True:
            await asyncio.sleep(every)
            await self.keep_house_once(log)

    async def keep_house_once(self, log: structlog.stdlib.BoundLogger) -> None:
        """One round of ``keep_house``, which does nothing once the store has stopped serving
        its schema (``store_stopped``): the store said why once, and every read would fail.

        The store may stop while the round waits for it (``follow_changes`` sets
        ``store_stopped`` meanwhile), so the flag is read again after every await, not only
        at the start: the round ends at its next step, and a step that failed because the
        store stopped under it is not logged. Read only at the start, a round under way went
        on to its next reads, which the store refused, and logged the failures this is to
        spare (``responses_forget_failed``, ``active_games_recount_failed``, a
        ``catch_up_failed`` traceback) for a stop that landed during one of its reads.
        """
        if self.store_stopped:
            return
        for game_id in list(self.behind):
            live = self.games.get(game_id)
            if live is None:
                self.behind.discard(game_id)  # left memory: a load reads the whole log
            else:
                await self._fold_in(live, log)  # logs nothing once the store has stopped
                if self.store_stopped:
                    return
        evicted = await self.evict_idle_games()
        if evicted:
            log.info("idle_games_evicted", games=evicted, held=len(self.games))
        if self.store_stopped:
            return
        try:
            await self.recount_active_games()
        except Exception:
            if not self.store_stopped:
                log.warning("active_games_recount_failed", exc_info=True)
        if not self.keep_responses or self.store_stopped:
            return
        try:
            forgotten = await self.store.forget_responses(self.clock() - self.keep_responses)
        except Exception:
            if not self.store_stopped:
                log.warning("responses_forget_failed", exc_info=True)
        else:
            if forgotten:
                log.info("responses_forgotten", games=forgotten)

    async def recount_active_games(self) -> None:
        """Set ``referee_games_active`` from the store's count of the games active now.

        Between recounts the gauge is moved by creations, ends and wakings, each judged against
        this recount's threshold (``counted_since``), not the current one: a game that went idle
        since the recount is still in the gauge, so it must not be added again when it wakes,
        and must be taken out when it ends. Judged against the current threshold, such a game
        was counted twice, or its end was never subtracted, until the next recount.

        The read cannot tell whether it saw a write that was under way while it ran, so the
        games such a write may move in or out of the count are left out of it and counted from
        memory afterwards, where their state is known: creations under way (none starts while
        the store reads), and games whose action being committed ends them or wakes them
        (``_moves``). Those left out whose write ends later move the gauge themselves, judged
        against this recount's threshold. Such a write that begins while the store reads is
        not left out of that read: the read is made again, leaving it out too, up to
        ``RECOUNT_READS`` reads (a game ends or wakes during a read of a millisecond or so
        rarely, twice in a row hardly ever). Before, the gauge took the read's number as it
        was: a creation stored just before it was counted twice (the read, then its own
        count), one stored during it lost, and a game that ended or woke during it left the
        gauge one off until the next recount, 15 s later.
        """
        async with self._counting:
            for _ in range(RECOUNT_READS):
                since = self.active_since()
                unsure = set(self._creating)
                for game_id, ends in self._committing.items():
                    live = self.games.get(game_id)
                    if live is None or _moves(live, ends, since):
                        unsure.add(game_id)
                recount = self._recount = _Recount(since)
                try:
                    count = await self.store.count_active_games(since, excluding=unsure)
                finally:
                    self._recount = None
                if recount.begun <= unsure:
                    break
            # (Else a game that began to end or wake during each of the reads, the last one's
            # may leave the gauge one off until the next recount.)
            for game_id in unsure:
                live = self.games.get(game_id)
                if live is not None and not live.state.over and _counts(live, since):
                    count += 1
            self.counted_since = since
            metrics.GAMES_ACTIVE.set(count)

    # ----------------------------------------------------------------------------------------
    # Who is calling

    def authenticate(self, live: LiveGame, token: str | None) -> Caller:
        if token is None:
            raise ServiceError(
                grpc.StatusCode.UNAUTHENTICATED, "send authorization: Bearer <token> metadata"
            )
        if live.callers is None:
            record = live.record
            live.callers = callers_by_hash(
                record.seat_token_hashes,
                record.spectator_token_hash,
                [record.adjudicator_token_hash, self.server_adjudicator_hash],
            )
        caller = live.known_tokens.get(token)
        if caller is not None:
            return caller
        caller = live.callers.get(token_hash(token))
        if caller is None:
            raise ServiceError(
                grpc.StatusCode.UNAUTHENTICATED, "the token is not valid for this game"
            )
        live.known_tokens[token] = caller
        return caller

    # ----------------------------------------------------------------------------------------
    # Reading

    def view_of(self, live: LiveGame, caller: Caller) -> dict[str, object]:
        return _view_with_id(live.state, caller, live, live.commitment)

    def visible(self, caller: Caller, stored: Mapping[str, object]) -> bool:
        return visible_to(
            Event(str(stored["kind"]), _audience(stored["audience"]), {}),
            caller.view_role,
        )

    async def get(
        self, game_id: str, token: str | None, refresh: bool = True
    ) -> tuple[LiveGame, Caller]:
        live = await self.load(game_id, refresh)
        caller = self.authenticate(live, token)
        annotate(role=caller.role, seat=caller.seat)
        return live, caller

    async def legal(self, game_id: str, token: str | None) -> tuple[int, list[dict[str, object]]]:
        live, caller = await self.get(game_id, token)
        if caller.role != SEAT or caller.seat is None:
            raise ServiceError(grpc.StatusCode.PERMISSION_DENIED, "only a seat has legal actions")
        return live.state.version, legal_actions(live.state, caller.seat)

    # ----------------------------------------------------------------------------------------
    # Acting

    async def submit(
        self,
        game_id: str,
        token: str | None,
        action_json: Mapping[str, object],
        expected_version: int,
        request_id: str,
    ) -> pb.SubmitActionResponse:
        # Refreshed under the lock below; a game held in memory needs no await (hot path).
        live = self._cached(game_id) or await self.load(game_id, refresh=False)
        caller: Caller | None = None
        try:
            caller = self.authenticate(live, token)
            annotate(role=caller.role, seat=caller.seat)
            if caller.role != SEAT or caller.seat is None:
                raise ServiceError(
                    grpc.StatusCode.PERMISSION_DENIED,
                    f"the {caller.role} cannot act; only a seat acts, for itself",
                )
            if len(request_id) > MAX_REQUEST_ID:
                raise invalid(
                    f"request_id is longer than {MAX_REQUEST_ID} characters", "request_id"
                )
            if "\x00" in request_id:  # PostgreSQL text cannot hold it: refused on every store
                raise invalid("request_id must not contain a NUL character", "request_id")
            # Versions start at 0: a negative one is a client's broken counter, not a version
            # it saw. It was answered ABORTED like any other mismatch, which a client reads as
            # "re-read and retry", hiding the bug; refused as WatchGame's from_version is.
            if expected_version < 0:
                raise invalid("expected_version must not be negative", "expected_version")
            if not action_json:  # no oneof member set: a malformed action (A.5)
                raise invalid("no action given", "action", reason="MALFORMED_ACTION")
        except ServiceError as refusal:
            if caller is None or caller.role == SPECTATOR:
                self._spend_refusal_budget(game_id, refusal)
            # Issue 4: the audit log holds every request, accepted or refused, so a request
            # refused before reaching the rules (bad token, a spectator acting) is logged too.
            await self.store.record_refusal(
                game_id,
                self._audit_row(
                    live,
                    caller.seat if caller is not None else None,
                    action_json or None,
                    "refused",
                    refusal.reason,
                    # As much of the id as may be stored (NUL is kept out of every store).
                    f"-:{request_id[:MAX_REQUEST_ID].replace(chr(0), '?')}" if request_id else "",
                    live.state.version,
                    role=caller.role if caller is not None else "anonymous",
                ),
            )
            raise
        seat = caller.seat
        # Keyed by seat too, so one seat's request id can never fetch another seat's response.
        key = f"{seat}:{request_id}" if request_id else ""
        # Counted from here (no await since the lookup) until the lock is let go: an idle game
        # is never dropped from memory while a request holds it (evict_idle_games).
        live.users += 1
        try:
            async with live.lock:
                if self.shared_store:
                    await self._catch_up(live)
                if key and expected_version != live.state.version:
                    # A retry of an applied request carries the version it was sent at, which
                    # is stale now: only then is the stored response looked up, so the common
                    # path costs no extra read. (A reused id at the current version is refused
                    # by the store's unique key, and looked up then: see _conflicted.)
                    stored = await self._stored_answer(
                        live, seat, key, action_json, expected_version
                    )
                    if stored is not None:
                        return stored
                try:
                    accepted = self._accept(live, caller, action_json, expected_version, key)
                except _Refused as refused:
                    await self._refuse(live, seat, action_json, refused.code, key)
                    raise refused.error from None
                return await self._commit(live, accepted, key)
        finally:
            live.users -= 1

    def _spend_refusal_budget(self, game_id: str, refusal: ServiceError) -> None:
        """Let ``refusal`` of a caller without a seat be audited, or refuse it unaudited with
        RESOURCE_EXHAUSTED once the game's budget is spent (referee/service/limits.py). The
        refusal it stands for is named in the metadata (``refused``: UNAUTHENTICATED or
        PERMISSION_DENIED), so a client can tell that waiting will not help."""
        wait = self.refusal_budgets.take(game_id, self.monotonic())
        if wait > 0.0:
            metrics.REFUSALS_THROTTLED.inc()
            raise ServiceError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                "too many refused requests for this game from callers that are not one of its"
                f" seats; try again in {math.ceil(wait * 10) / 10:.1f} s (this one was"
                f" {refusal.code.name})",
                reason="TOO_MANY_REFUSALS",
                metadata={"refused": refusal.code.name},
                retry_delay=wait,
            ) from None

    async def _stored_answer(
        self,
        live: LiveGame,
        seat: int,
        key: str,
        action_json: Mapping[str, object],
        expected_version: int,
    ) -> pb.SubmitActionResponse | None:
        """The stored response when this request is a retry of the one that used ``key``.

        A retry is the same action sent at the same version, so its stored response is returned
        and nothing is applied again. The same id with another action, or sent at another
        version, is not a retry: answering it with the first action's success would acknowledge
        an action nobody checked, so it is refused (``REQUEST_ID_REUSED``, audited) and the
        client must use a new id. None when ``key`` was never used.
        """
        game_id = live.record.game_id
        stored = await self.store.stored_response(game_id, key)
        if stored is None:
            return None
        answer = pb.SubmitActionResponse.FromString(stored)
        applied_at = answer.version - 1  # every accepted action moves the version by one
        same = expected_version == applied_at and await self._logged_action(
            game_id, answer.version
        ) == _canonical_or_none(action_json)
        if same:
            annotate(outcome="accepted", version=answer.version)
            return answer
        await self._refuse(live, seat, action_json, "REQUEST_ID_REUSED", key)
        raise ServiceError(
            grpc.StatusCode.ALREADY_EXISTS,
            f"request_id {key.partition(':')[2]!r} already named another action of this seat"
            f" (accepted at version {applied_at}); send a new request_id",
            reason="REQUEST_ID_REUSED",
            field="request_id",
            metadata={"version": str(live.state.version)},
        )

    async def _logged_action(self, game_id: str, version: int) -> Mapping[str, object] | None:
        """The canonical action that made ``version`` (a rare read: retries only).

        Read from the row it must be in or later: a row's seq is at least its version + 1
        (``_rows_not_wanted``), so the rows up to seq ``version`` are older. Was the whole log,
        thousands of rows in a long game, for each retry."""
        for row in await self.store.load_log(game_id, version):
            if row.version > version:
                break
            if row.kind == "action" and row.version == version:
                return row.payload
        return None

    def _accept(
        self,
        live: LiveGame,
        caller: Caller,
        action_json: Mapping[str, object],
        expected_version: int,
        key: str,
    ) -> _Accepted:
        """Check the action against the game (the engine's one ``apply``) and build everything
        its commit stores and its caller is answered with; raises ``_Refused``.

        No await: the whole check runs in one step of the caller's task, under the game's lock.
        """
        state = live.state
        game_id = live.record.game_id
        seat = caller.seat
        assert seat is not None  # a seat's caller (checked in submit)
        kind = str(action_json.get("type", ""))
        if expected_version != state.version:
            raise _Refused(
                "ABORTED",
                ServiceError(
                    grpc.StatusCode.ABORTED,
                    f"expected version {expected_version}, but the game is at version"
                    f" {state.version}",
                    reason="STALE_VERSION",
                    metadata={"version": str(state.version)},
                ),
            )
        try:
            action = decode_action(action_json)
            new_state, events = apply(state, seat, action)
        except IllegalAction as refused:
            metrics.actions(live.rules.variant, kind or "unknown", "refused").inc()
            metrics.violations(refused.code).inc()
            code = (
                grpc.StatusCode.INVALID_ARGUMENT
                if refused.code == "MALFORMED_ACTION"
                else grpc.StatusCode.FAILED_PRECONDITION
            )
            raise _Refused(
                refused.code,
                ServiceError(
                    code,
                    refused.message,
                    reason=refused.code,
                    field=refused.field and f"action.{refused.field}",
                    metadata={"version": str(state.version)},
                ),
            ) from None
        canonical = encode_action(action)
        first_event = live.event_count + 1
        stored_events = _number(events, first_event, new_state.version)
        if new_state.hands_completed > state.hands_completed:
            # The hand is over: reveal its deal's salt so anyone can check the commitment.
            hand = state.hands_completed
            reveal = Event("deal_salt", EVERYONE, {"hand": hand, "salt": live.salts.get(hand, "")})
            stored_events += _number([reveal], first_event + len(stored_events), new_state.version)
            events = [*events, reveal]
        rows = [
            LogRow(live.last_seq + 1, new_state.version, "action", seat, canonical, stored_events)
        ]
        commitment = live.commitment
        if new_state.hand is None and not new_state.over:
            new_state, deal_row, dealt = self._deal(
                new_state,
                live.deals,
                seq=live.last_seq + 2,
                first_event=first_event + len(stored_events),
            )
            rows.append(deal_row)
            events = [*events, *dealt]
            commitment = _commitment_of(deal_row)
        all_events = [e for row in rows for e in row.events]
        response = pb.SubmitActionResponse(
            version=new_state.version,
            view_json=json_text(_view_with_id(new_state, caller, live, commitment)),
        )
        # Hot path: from the engine's events (``events`` and ``all_events`` match one to one),
        # not from their stored form, which ``visible`` would turn back into an Event and
        # ``stored_event_to_proto`` filter back to its data, event by event.
        role = caller.view_role
        for event, stored in zip(events, all_events, strict=True):
            if visible_to(event, role):
                add_event(response, event, _seq(stored), _version(stored))
        audit = self._audit_row(live, seat, canonical, "accepted", "", key, new_state.version)
        commit = Commit(
            game_id=game_id,
            expected_version=state.version,
            rows=rows,
            audit=audit,
            request_id=key or f"{seat}:auto:{secrets.token_hex(8)}",
            response=response.SerializeToString(),
            over=new_state.over,
        )
        return _Accepted(commit, new_state, all_events, response, kind)

    async def _commit(
        self, live: LiveGame, accepted: _Accepted, key: str
    ) -> pb.SubmitActionResponse:
        """Make the accepted action durable, then (only then) move ``live`` to its new state.

        Runs under the game's lock. Issue 4 ("nothing acknowledged is ever lost", "a retried
        request_id returns the stored response"): gRPC cancels this handler when the client's
        deadline expires or it goes away, but a commit handed to the store may still become
        durable (the store does not withdraw it). Were the in-memory update then skipped, this
        replica would stay a version behind the database: GetGame stale, watchers not told, and
        the retry ABORTED instead of answered. So the update runs whenever the commit lands
        and the lock is held until it has (``_durably``). A version conflict (another replica
        committed first) changes nothing but folding in that replica's rows.
        """
        started = time.perf_counter()
        game_id = live.record.game_id
        ends = accepted.new_state.over
        self._committing[game_id] = ends
        recount = self._recount
        if recount is not None and _moves(live, ends, recount.since):
            recount.begun.add(game_id)

        async def failed(error: BaseException) -> None:  # the caller was cancelled meanwhile
            if isinstance(error, VersionConflict):
                with contextlib.suppress(ServiceError):
                    await self._conflicted(live, accepted.commit, key, error)
            elif isinstance(error, GameOver):
                with contextlib.suppress(ServiceError):
                    await self._ended(live, accepted.commit, key, error)
            else:
                self._maybe_landed(live)

        try:
            await _durably(
                self.store.commit(accepted.commit),
                lambda _: self._committed(live, accepted, started),
                failed,
            )
        except VersionConflict as conflict:
            return await self._conflicted(live, accepted.commit, key, conflict)
        except GameOver as over:
            await self._ended(live, accepted.commit, key, over)
        except Exception:
            self._maybe_landed(live)
            raise
        finally:
            del self._committing[game_id]
        return accepted.response

    def _maybe_landed(self, live: LiveGame) -> None:
        """The store failed ``live``'s commit, but the commit may have landed all the same
        (PostgreSQL: the connection lost after ``COMMIT`` was sent). The next submission here
        would catch up under the lock, but until then this replica's reads and watchers would
        miss the action, and a replica ignores its own announcements: so the game goes among
        the games ``behind``, which ``keep_house`` catches up (nothing to read if it did not
        land). ``follow_doubtful_commits`` tries at once, as soon as the lock is free."""
        self.behind.add(live.record.game_id)
        self._doubted.add(live.record.game_id)
        self._doubt.set()

    async def follow_doubtful_commits(self) -> None:
        """Catch up each game whose commit failed but may have landed (``_maybe_landed``) as
        soon as its lock is free (runs until cancelled).

        Left to ``keep_house``, a replica's watchers waited up to a housekeeping period (15 s)
        for an action that was durable, and its reads showed the version before it, when the
        PostgreSQL connection was lost after ``COMMIT`` was sent. One quiet try per failed
        commit: if the store is still failing, the commit's own failure has been logged and
        answered, and the game stays ``behind`` for ``keep_house``, which tries again (and
        logs) every round.
        """
        log = structlog.get_logger("referee.games")
        while True:
            await self._doubt.wait()
            self._doubt.clear()
            doubted, self._doubted = self._doubted, set()
            for game_id in doubted:
                live = self.games.get(game_id)
                if live is None or game_id not in self.behind or self.store_stopped:
                    continue  # left memory (a load reads the whole log), or caught up already
                await self._fold_in(live, log, quiet=True)

    async def _conflicted(
        self, live: LiveGame, commit: Commit, key: str, conflict: VersionConflict
    ) -> pb.SubmitActionResponse:
        """The store refused ``commit``: another replica committed first, or the request id is
        already stored (the original of this very request, committed elsewhere: its stored
        response is the answer; or an id reused for another action, refused by
        ``_stored_answer``). Folds in the other rows, audits the refusal, raises ABORTED."""
        await self._catch_up(live)
        seat = commit.rows[0].seat
        assert seat is not None
        action = commit.audit.action or {}
        if key:
            stored = await self._stored_answer(live, seat, key, action, commit.expected_version)
            if stored is not None:
                return stored
        await self._refuse(live, seat, action, "ABORTED", key)
        raise ServiceError(
            grpc.StatusCode.ABORTED,
            f"the game moved to version {conflict.current}",
            reason="STALE_VERSION",
            metadata={"version": str(conflict.current)},
        )

    async def _ended(self, live: LiveGame, commit: Commit, key: str, over: GameOver) -> NoReturn:
        """The store refused ``commit``: the game has ended, which the engine's copy here did
        not know (the engine refuses any action after the end itself, so the two disagree: a
        bug, or a stored game changed by hand). The store's record stands: the copy here ends
        too (``_over_in_store``), and the request is audited and answered as the engine answers
        an action after the end (GAME_OVER), not as a store failure (UNAVAILABLE would invite
        retries that meet the same refusal)."""
        game_id = live.record.game_id
        structlog.get_logger("referee.games").warning(
            "commit_refused_game_over", game_id=game_id, ended_at_version=over.version
        )
        self._over_in_store(live)
        seat = commit.rows[0].seat
        assert seat is not None
        await self._refuse(live, seat, commit.audit.action or {}, "GAME_OVER", key)
        raise ServiceError(
            grpc.StatusCode.FAILED_PRECONDITION,
            f"the game is over (it ended at version {over.version})",
            reason="GAME_OVER",
            metadata={"version": str(over.version)},
        )

    def _over_in_store(self, live: LiveGame) -> None:
        """The store records ``live`` as ended, though the log this copy was built from does
        not end it (``_ended``; a load of such a game): take the store's word, as a catch-up
        takes the rows another replica wrote. Left believing the game went on, this copy
        offered legal actions, showed it in progress, kept its watchers waiting and held it
        among the games in progress, and every action was checked and sent to the store, to
        be refused there again.

        Over here too, the engine refuses every action itself (GAME_OVER, audited, the store
        not tried), legal actions are none, views say over, watchers' streams end, and the game
        moves among the finished ones; the winner is unknown (none), the hand as it stood. A
        rebuilt copy (a restart, a finished game dropped from memory) is over again: ``load``
        comes here too. ``referee_games_active`` is left to the next recount from the store,
        which no longer counts the game.
        """
        live.state = evolve_game(live.state, over=True)
        _announce(live)
        if self.games.get(live.record.game_id) is live:
            self._retire(live)

    def _committed(self, live: LiveGame, accepted: _Accepted, started: float) -> None:
        """The accepted action is durable: move the game on in memory and tell its watchers."""
        metrics.STORE_COMMIT_SECONDS.observe(time.perf_counter() - started)
        metrics.actions(live.rules.variant, accepted.kind, "accepted").inc()
        # Here, not in the servicer: an action made durable after its caller was cancelled
        # (a deadline) was applied all the same, and its log line must say so.
        annotate(outcome="accepted", version=accepted.new_state.version)
        since = self.counted_since
        counted = since is None or live.active_at >= since  # in referee_games_active
        live.active_at = accepted.commit.audit.time  # as the store now has it
        rows = accepted.commit.rows
        for row in rows:
            if row.kind == "deal":
                _remember_deal(live, row)
        new_state = accepted.new_state
        live.state = new_state
        live.last_seq = rows[-1].seq
        live.events.extend(map(_packed, accepted.events))
        live.event_count += len(accepted.events)
        _keep_recent_events(live, self.events_in_memory)
        _announce(live)
        if new_state.over:
            if counted:
                metrics.GAMES_ACTIVE.dec()
            self._retire(live)
        elif not counted:
            metrics.GAMES_ACTIVE.inc()  # an idle game woke up

    def _audit_row(
        self,
        live: LiveGame,
        seat: int | None,
        action: Mapping[str, object] | None,
        outcome: str,
        code: str,
        key: str,
        version: int,
        rpc: str = "SubmitAction",
        role: str = SEAT,
    ) -> AuditRow:
        if action is not None:
            action = dict(action) if outcome == "accepted" else _bounded_action(action)
        return AuditRow(
            seq=0,
            time=self.clock(),
            role=role,
            seat=seat,
            rpc=rpc,
            action=action,
            public_action=public_action(action, outcome == "accepted") if action else None,
            outcome=outcome,
            code=code,
            request_id=key.partition(":")[2] if key else "",
            version=version,
            previous_hash="",
        )

    async def _refuse(
        self, live: LiveGame, seat: int, action: Mapping[str, object], code: str, key: str
    ) -> None:
        await self.store.record_refusal(
            live.record.game_id,
            self._audit_row(live, seat, action, "refused", code, key, live.state.version),
        )

    # ----------------------------------------------------------------------------------------
    # Watching, exporting, auditing

    async def watch(
        self, game_id: str, token: str | None, from_version: int, *, after_seq: int = 0
    ) -> AsyncIterator[pb.WatchGameResponse]:
        """The caller's events after ``from_version`` (or, resuming, after event ``after_seq``),
        then new ones as they are committed.

        Events are numbered 1, 2, ... and their versions never decrease; one version may carry
        several events (an action's, then the next hand's deal), which is why resuming goes by
        seq. When some events the caller asked for are older than the watch window
        (``--watch-window``), a snapshot of the caller's current view comes first and the
        stream goes on from there; those that only left memory (``--events-in-memory``) are
        read from the store's log and sent as events.
        """
        live, caller = await self.get(game_id, token)  # with a shared store: caught up
        if self._watch_ending is not None:
            raise self._watch_ending(after_seq, live.state.version)
        if after_seq > live.event_count:
            # Nobody can have received an event the game has not had: the cursor belongs to
            # another game, or is corrupt. Accepted, it would skip every event up to it silently.
            raise invalid(
                f"after_seq {after_seq} is beyond the game's last event (seq"
                f" {live.event_count}): resume from the seq of the last event received",
                "after_seq",
            )
        if self.watching >= self.max_watchers:
            raise over_limit(
                f"this server follows at most {self.max_watchers} WatchGame streams at once;"
                " try again later",
                reason="TOO_MANY_WATCHERS",
                limit=self.max_watchers,
                version=str(live.state.version),
            )
        live.watchers += 1  # keeps the object in memory while this stream follows it
        self.watching += 1
        metrics.WATCHERS_ACTIVE.set(self.watching)
        try:
            async for message in self._follow(live, caller, from_version, after_seq):
                yield message
        finally:
            live.watchers -= 1
            self.watching -= 1
            metrics.WATCHERS_ACTIVE.set(self.watching)

    async def _follow(
        self, live: LiveGame, caller: Caller, from_version: int, after_seq: int
    ) -> AsyncIterator[pb.WatchGameResponse]:
        # Issue 4 / referee.proto: from_version 0 means the whole game, and the first deal's
        # events carry version 0, so "after version 0" must include them.
        after = from_version if from_version > 0 and not after_seq else -1
        sent = after_seq  # the last event seq handled
        while True:
            first_kept = live.event_count - len(live.events) + 1
            # An event the caller may want (its seq after ``sent``, its version after
            # ``after``) has left memory: it is read from the store's log, unless it is older
            # than the watch window, when a snapshot stands for everything up to now.
            if first_kept > sent + 1 and live.dropped_version > after:
                resumable_from = live.event_count - self.watch_window + 1
                read: tuple[list[Mapping[str, object]], int] | None = None
                if not _surely_older_than_the_window(live, sent, after, resumable_from):
                    read = await self._events_left_memory(live, sent, after)
                if read is not None and (not read[0] or _seq(read[0][0]) >= resumable_from):
                    older, through = read
                    for stored in older:
                        if self.visible(caller, stored):
                            yield pb.WatchGameResponse(event=stored_event_to_proto(stored))
                    sent = through  # every event up to it was in the read
                    continue  # memory may have moved on meanwhile: look again
                # The events the snapshot stands for are those up to now, not up to when the
                # client has taken it: the yield waits for that, and actions committed
                # meanwhile come after the snapshot's state (their events may even have left
                # memory by then: look again).
                shown = live.event_count
                yield pb.WatchGameResponse(
                    snapshot=pb.Snapshot(
                        version=live.state.version,
                        view_json=json_text(self.view_of(live, caller)),
                    )
                )
                sent = shown
                continue
            # The window holds seqs first, first + 1, ... (read again: it may have moved while
            # the snapshot was sent); those already sent are skipped unread.
            first = live.event_count - len(live.events) + 1
            for packed in live.events[max(0, sent + 1 - first) :]:
                stored = orjson.loads(packed)
                seq = _seq(stored)
                if seq <= sent:
                    continue
                sent = seq
                if _version(stored) > after and self.visible(caller, stored):
                    yield pb.WatchGameResponse(event=stored_event_to_proto(stored))
            if live.state.over and live.event_count <= sent:
                return  # every event sent, the last one included
            if self._watch_ending is not None:
                raise self._watch_ending(sent, live.state.version)
            if live.event_count <= sent:
                loop = asyncio.get_running_loop()
                if live.changed is None:
                    live.changed = loop.create_future()
                if self._stopped is None:
                    self._stopped = loop.create_future()
                # asyncio.wait, unlike await, does not cancel the shared futures when this
                # watcher is cancelled: the other watchers keep waiting on them.
                await asyncio.wait(
                    (live.changed, self._stopped), return_when=asyncio.FIRST_COMPLETED
                )

    async def _events_left_memory(
        self, live: LiveGame, sent: int, after: int
    ) -> tuple[list[Mapping[str, object]], int]:
        """The game's events with seq after ``sent`` and version after ``after``, read from the
        store's log, which keeps every event as committed (seq and version inside); and the
        seq ``through`` which the read covers: the events after ``sent`` up to it, the caller's
        or not, are all in the list or not wanted.

        Memory keeps only the last ``events_in_memory`` events of a game (a long game's memory
        was mostly its events: bench/game_memory.py); a watcher behind them, within the watch
        window, gets the events it missed from the log, exactly as if they had been kept.

        The read covers every event this replica had when it returned and the log held when
        it was read, not only those that had left memory before it began: actions committed
        while the log is read push more events out of memory, and a watcher that read only up
        to where memory began read the whole log again for them, then again for those committed
        during that read, never catching up while the game kept moving. Events the log holds
        beyond this replica's (another replica's commits not folded in yet) are left to memory,
        so the stream never runs ahead of this replica's copy of the game.

        The read starts at the row of the first event wanted, or a little before it, never at
        the log's start (``_rows_not_wanted``): a long game's log is thousands of rows, and a
        watcher that stays behind memory reads again every ``events_in_memory`` events.
        """
        game_id = live.record.game_id
        by_version, by_event = _rows_not_wanted(live, sent, after)
        rows = await self.store.load_log(game_id, max(by_version, by_event))
        if by_event > by_version and not _reaches_event(rows, sent + 1):
            # A row without events (this code writes none; a log written elsewhere, or edited)
            # made the count by events skip too far: the bound by version holds whatever the
            # rows hold. Unchecked, the watcher lost the events skipped, or, finding none it
            # wanted, read again for ever.
            rows = await self.store.load_log(game_id, by_version)
        logged = [event for row in rows for event in row.events]
        # No await from here on: ``event_count`` is what this replica has now. Every event it
        # has was durable before it was kept, so the read has those before the read began.
        through = max(sent, min(live.event_count, _seq(logged[-1]) if logged else sent))
        older = [e for e in logged if sent < _seq(e) <= through and _version(e) > after]
        return older, through

    def stop_watching(self) -> None:
        """The server is shutting down: end every WatchGame stream now, resumable.

        A stream follows its game until the game ends, so it would outlast any grace period:
        gRPC would hold the shutdown for all of it and then cancel the stream with a bare
        "Cancelling all calls". Instead each stream sends the events already committed, then
        ends UNAVAILABLE, reason SHUTTING_DOWN, its ``after_seq`` metadata saying where to
        resume (on another replica, or this server once it is back); a new stream is refused
        the same way. The shutdown then waits only for the unary calls in flight.
        """
        self.end_watches(_shutting_down)

    def end_watches(self, ending: Callable[[int, int], ServiceError]) -> None:
        """End every WatchGame stream now, and refuse new ones, with ``ending(after_seq,
        version)``: each stream first sends the events already committed. The first ending
        given stays (a shutdown after the store stopped serving keeps saying why)."""
        if self._watch_ending is None:
            self._watch_ending = ending
        if self._stopped is not None and not self._stopped.done():
            self._stopped.set_result(None)

    async def export(self, game_id: str, token: str | None) -> dict[str, object]:
        live, caller = await self.get(game_id, token)
        if caller.role != ADJUDICATOR and not live.state.over:
            raise ServiceError(
                grpc.StatusCode.PERMISSION_DENIED,
                "only the adjudicator may export a game before it ends",
            )
        return await self.export_record(live)

    async def export_record(self, live: LiveGame) -> dict[str, object]:
        log: list[LogEntry] = []
        log_deals: list[Deal] = []
        published: dict[int, object] = {}  # hand -> the commitment its deal_committed event sent
        salts: dict[int, object] = {}  # hand -> its deal's salt, as the log holds it
        for row in await self.store.load_log(live.record.game_id):
            if row.kind == "deal":
                log_deals.append(parse_deal(row.payload["deal"], "deal"))
                log.append(LogEntry(None, deal=log_deals[-1]))
                salts[len(log_deals) - 1] = row.payload.get("salt")
                for event in row.events:
                    if event.get("kind") == "deal_committed":
                        published[len(log_deals) - 1] = event.get("commitment")
            else:
                log.append(LogEntry(row.seat, action=decode_action(row.payload)))
        record = export_record(
            live.rules,
            live.record.first_dealer,
            log,
            list(live.record.players) if live.record.players else None,
        )
        # Issue 4: the export reveals each deal's salt beside the commitment published when the
        # hand was dealt (the stored deal_committed event, not one computed now from the deal
        # and salt, which would check nothing), so anyone can check that the deal was fixed
        # then. pinochle-record/1 keeps "x-" keys and ignores them in audits. The salts come
        # from the log just read, like the hands: this replica's own copy (``live.salts``) may
        # lag a hand another replica dealt after this call caught the game up.
        hands = record["hands"]
        assert isinstance(hands, list)
        for number, hand in enumerate(hands):
            salt = salts.get(number)
            if isinstance(salt, str) and salt and isinstance(hand, dict):
                hand["x-deal-salt"] = salt
                if number in published:
                    hand["x-deal-commitment"] = published[number]
        return record

    async def audit_log(
        self, game_id: str, token: str | None, after_seq: int, limit: int
    ) -> tuple[Caller, list[AuditRow]]:
        _, caller = await self.get(game_id, token)
        try:
            rows = await self.store.audit_log(game_id, after_seq, limit)
        except UnreadableAuditEntry as damaged:
            raise unreadable_audit_entry(game_id, damaged.seq, damaged.detail) from None
        return caller, rows

    async def verify_audit_log(self, game_id: str, token: str | None) -> AuditVerification:
        await self.get(game_id, token)
        return await self.store.verify_audit_log(game_id)


def unreadable_audit_entry(game_id: str, seq: int, detail: str) -> ServiceError:
    """The answer to a read of an audit entry that cannot be read back (a tampered row: the
    store's ``UnreadableAuditEntry``, or a value no ``AuditEntry`` holds), logged as the error
    it is. DATA_LOSS, reason AUDIT_ENTRY_UNREADABLE, ``metadata["seq"]`` the entry: the row
    stays as it is and retrying will not help, so neither INTERNAL (a server bug) nor
    UNAVAILABLE (retry) fits. ``detail`` says what is wrong without the value itself; it goes
    to the log only."""
    structlog.get_logger("referee.games").error(
        "audit_entry_unreadable", game_id=game_id, seq=seq, detail=detail
    )
    return ServiceError(
        grpc.StatusCode.DATA_LOSS,
        f"audit entry {seq} cannot be read back: its stored row is damaged (VerifyAuditLog"
        " names the first bad entry)",
        reason="AUDIT_ENTRY_UNREADABLE",
        metadata={"seq": str(seq)},
    )


def _bounded_action(action: Mapping[str, object]) -> dict[str, object]:
    """A refused action as the audit log keeps it (``MAX_AUDITED_ACTION``)."""
    text = compact_json(action)
    if len(text) <= MAX_AUDITED_ACTION:
        return dict(action)
    return {
        "type": action.get("type"),
        "oversized": {
            "characters": len(text),
            "sha256": hashlib.sha256(text.encode()).hexdigest(),
        },
    }


def _check_player_name(name: str, field_name: str) -> None:
    if not name.strip():
        raise invalid(f"{field_name} must not be empty", field_name)
    if len(name) > MAX_PLAYER_NAME:
        raise invalid(f"{field_name} is longer than {MAX_PLAYER_NAME} characters", field_name)
    if any(unicodedata.category(c) == "Cc" or c in _BIDI_CONTROLS for c in name):
        raise invalid(
            f"{field_name} must not hold control or bidirectional formatting characters",
            field_name,
        )


def _canonical_or_none(action_json: Mapping[str, object]) -> Mapping[str, object] | None:
    """An action in its canonical JSON form, as the log stores it; None if it is malformed."""
    try:
        return encode_action(decode_action(action_json))
    except IllegalAction:
        return None


def _packed(event: Mapping[str, object]) -> str:
    """A stored event as ``LiveGame.events`` keeps it: compact JSON text, key order kept.

    Why not the dict: at about 400 bytes an event (the dict, its seq and version, and, for a
    game rebuilt from its log, its own copy of every key and card), the window of 512 events
    was most of a long game's memory (bench/game_memory.py: 215 KiB a game with the window
    full). Text, not orjson's bytes: orjson's output keeps the buffer it was written in, about
    3 KiB an event (tracemalloc), where the decoded text is exactly its length. Watchers decode
    what they send; an integer key (none today) would come back a string, as from the store.
    """
    return compact_json(event)


def _keep_recent_events(live: LiveGame, window: int) -> None:
    """Drop all but the last ``window`` events, remembering the last dropped one's version
    (a watcher needs a snapshot only when an event it wants was dropped)."""
    extra = len(live.events) - window
    if extra > 0:
        live.dropped_version = _version(orjson.loads(live.events[extra - 1]))
        del live.events[:extra]


def _surely_older_than_the_window(
    live: LiveGame, sent: int, after: int, resumable_from: int
) -> bool:
    """Whether a watcher that has had the events up to seq ``sent`` and wants those with a
    version after ``after`` (-1: any) wants one older than the watch window (which starts at
    seq ``resumable_from``), as far as memory tells: a snapshot is then due whatever the log
    holds, and reading it would be wasted. False leaves the answer to the read.

    The last event before the window decides: a wanted event before it makes it wanted too
    (versions never decrease). It has left memory, but its version is at least the last dropped
    event's (``dropped_version``) less one for each event between them: every version after 0
    has an event of its own (``_rows_not_wanted``; were a log row without events, this could
    only send a snapshot where events would do, which the protocol allows). A watcher after a
    seq, or from version 0, wants every version, so memory always tells; one from a later
    version, when the bound falls short of it (the answer may be events, or still a snapshot),
    reads.
    """
    before_window = resumable_from - 1
    if before_window <= sent:
        return False
    last_dropped = live.event_count - len(live.events)
    return max(0, live.dropped_version - (last_dropped - before_window)) > after


def _rows_not_wanted(live: LiveGame, sent: int, after: int) -> tuple[int, int]:
    """Two log seqs up to which no row holds an event with seq after ``sent`` and version after
    ``after`` (-1: any version): a read of the events a watcher missed starts after the later.

    Log rows are not events: a row (a deal, or an accepted action) holds one or more events,
    and one version may have two rows (an action, then the deal of the next hand). Both
    stores number a game's rows 1, 2, ... with no gap (``_numbered_log``), and so:

    * by version: row 1 is the first deal (version 0) and every version since has its own
      action row, so a row's seq is at least its version + 1, and the rows up to seq
      ``after + 1`` have versions up to ``after``;
    * by event: every row holds at least one event (a deal's ``hand_started``, an action's
      own), so the rows after the one holding event ``sent + 1``, up to this replica's last
      (``last_seq``, which holds event ``event_count``), are at most ``event_count - sent - 1``,
      and the rows up to ``last_seq - (event_count - sent)`` hold events up to ``sent``. A row
      without events would make this one skip too far: the reader checks (``_reaches_event``).

    ``last_seq`` and ``event_count`` always move together (a commit, a catch-up's row), with no
    await between; rows the log holds beyond ``last_seq`` are read, and left to memory.
    """
    by_version = max(0, after + 1)
    by_event = live.last_seq - (live.event_count - sent)
    return by_version, by_event


def _reaches_event(rows: Sequence[LogRow], seq: int) -> bool:
    """Whether the first of ``rows`` holds event ``seq`` or an earlier one, so that the rows
    before it hold none after ``seq - 1``."""
    return bool(rows) and bool(rows[0].events) and _seq(rows[0].events[0]) <= seq


def _remember_deal(live: LiveGame, deal_row: LogRow) -> None:
    """Keep a committed deal's salt, which stays secret until its hand ends, then is revealed,
    and its commitment, which every view shows while the hand is played."""
    hand = deal_row.payload["hand"]
    assert isinstance(hand, int)
    live.salts[hand] = str(deal_row.payload["salt"])
    live.commitment = _commitment_of(deal_row)


def _commitment_of(deal_row: LogRow) -> str:
    """The commitment a deal row's ``deal_committed`` event published."""
    for event in deal_row.events:
        if event.get("kind") == "deal_committed":
            return str(event.get("commitment"))
    return ""


def _with_commitment(out: dict[str, object], commitment: str) -> dict[str, object]:
    """``out``, a view, with its hand's deal commitment (RULES.md A.10 item 3: every role sees
    the deal commitments). The engine's view cannot: the salt, and so the commitment, is the
    service's. Views had none, so a client that joined mid-hand (GetGame, or a snapshot) could
    learn the commitment only by replaying the hand's events, which a long game drops."""
    hand = out["hand"]
    if isinstance(hand, dict):
        hand["commitment"] = commitment
    return out


async def _durably(
    write: Awaitable[T],
    on_durable: Callable[[T], None],
    on_failure: Callable[[BaseException], Awaitable[None]] | None = None,
) -> T:
    """Await a store write; ``on_durable(result)`` runs once it has committed, even if the
    caller is cancelled meanwhile (and ``on_failure(error)`` is awaited if it failed then).
    Then the cancellation is passed on.

    The write is awaited under ``asyncio.shield``, so cancelling the caller does not cancel it,
    and the caller does not return early either: it waits for the write (ignoring further
    cancellations) before re-raising ``CancelledError``. That matters because the caller holds
    the game's lock in an ``async with``: leaving early would release the lock before
    ``on_durable`` moved the game on, and the next submission would run against the old state.
    A store's future is awaited as it is (no task per write: this is every action's path).
    """
    pending = asyncio.ensure_future(write)
    try:
        result = await asyncio.shield(pending)
    except asyncio.CancelledError:
        while not pending.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait((pending,))
        if not pending.cancelled():  # the write's own cancellation (the loop shutting down)
            failure = pending.exception()  # retrieved: nobody else awaits it
            if failure is None:
                on_durable(pending.result())
            elif on_failure is not None:
                await on_failure(failure)
            if failure is not None and not isinstance(
                failure, ServiceError | VersionConflict | GameOver | TooManyGames
            ):
                # The caller is gone, so the store's failure (nothing committed; a retry will
                # tell) would pass silently: log it.
                structlog.get_logger("referee.games").warning(
                    "commit_failed_after_cancel", exc_info=failure
                )
        raise
    on_durable(result)
    return result


def _announce(live: LiveGame) -> None:
    """Wake the game's watchers: it has moved on."""
    changed = live.changed
    if changed is not None:
        live.changed = None
        if not changed.done():
            changed.set_result(None)


class _Refused(Exception):
    """An action refused before its commit: the code to audit and the error to answer."""

    def __init__(self, code: str, error: ServiceError) -> None:
        super().__init__(code)
        self.code = code
        self.error = error


# recount_active_games: how many times it reads the store at most when a game ends or wakes
# during each read.
RECOUNT_READS = 3


@dataclass(slots=True)
class _Recount:
    """A recount of ``referee_games_active`` while it reads the store: its threshold, and the
    games whose commit began meanwhile and may change whether they count (``_moves``)."""

    since: float | None
    begun: set[str] = field(default_factory=set)


def _counts(live: LiveGame, since: float | None) -> bool:
    """Whether ``live``, a game in progress, counts as active against the threshold ``since``."""
    return since is None or live.active_at >= since


def _moves(live: LiveGame, ends: bool, since: float | None) -> bool:
    """Whether an action committed to ``live`` changes whether it counts against ``since``:
    the action ends the game, or the game is idle and the action wakes it."""
    return ends or not _counts(live, since)


class _Accepted(NamedTuple):
    """An action the engine accepted, ready to commit: what is stored and what is answered."""

    commit: Commit
    new_state: GameState
    events: list[Mapping[str, object]]
    response: pb.SubmitActionResponse
    kind: str


def _audience(value: object) -> str | int:
    if isinstance(value, int):
        return value
    text = str(value)
    return int(text) if text.isdigit() else text


def _number(events: Sequence[Event], first_seq: int, version: int) -> list[dict[str, object]]:
    """Each event's stored form: ``Event.to_json()`` with its ``seq`` and ``version`` added.
    Hot path: added to the fresh dict ``to_json`` returns rather than to a copy of it."""
    numbered: list[dict[str, object]] = []
    for seq, event in enumerate(events, first_seq):
        stored = event.to_json()
        stored["seq"] = seq
        stored["version"] = version
        numbered.append(stored)
    return numbered


def _view_with_id(
    state: GameState, caller: Caller, live: LiveGame, commitment: str
) -> dict[str, object]:
    """The view GetGame gives (``view_of``), for a state not yet stored in ``live`` (whose
    hand's deal commitment is ``commitment``: the action may have dealt it)."""
    out = view(state, caller.view_role)
    out["game_id"] = live.record.game_id
    if live.record.players:  # issue 4: SubmitAction answers "the caller's new view"
        out["players"] = list(live.record.players)
    out["deal_mode"] = _deal_mode_shown(live.record.deal_source)
    return _with_commitment(out, commitment)


def _shutting_down(after_seq: int, version: int) -> ServiceError:
    """How a WatchGame stream ends when the server shuts down (GameManager.stop_watching)."""
    return _watch_ended(
        "the server is shutting down",
        "SHUTTING_DOWN",
        "to another server, or to this one once it is back",
        after_seq,
        version,
    )


def _store_lost(after_seq: int, version: int) -> ServiceError:
    """How a WatchGame stream ends when the store stopped serving its schema (``SchemaChanged``,
    GameManager.follow_changes): as every call of this server is answered then
    (``schema_changed``), with where to resume, on another server."""
    refused = schema_changed()
    return _watch_ended(refused.message, refused.reason, "to another server", after_seq, version)


def _watch_ended(why: str, reason: str, where: str, after_seq: int, version: int) -> ServiceError:
    """A WatchGame stream ended by the server (``end_watches``): UNAVAILABLE, saying ``why``
    and how to resume (``where``), ``after_seq`` and ``version`` in its metadata."""
    resume = (
        f"watch again with after_seq={after_seq}"
        if after_seq
        else "nothing was sent: send the same request again"
    )
    return ServiceError(
        grpc.StatusCode.UNAVAILABLE,
        f"{why}; {resume} ({where})",
        reason=reason,
        metadata={"after_seq": str(after_seq), "version": str(version)},
    )


def _seq(stored: Mapping[str, object]) -> int:
    seq = stored["seq"]
    assert isinstance(seq, int)
    return seq


def _version(stored: Mapping[str, object]) -> int:
    version = stored["version"]
    assert isinstance(version, int)
    return version


__all__ = ["SPECTATOR", "Created", "GameManager", "LiveGame"]
