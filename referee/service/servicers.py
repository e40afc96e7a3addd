"""The gRPC servicers: read the request, call the domain, build the reply. No rules here.

A method refuses by raising ``ServiceError``; the server's interceptor
(``referee.service.observability.ObservabilityInterceptor``) turns it into a rich status (ErrorInfo
with the A.5 code, BadRequest naming the field) and anything else into INTERNAL, which only a
server fault can cause. Refusals are handled there, once, rather than by a wrapper around each
method: every coroutine between gRPC and the game manager is resumed on every await of every
action, so the chain is kept short.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import math
from collections.abc import AsyncIterator
from typing import Final, TypeVar

import grpc
import orjson
import structlog
from google.protobuf import message as protobuf_message
from google.protobuf import struct_pb2, timestamp_pb2

from protos.pinochle.referee.v1 import referee_pb2 as pb
from protos.pinochle.referee.v1 import referee_pb2_grpc as pb_grpc
from referee.audit import audit_text
from referee.query import QueryError, answer_fields
from referee.rules.options import VARIANTS, allowed_values, option_schema, variant_defaults
from referee.service.auth import ADJUDICATOR, SEAT, SPECTATOR, bearer_token
from referee.service.convert import (
    action_to_json,
    dict_to_struct,
    json_text,
    struct_to_dict,
    structs,
    to_value,
)
from referee.service.errors import invalid, over_limit
from referee.service.games import GameManager, unreadable_audit_entry
from referee.service.logline import annotate
from referee.store.base import AuditRow, GamePosition, GameSummary, canonical_json, compact_json

log = structlog.get_logger("referee")
T = TypeVar("T")

_ROLE = {SEAT: pb.ROLE_SEAT, SPECTATOR: pb.ROLE_SPECTATOR, ADJUDICATOR: pb.ROLE_ADJUDICATOR}
MAX_AUDIT_PAGE = 1000
# A page of the audit log stops before this many bytes of entries (it always holds one entry
# when there is one), so it fits in a client's default 4 MiB receive limit however large the
# entries are: a page may hold fewer than page_size entries; the log's end is an empty page.
# It also stops before the server's own response limit (16 times --max-message-bytes), where
# that is smaller.
MAX_AUDIT_PAGE_BYTES = 2 * 1024 * 1024
# What an entry adds to a page beyond its own bytes: its field tag and length prefix.
_ENTRY_FRAMING = 6


# ListGames: the page size when none is asked for, and the largest asked for.
DEFAULT_GAMES_PAGE = 100
MAX_GAMES_PAGE = 1000
# A page token this server gives is about 60 characters for its own ids (24 hex digits), and
# under 400 for any id of MAX_GAME_ID characters; a longer one is refused unread.
MAX_PAGE_TOKEN = 512
# ListGames's filter by state: whether the games listed have ended (None: either).
_OVER_FILTER: dict[int, bool | None] = {
    pb.GAME_STATE_UNSPECIFIED: None,
    pb.GAME_STATE_IN_PROGRESS: False,
    pb.GAME_STATE_OVER: True,
}


def _token(context: grpc.aio.ServicerContext) -> str | None:  # type: ignore[type-arg]
    return bearer_token(context.invocation_metadata())


MAX_GAME_ID = 64  # the server's ids are 24 hex digits; a longer one cannot name a game


def _game_id(game_id: str) -> str:
    """The request's game id, checked; the call's log line names it from here on, so refused
    and failed calls say which game they were about too."""
    annotate(game=game_id)
    if not game_id:
        raise invalid("game_id is required", "game_id")
    if len(game_id) > MAX_GAME_ID:
        raise invalid(f"game_id is longer than {MAX_GAME_ID} characters", "game_id")
    if "\x00" in game_id:  # no id has one, and PostgreSQL text cannot hold it
        raise invalid("game_id must not contain a NUL character", "game_id")
    return game_id


class RefereeServicer(pb_grpc.RefereeServiceServicer):
    def __init__(self, games: GameManager, max_response_bytes: int = 2**31 - 1) -> None:
        self.games = games
        # The largest response gRPC sends for this server: a larger one fails the call.
        self.max_response_bytes = max_response_bytes

    async def CreateGame(  # noqa: N802 - gRPC method names
        self,
        request: pb.CreateGameRequest,
        context: grpc.aio.ServicerContext,  # type: ignore[type-arg]
    ) -> pb.CreateGameResponse:
        token = _token(context)
        self.games.check_creator(token)  # before the request is looked at (a creator credential)
        if not request.variant:
            raise invalid("variant is required", "variant")
        mode = request.WhichOneof("deal_mode")
        deal_mode: dict[str, object] = {"mode": "secure"}
        if mode == "seed":
            if not request.seed:
                raise invalid("seed must not be empty", "seed")
            deal_mode = {"mode": "seed", "seed": request.seed}
        elif mode == "given_deals":
            deal_mode = {
                "mode": "given",
                "deals": [
                    _plain(deal, f"given_deals.deals[{index}]")
                    for index, deal in enumerate(request.given_deals.deals)
                ],
            }
        options = _options(request)
        created = await self.games.create(
            variant=request.variant,
            options=options,
            first_dealer=request.first_dealer,
            deal_mode=deal_mode,
            players=list(request.player_names),
            token=token,
        )
        return pb.CreateGameResponse(
            game_id=created.game_id,
            seat_tokens=created.seat_tokens,
            spectator_token=created.spectator_token,
            adjudicator_token=created.adjudicator_token,
            version=created.version,
        )

    async def GetGame(  # noqa: N802
        self,
        request: pb.GetGameRequest,
        context: grpc.aio.ServicerContext,  # type: ignore[type-arg]
    ) -> pb.GetGameResponse:
        live, caller = await self.games.get(_game_id(request.game_id), _token(context))
        annotate(seat=caller.seat, role=caller.role)
        return pb.GetGameResponse(
            game_id=request.game_id,
            version=live.state.version,
            role=_ROLE[caller.role],
            seat=caller.seat or 0,
            view_json=json_text(self.games.view_of(live, caller)),
        )

    async def SubmitAction(  # noqa: N802
        self,
        request: pb.SubmitActionRequest,
        context: grpc.aio.ServicerContext,  # type: ignore[type-arg]
    ) -> pb.SubmitActionResponse:
        action = action_to_json(request.action)
        annotate(action=action.get("type"), request_id=request.request_id)
        game_id = _game_id(request.game_id)
        return await self.games.submit(
            game_id,
            _token(context),
            action,
            request.expected_version,
            request.request_id,
        )

    async def ListLegalActions(  # noqa: N802
        self,
        request: pb.ListLegalActionsRequest,
        context: grpc.aio.ServicerContext,  # type: ignore[type-arg]
    ) -> pb.ListLegalActionsResponse:
        version, actions = await self.games.legal(_game_id(request.game_id), _token(context))
        return pb.ListLegalActionsResponse(version=version, actions=structs(actions))

    async def WatchGame(  # noqa: N802
        self,
        request: pb.WatchGameRequest,
        context: grpc.aio.ServicerContext,  # type: ignore[type-arg]
    ) -> AsyncIterator[pb.WatchGameResponse]:
        if request.after_seq < 0:
            raise invalid("after_seq must not be negative", "after_seq")
        # Refused as after_seq is: read as 0, a negative version gave the whole game, so a
        # client's broken cursor went unnoticed. A version the game has not reached yet is
        # accepted (events after it are sent as they come; test_stream_review pins it).
        if request.from_version < 0:
            raise invalid("from_version must not be negative", "from_version")
        stream = self.games.watch(
            _game_id(request.game_id),
            _token(context),
            request.from_version,
            after_seq=request.after_seq,
        )
        async for item in stream:
            yield item

    async def GetAuditLog(  # noqa: N802
        self,
        request: pb.GetAuditLogRequest,
        context: grpc.aio.ServicerContext,  # type: ignore[type-arg]
    ) -> pb.GetAuditLogResponse:
        # Refused as WatchGame refuses it: read as 0, a negative after_seq gave the log from
        # its start, so a client's broken cursor went unnoticed.
        if request.after_seq < 0:
            raise invalid("after_seq must not be negative", "after_seq")
        limit = request.page_size or MAX_AUDIT_PAGE
        if not 0 < limit <= MAX_AUDIT_PAGE:
            raise invalid(f"page_size must be 1 to {MAX_AUDIT_PAGE}", "page_size")
        game_id = _game_id(request.game_id)
        caller, rows = await self.games.audit_log(
            game_id, _token(context), request.after_seq, limit
        )
        full = caller.role == ADJUDICATOR
        page = pb.GetAuditLogResponse()
        size = 0
        # Was 2 MiB whatever the server's response limit: with --max-message-bytes under
        # 128 KiB, every page of a long game failed RESOURCE_EXHAUSTED ("Sent message larger
        # than max") and the log could not be read at all.
        most = min(MAX_AUDIT_PAGE_BYTES, self.max_response_bytes)
        for row in rows:
            own = caller.role == SEAT and row.role == SEAT and row.seat == caller.seat
            try:
                entry = _audit_entry(row, full, own)
            except (ValueError, TypeError, OverflowError, protobuf_message.Error) as error:
                # A row the store could read that no AuditEntry holds (a time beyond the
                # Timestamp's years 1 to 9999, a seat beyond int32, an action nested deeper
                # than a Struct's 100 levels: protobuf's DecodeError): tampered with, as one
                # the store cannot read (the same answer, not INTERNAL).
                raise unreadable_audit_entry(game_id, row.seq, str(error)) from None
            size += entry.ByteSize() + _ENTRY_FRAMING
            if page.entries and size > most:
                break
            page.entries.append(entry)
        return page

    async def VerifyAuditLog(  # noqa: N802
        self,
        request: pb.VerifyAuditLogRequest,
        context: grpc.aio.ServicerContext,  # type: ignore[type-arg]
    ) -> pb.VerifyAuditLogResponse:
        result = await self.games.verify_audit_log(_game_id(request.game_id), _token(context))
        return pb.VerifyAuditLogResponse(
            intact=result.intact,
            entries=result.entries,
            first_bad_seq=result.first_bad_seq,
            detail=result.detail,
        )

    async def ExportGame(  # noqa: N802
        self,
        request: pb.ExportGameRequest,
        context: grpc.aio.ServicerContext,  # type: ignore[type-arg]
    ) -> pb.ExportGameResponse:
        record = await self.games.export(_game_id(request.game_id), _token(context))
        response = pb.ExportGameResponse(record=dict_to_struct(record))
        size = response.ByteSize()
        if size > self.max_response_bytes:
            # gRPC would fail the call after this handler returned ("Sent message larger than
            # max"), while the log line and grpc_server_handled_total said OK. A long game's
            # record is the one response that outgrows a small --max-message-bytes (views,
            # events and audit-log pages stay within it).
            raise over_limit(
                f"the record is {size} bytes; this server sends at most"
                f" {self.max_response_bytes} (16 times --max-message-bytes)",
                reason="RESPONSE_TOO_LARGE",
                limit=self.max_response_bytes,
            )
        return response

    async def AuditRecords(  # noqa: N802
        self,
        request: pb.AuditRecordsRequest,
        context: grpc.aio.ServicerContext,  # type: ignore[type-arg]
    ) -> AsyncIterator[pb.AuditRecordsResponse]:
        for index, text in enumerate(request.records):
            verdict = audit_text(text, f"records[{index}]", request.keep_going)
            yield pb.AuditRecordsResponse(index=index, verdict=dict_to_struct(verdict))
            await asyncio.sleep(0)  # let other RPCs run between records

    async def ListGames(  # noqa: N802
        self,
        request: pb.ListGamesRequest,
        context: grpc.aio.ServicerContext,  # type: ignore[type-arg]
    ) -> pb.ListGamesResponse:
        token = _token(context)
        self.games.check_lister(token)  # before the request is looked at, as CreateGame's
        if not 0 <= request.page_size <= MAX_GAMES_PAGE:
            raise invalid(f"page_size must be 0 to {MAX_GAMES_PAGE}", "page_size")
        if request.state not in _OVER_FILTER:
            raise invalid(f"state {request.state} is not a GameState", "state")
        if request.variant and request.variant not in VARIANTS:
            raise invalid(
                f"unknown variant {request.variant!r}; the variants are {', '.join(VARIANTS)}",
                "variant",
            )
        limit = request.page_size or DEFAULT_GAMES_PAGE
        # One more than the page, to tell whether another page follows.
        summaries = await self.games.list_games(
            token,
            after=_page_position(request.page_token),
            limit=limit + 1,
            over=_OVER_FILTER[request.state],
            variant=request.variant or None,
        )
        page = pb.ListGamesResponse()
        size = 0
        # A summary is at most about 1.1 KB (four names of 64 characters), so a full page fits
        # a client's default 4 MiB; a server whose response limit (16 times
        # --max-message-bytes) is smaller ends the page before it, as GetAuditLog's.
        for summary in summaries[:limit]:
            game = _game_summary(summary)
            size += game.ByteSize() + _ENTRY_FRAMING
            if page.games and size > self.max_response_bytes - MAX_PAGE_TOKEN:
                break
            page.games.append(game)
        if len(page.games) < len(summaries):
            page.next_page_token = _page_token(summaries[len(page.games) - 1].position)
        return page

    async def ListVariants(  # noqa: N802
        self,
        request: pb.ListVariantsRequest,
        context: grpc.aio.ServicerContext,  # type: ignore[type-arg]
    ) -> pb.ListVariantsResponse:
        schema = option_schema()
        variants = []
        for variant_id, info in VARIANTS.items():
            defaults = variant_defaults(variant_id)
            options = []
            for spec in schema:
                applies = spec.get("applies_to")
                if not isinstance(applies, list) or variant_id not in applies:
                    continue
                name = str(spec["name"])
                # Exactly what CreateGame accepts for this variant (not_supported and the
                # per-variant and game-only narrowing applied, integer bounds filled in).
                allowed = allowed_values(variant_id, name)
                options.append(
                    pb.OptionSpec(
                        name=name,
                        type=str(spec.get("type", "")),
                        allowed=to_value(json.loads(json.dumps(allowed))),
                        default_value=to_value(json.loads(json.dumps(defaults.get(name)))),
                        meaning=str(spec.get("meaning", "")),
                    )
                )
            variants.append(
                pb.Variant(
                    id=variant_id,
                    description=info.description,
                    players=info.players,
                    partnerships=info.partnerships,
                    options=options,
                )
            )
        return pb.ListVariantsResponse(variants=variants)


def to_timestamp(seconds: float) -> timestamp_pb2.Timestamp:
    """A wall-clock time as the store keeps it (seconds since 1970) as a Timestamp."""
    stamp = timestamp_pb2.Timestamp()
    stamp.FromNanoseconds(int(seconds * 1e9))
    return stamp


def _game_summary(summary: GameSummary) -> pb.GameSummary:
    """A ListGames entry: the summary's public fields (it holds no others)."""
    return pb.GameSummary(
        game_id=summary.game_id,
        variant=summary.variant,
        version=summary.version,
        over=summary.over,
        created_at=to_timestamp(summary.created_at),
        # 0: a store that never recorded it (none does now; kept unset rather than 1970).
        last_active_at=to_timestamp(summary.last_active_at) if summary.last_active_at else None,
        player_names=summary.players,
    )


def _page_token(position: GamePosition) -> str:
    """The opaque ListGames page token that continues after ``position``: base64url of the
    JSON ``[created_at, game_id]``. Keyset paging rather than an offset, so that games
    created or ended between two pages never make one listed twice or skipped."""
    return base64.urlsafe_b64encode(compact_json(list(position)).encode()).decode().rstrip("=")


def _page_position(page_token: str) -> GamePosition | None:
    """The position a ListGames page token continues after (None for ""); one this server
    did not make is INVALID_ARGUMENT naming ``page_token``."""
    if not page_token:
        return None
    malformed = invalid(
        "page_token is not one this server gave: send the previous response's"
        " next_page_token as it came, or none for the first page",
        "page_token",
    )
    if len(page_token) > MAX_PAGE_TOKEN:
        raise malformed
    try:
        decoded = orjson.loads(base64.urlsafe_b64decode(page_token + "=" * (-len(page_token) % 4)))
    except (binascii.Error, ValueError):  # orjson.JSONDecodeError is a ValueError
        raise malformed from None
    match decoded:
        case [int() | float() as created_at, str() as game_id] if (
            not isinstance(created_at, bool)
            and math.isfinite(created_at)
            and 0 < len(game_id) <= MAX_GAME_ID
            and "\x00" not in game_id
        ):
            return (float(created_at), game_id)
    raise malformed


def _audit_entry(row: AuditRow, full: bool, own: bool = False) -> pb.AuditEntry:
    """One audit row as the caller may see it: the adjudicator all of it; a seat its own
    requests in full and everyone else's public part. Another seat's refusal code is withheld:
    MUST_FOLLOW_SUIT or MUST_TRUMP on someone else's play would tell what that seat holds."""
    action = row.action if full or own else row.public_action
    code = row.code if full or own else ""
    return pb.AuditEntry(
        seq=row.seq,
        time=to_timestamp(row.time),
        role=_ROLE.get(row.role, pb.ROLE_UNSPECIFIED),
        seat=row.seat if row.seat is not None else 0,
        rpc=row.rpc,
        action=dict_to_struct(action) if action else None,
        outcome=pb.AUDIT_OUTCOME_ACCEPTED
        if row.outcome == "accepted"
        else pb.AUDIT_OUTCOME_REFUSED,
        code=code,
        request_id=row.request_id,
        version=row.version,
        # Issue 4, "seats see the public part": a hash covers the whole request (the cards of a
        # hidden pass, discard or refused play) and every other field it covers is shown, so a
        # seat could brute-force the hidden cards from it. Only the adjudicator gets the chain;
        # anyone may check it with VerifyAuditLog.
        previous_hash=row.previous_hash if full else "",
        hash=row.hash if full else "",
        # What the hash covers, whole: the time as the stored double (``time`` above is cut to
        # the nanosecond) and the public_action, which no other field shows; without them a
        # client could only compare hashes, not recompute them.
        hashed_content=canonical_json(row.content()).decode() if full else "",
    )


class RulesServicer(pb_grpc.RulesServiceServicer):
    """Stateless rules queries: the same ``answer_query`` as ``pinochle-referee query``.

    Refusals go through the interceptor like the referee's: a query the rules refuse is
    INVALID_ARGUMENT with a BadRequest naming the field at fault (``hand[0]``, ``trump``,
    ``options.target``), and the log line says ``outcome=refused``.
    """

    @staticmethod
    def _ask(query: dict[str, object]) -> dict[str, object]:
        try:
            return answer_fields(query)
        except QueryError as error:
            raise invalid(str(error), error.field) from None

    @staticmethod
    def _base(kind: str, variant: str, options: object) -> dict[str, object]:
        query: dict[str, object] = {"kind": kind}
        if variant:
            query["variant"] = variant
        if options is not None:
            query["options"] = options
        return query

    async def ScoreMeld(  # noqa: N802
        self,
        request: pb.ScoreMeldRequest,
        context: grpc.aio.ServicerContext,  # type: ignore[type-arg]
    ) -> pb.ScoreMeldResponse:
        query = self._base("meld", request.variant, _options(request))
        query |= {"hand": list(request.hand), "trump": request.trump}
        answer = self._ask(query)
        melds = answer["melds"]
        assert isinstance(melds, list)
        # Unreachable with meld_values bounded (MELD_VALUE_MAX); kept so that an int32
        # overflow can only ever be a refusal naming the option, never a server fault.
        total = _int32(answer["total"], "options.meld_values")
        return pb.ScoreMeldResponse(total=total, melds=[pb.MeldScore(**m) for m in melds])

    async def LegalPlays(  # noqa: N802
        self,
        request: pb.LegalPlaysRequest,
        context: grpc.aio.ServicerContext,  # type: ignore[type-arg]
    ) -> pb.LegalPlaysResponse:
        query = self._base("legal_plays", request.variant, _options(request))
        query |= {
            "hand": list(request.hand),
            "trump": request.trump,
            "trick": list(request.trick),
        }
        if request.phase:
            query["phase"] = request.phase
        if request.HasField("seat_of_partner_in_trick"):
            query["seat_of_partner_in_trick"] = request.seat_of_partner_in_trick
        answer = self._ask(query)
        legal = answer["legal"]
        assert isinstance(legal, list)
        return pb.LegalPlaysResponse(legal=legal)

    async def TrickWinner(  # noqa: N802
        self,
        request: pb.TrickWinnerRequest,
        context: grpc.aio.ServicerContext,  # type: ignore[type-arg]
    ) -> pb.TrickWinnerResponse:
        query = self._base("trick_winner", request.variant, _options(request))
        query |= {"trick": list(request.trick), "trump": request.trump}
        answer = self._ask(query)
        return pb.TrickWinnerResponse(winner=int(str(answer["winner"])))

    async def TrickPoints(  # noqa: N802
        self,
        request: pb.TrickPointsRequest,
        context: grpc.aio.ServicerContext,  # type: ignore[type-arg]
    ) -> pb.TrickPointsResponse:
        query = self._base("trick_points", request.variant, _options(request))
        query |= {"cards": list(request.cards), "last": request.last}
        answer = self._ask(query)
        # A trick's cards are worth at most 44; only a last-trick bonus near the int32 limit
        # (any int32 is allowed) can take the sum out of range: then it is the option at fault.
        return pb.TrickPointsResponse(points=_int32(answer["points"], "options.last_trick_bonus"))

    async def ScoreHand(  # noqa: N802
        self,
        request: pb.ScoreHandRequest,
        context: grpc.aio.ServicerContext,  # type: ignore[type-arg]
    ) -> pb.ScoreHandResponse:
        for name in ("meld", "points", "dix"):
            for index, figure in enumerate(getattr(request, name)):
                if figure > MAX_HAND_FIGURE:
                    raise invalid(
                        f"{name}[{index}]: {figure} is out of range (at most"
                        f" {MAX_HAND_FIGURE}, so that a side's score fits the int32 delta)",
                        f"{name}[{index}]",
                    )
        query = self._base("hand_score", request.variant, _options(request))
        query |= {
            "bid": request.bid if request.HasField("bid") else None,
            "declarer": request.declarer if request.HasField("declarer") else None,
            "meld": list(request.meld),
            "points": list(request.points),
            "conceded": request.conceded,
        }
        # proto3 cannot tell an empty list from none: an empty ``tricks`` is left out, so
        # two-handed, where it is optional (GAME_RECORD.md §3), is answered without it.
        if request.tricks:
            query["tricks"] = list(request.tricks)
        if request.dix:
            query["dix"] = list(request.dix)
        answer = self._ask(query)
        delta, saved = answer["delta"], answer["saved"]
        assert isinstance(delta, list) and isinstance(saved, list)
        # Unreachable with the figures bounded above; a safety net, as in ScoreMeld.
        return pb.ScoreHandResponse(delta=[_int32(d, "meld") for d in delta], saved=saved)


#: The largest meld, card-point or dix figure ScoreHand takes per seat or side. Why: a side's
#: delta adds up to two seats' meld and its card points, and must fit the int32 ``delta``; a
#: third of int32's range (about 700 million, far beyond any real hand) guarantees it, so a
#: client's mistake is refused naming the figure rather than failing the response.
MAX_HAND_FIGURE: Final = (2**31 - 1) // 3

_INT32_MIN: Final = -(2**31)
_INT32_MAX: Final = 2**31 - 1


def _int32(value: object, field: str) -> int:
    """An answer's integer for an int32 response field; out of range is the client's input."""
    number = int(str(value))
    if not _INT32_MIN <= number <= _INT32_MAX:
        raise invalid(f"{field}: the answer {number} does not fit a 32-bit integer", field)
    return number


def _options(
    request: pb.CreateGameRequest
    | pb.ScoreMeldRequest
    | pb.LegalPlaysRequest
    | pb.TrickWinnerRequest
    | pb.TrickPointsRequest
    | pb.ScoreHandRequest,
) -> dict[str, object] | None:
    return _plain(request.options, "options") if request.HasField("options") else None


def _plain(message: struct_pb2.Struct, field: str) -> dict[str, object]:
    """A request's Struct as JSON data; NaN or Infinity (a Struct number JSON cannot hold) is
    the client's mistake, refused naming ``field``."""
    try:
        return struct_to_dict(message)
    except ValueError as error:
        raise invalid(f"{field}: not valid JSON ({error})", field) from None
