"""Auditing recorded games (GAME_RECORD.md §1-§2, RULES.md A.7 item 10, A.10 item 6).

A record is replayed through the same ``start_hand`` and ``apply`` as a live game, so a verdict is
exactly what the referee would have said at the table. Problems with the record itself (not JSON,
unknown keys, bad options, a deal that is not a whole deck) are *record errors* (exit 2); illegal
moves are *violations* (exit 1), never a traceback.

``null`` for a field GAME_RECORD.md §1 makes optional is read as the field left out, everywhere:
``options`` (the variant's defaults), ``players``, ``dealer`` (0), a hand's ``actions`` (none),
``claimed`` and, inside a claim, ``delta`` and ``scores`` (nothing claimed), and a deal's
``widow``, ``stock`` and ``turn_up`` (none). Why: JSON writers put null for a value they do not
have, as readily as they leave the key out, and the action fields already read null so (README,
"Null fields"); until 12-02 ``"dealer": null`` and ``"actions": null`` alone were record errors.
The one null with a meaning of its own is a game claim's ``"winner": null``: "not finished".
Required fields (``format``, ``variant``, ``hands``, a hand's ``deal``) are refused as null.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from referee.engine.actions import decode_action
from referee.engine.engine import (
    apply,
    check_deal,
    check_optional_fields,
    check_seat,
    hand_progress,
    new_game,
    start_hand,
)
from referee.engine.errors import DealError, IllegalAction
from referee.engine.state import GameState, Setup
from referee.jsonread import RepeatedKeyError, loads_once
from referee.rules.cards import CardSyntaxError, parse_card, parse_cards
from referee.rules.dealing import Deal
from referee.rules.options import OptionError, resolve_options

RECORD_FORMAT: Final = "pinochle-record/1"
_TOP_KEYS: Final = {"format", "variant", "options", "players", "dealer", "hands", "claimed"}
_HAND_KEYS: Final = {"deal", "actions", "claimed"}
_DEAL_KEYS: Final = {"hands", "widow", "stock", "turn_up"}
_SUMMARY_KEYS: Final = (
    "dealer",
    "declarer",
    "bid",
    "trump",
    "conceded",
    "hopeless",
    "meld",
    "points",
    "delta",
)


class RecordError(ValueError):
    """The record is not a valid ``pinochle-record/1`` document (exit status 2)."""


def _check_keys(obj: Mapping[str, object], allowed: set[str], where: str) -> None:
    for key in obj:
        if key not in allowed and not str(key).startswith("x-"):
            raise RecordError(f"{where}: unknown key {key!r}")


def parse_deal(data: object, where: str) -> Deal:
    if not isinstance(data, Mapping):
        raise RecordError(f"{where}: must be an object with hands, widow, stock and turn_up")
    _check_keys(data, _DEAL_KEYS, where)
    try:
        raw_hands = data.get("hands")
        if not isinstance(raw_hands, list):
            raise RecordError(f"{where}.hands: must be a list of hands")
        hands = tuple(tuple(sorted(parse_cards(h))) for h in raw_hands)
        widow = parse_cards(_card_list(data.get("widow"), f"{where}.widow"))
        stock = parse_cards(_card_list(data.get("stock"), f"{where}.stock"))
        turn_up_raw = data.get("turn_up")
        turn_up = None if turn_up_raw is None else parse_card(turn_up_raw)
    except CardSyntaxError as error:
        raise RecordError(f"{where}: {error}") from None
    return Deal(hands, widow, stock, turn_up)


def _card_list(value: object, where: str) -> list[object]:
    """A deal's widow or stock: a list of cards, or absent (null) for none."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise RecordError(f"{where}: must be a list of cards")
    return value


def _int_list(value: object) -> list[int] | None:
    if isinstance(value, list) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        return list(value)
    return None


@dataclass(slots=True)
class _Audit:
    keep_going: bool
    actions_checked: int = 0
    violations: list[dict[str, object]] = field(default_factory=list)
    hands: list[dict[str, object]] = field(default_factory=list)
    claims: list[dict[str, object]] = field(default_factory=list)


def audit_record(data: object, name: str = "-", keep_going: bool = False) -> dict[str, object]:
    """The verdict for one record (already parsed from JSON); record errors become ``error``."""
    try:
        return _audit(data, name, keep_going)
    except RecordError as error:
        return {"record": name, "error": str(error)}


class _NotJson(ValueError):
    """What Python's JSON reader accepts and JSON does not (RFC 8259), found while reading."""


def _refuse_constant(name: str) -> object:
    raise _NotJson(f"{name} is not a JSON number")


def read_record(text: str) -> object:
    """A record's JSON text -> its value; raises ValueError (or RecursionError) when it is not
    one JSON text with unique keys. A leading byte order mark (U+FEFF, which Windows tools such
    as Notepad and PowerShell 5 write before UTF-8) is skipped, as RFC 8259 §8.1 lets a reader
    do; NaN and Infinity, which Python reads and JSON has not, are refused."""
    if text.startswith("\ufeff"):
        text = text[1:]
    value, repeated = loads_once(text, parse_constant=_refuse_constant)
    if repeated is not None:
        raise repeated
    return value


def audit_text(text: str, name: str = "-", keep_going: bool = False) -> dict[str, object]:
    try:
        data = read_record(text)
    except RepeatedKeyError as error:
        return {"record": name, "error": str(error)}
    except (json.JSONDecodeError, _NotJson, RecursionError) as error:
        return {"record": name, "error": f"not valid JSON: {error}"}
    except ValueError:  # Python refuses integers of more than 4,300 digits
        return {"record": name, "error": "not valid JSON: a number has too many digits"}
    return audit_record(data, name, keep_going)


def _audit(data: object, name: str, keep_going: bool) -> dict[str, object]:
    if not isinstance(data, Mapping):
        raise RecordError("a record must be a JSON object")
    _check_keys(data, _TOP_KEYS, "record")
    if data.get("format") != RECORD_FORMAT:
        raise RecordError(f"format must be {RECORD_FORMAT!r}, got {data.get('format')!r}")
    try:
        rules = resolve_options(data.get("variant"), data.get("options"), for_game=True)
    except OptionError as error:
        raise RecordError(str(error)) from None
    players = data.get("players")
    if players is not None and (
        not isinstance(players, list) or not all(isinstance(p, str) for p in players)
    ):
        raise RecordError("players must be a list of names")
    if players is not None and len(players) != rules.players:
        # One name per seat, in seat order (GAME_RECORD.md §1's example, CreateGame's
        # player_names): a shorter or longer list cannot say whose seat a name is.
        raise RecordError(
            f"players: must name every seat, one name each ({rules.players} for"
            f" {rules.variant}), got {len(players)}"
        )
    dealer = data.get("dealer")
    if dealer is None:
        dealer = 0  # §1: the default, left out or null
    if isinstance(dealer, bool) or not isinstance(dealer, int) or not 0 <= dealer < rules.players:
        raise RecordError(f"dealer must be a seat from 0 to {rules.players - 1}")
    raw_hands = data.get("hands")
    if not isinstance(raw_hands, list):
        raise RecordError("hands must be a list")
    try:
        state = new_game(rules, dealer)
    except IllegalAction as error:  # a variant that cannot be played in this version
        raise RecordError(error.message) from None
    audit = _Audit(keep_going)
    # A claim's shape is part of the record: checked now, whether or not it is compared later.
    game_claim = _parse_game_claim(data.get("claimed"))
    # Every hand is read first, so a malformed record is a record error (exit 2) even where
    # checking stops at an earlier violation (A.7 item 10): its keys, its action list, its claim
    # and its deal, which must be a whole, correct deck (GAME_RECORD.md §1) for the hand's
    # dealer. Every hands entry, a redeal's too, passes the deal on, so that dealer is known
    # without playing the hands before it; a hand after the game's end is checked too.
    hands = [
        _parse_hand(raw, index, state.setup, (dealer + index) % rules.players)
        for index, raw in enumerate(raw_hands)
    ]
    stopped = False
    for index, (deal, actions, hand_claim) in enumerate(hands):
        where = f"hands[{index}]"
        if state.over:
            # The game ended: any action in a later hand is GAME_OVER (A.7 item 9), checked by
            # apply so a malformed one is MALFORMED_ACTION first (A.5); with --keep-going every
            # such action is reported and counted (A.10 item 6).
            state, stopped = _play_hand(state, audit, index, actions, hand_claim)
            if stopped:
                break
            continue
        try:
            state, _ = start_hand(state, deal)
        except DealError as error:
            raise RecordError(f"{where}.deal: {error}") from None
        skipped_before = len(audit.violations)
        state, stopped = _play_hand(state, audit, index, actions, hand_claim)
        if stopped:
            break
        if state.hand is not None:
            # Only a hand that skipped actions of its own (--keep-going) may be left unfinished
            # before the last: an earlier hand's skipped action cannot leave this one short, so
            # a record that stops short here is malformed (A.7 item 10) whatever came before.
            if index != len(raw_hands) - 1 and len(audit.violations) == skipped_before:
                raise RecordError(f"{where}: only the last hand may be unfinished")
            audit.hands.append(_summary(hand_progress(state.setup, state.hand)))
            break
    if stopped and state.hand is not None:
        audit.hands.append(_summary(hand_progress(state.setup, state.hand)))
    if not audit.violations:
        _check_game_claim(audit, state, game_claim)
    verdict: dict[str, object] = {
        "record": name,
        "legal": not audit.violations,
        "actions_checked": audit.actions_checked,
        "violation": audit.violations[0] if audit.violations else None,
    }
    if keep_going:
        verdict["violations"] = audit.violations
    verdict |= {
        "hands": audit.hands,
        "scores": _verdict_scores(state),
        "finished": state.over,
        "winner": state.winner,
        "claims": audit.claims,
    }
    return verdict


def _verdict_scores(state: GameState) -> list[int]:
    """Completed hands; in two-handed also the melds of the hand in progress (A.9 item 8)."""
    scores = list(state.scores)
    if state.setup.two_handed and state.hand is not None:
        scores = [a + b for a, b in zip(scores, state.hand.meld_points, strict=True)]
    return scores


def _violation(audit: _Audit, hand: int, index: int, raw: object, code: str, message: str) -> bool:
    seat = raw.get("seat") if isinstance(raw, Mapping) else None
    if isinstance(seat, bool) or not isinstance(seat, int):
        seat = None  # GAME_RECORD.md §2: the violation's seat is a seat number (or unknown)
    audit.violations.append(
        {"hand": hand, "action": index, "seat": seat, "code": code, "message": message}
    )
    return not audit.keep_going


def _parse_hand(
    raw: object, index: int, setup: Setup, dealer: int
) -> tuple[Deal, Sequence[object], list[int] | None]:
    """A ``hands`` entry's deal (checked for ``dealer``), actions and claimed delta."""
    where = f"hands[{index}]"
    if not isinstance(raw, Mapping):
        raise RecordError(f"{where}: must be an object with deal and actions")
    _check_keys(raw, _HAND_KEYS, where)
    actions = raw.get("actions")
    if actions is None:
        actions = []  # left out or null: no action yet (a hand just dealt)
    if not isinstance(actions, list):
        raise RecordError(f"{where}.actions: must be a list")
    claim = _parse_hand_claim(raw.get("claimed"), index)
    deal = parse_deal(raw.get("deal"), f"{where}.deal")
    try:
        check_deal(setup, deal, dealer)
    except DealError as error:
        raise RecordError(f"{where}.deal: {error}") from None
    return deal, actions, claim


def _play_hand(
    state: GameState,
    audit: _Audit,
    hand_index: int,
    actions: Sequence[object],
    claim: list[int] | None,
) -> tuple[GameState, bool]:
    """Apply a hand's actions; returns the state and whether checking stopped at a violation.

    The hand's claimed delta is compared as soon as the hand is complete (A.7 item 10), so an
    action recorded after its end, where checking stops, does not hide a wrong claim."""
    for index, raw in enumerate(actions):
        audit.actions_checked += 1
        try:
            if type(raw) is not dict and not isinstance(raw, Mapping):  # dict: the fast case
                raise IllegalAction("MALFORMED_ACTION", "an action must be a JSON object")
            seat = raw.get("seat")
            if type(seat) is not int and (isinstance(seat, bool) or not isinstance(seat, int)):
                raise IllegalAction("MALFORMED_ACTION", "an action needs an integer seat", "seat")
            action = decode_action(raw, seat_key=True)
            check_seat(state.setup.rules, seat)  # MALFORMED_ACTION comes first (A.5)
            if state.hand is None and not state.over:
                # A.5: a field the game's options refuse (help, a meld's name) is
                # MALFORMED_ACTION before WRONG_PHASE, as apply answers it.
                check_optional_fields(state.setup, seat, action)
                raise IllegalAction(
                    "WRONG_PHASE", f"seat {seat}: the hand is over; this action comes after its end"
                )
            state, events = apply(state, seat, action)
            for event in events:
                if event.kind == "hand_result":
                    audit.hands.append(_summary(event.data))
                    _check_hand_claim(audit, hand_index, claim)
        except IllegalAction as error:
            if _violation(audit, hand_index, index, raw, error.code, error.message):
                return state, True
    return state, False


def _summary(data: Mapping[str, object]) -> dict[str, object]:
    return {key: data[key] for key in _SUMMARY_KEYS}


@dataclass(frozen=True, slots=True)
class _GameClaim:
    scores: list[int] | None
    winner_given: bool
    winner: int | None


def _parse_hand_claim(claimed: object, index: int) -> list[int] | None:
    """A hand's claimed delta (GAME_RECORD.md §1), or None when it claims none."""
    if claimed is None:
        return None
    if not isinstance(claimed, Mapping):
        raise RecordError(f"hands[{index}].claimed: must be an object")
    _check_keys(claimed, {"delta"}, f"hands[{index}].claimed")
    if claimed.get("delta") is None:
        return None
    claim = _int_list(claimed["delta"])
    if claim is None:
        raise RecordError(f"hands[{index}].claimed.delta: must be a list of integers")
    return claim


def _parse_game_claim(claimed: object) -> _GameClaim:
    """The record's claimed scores and winner (GAME_RECORD.md §1)."""
    if claimed is None:
        return _GameClaim(None, False, None)
    if not isinstance(claimed, Mapping):
        raise RecordError("claimed: must be an object")
    _check_keys(claimed, {"scores", "winner"}, "claimed")
    scores = None
    if claimed.get("scores") is not None:
        scores = _int_list(claimed["scores"])
        if scores is None:
            raise RecordError("claimed.scores: must be a list of integers")
    winner = claimed.get("winner")
    if winner is not None and (isinstance(winner, bool) or not isinstance(winner, int)):
        raise RecordError("claimed.winner: must be a side number or null")
    return _GameClaim(scores, "winner" in claimed, winner)


def _check_hand_claim(audit: _Audit, index: int, claim: list[int] | None) -> None:
    if claim is None:
        return
    computed = audit.hands[-1]["delta"]
    if claim != computed:
        audit.claims.append(
            {"hand": index, "field": "delta", "claimed": claim, "computed": computed}
        )


def _check_game_claim(audit: _Audit, state: GameState, claim: _GameClaim) -> None:
    if claim.scores is not None:
        # The verdict's scores: in two-handed they include the melds of a hand in progress
        # (A.9 item 8), so a claim is checked against the same figures the verdict reports.
        computed = _verdict_scores(state)
        if claim.scores != computed:
            audit.claims.append(
                {"hand": None, "field": "scores", "claimed": claim.scores, "computed": computed}
            )
    if claim.winner_given and claim.winner != state.winner:
        audit.claims.append(
            {"hand": None, "field": "winner", "claimed": claim.winner, "computed": state.winner}
        )


def verdict_exit_status(verdict: Mapping[str, object]) -> int:
    """0 legal with matching claims, 1 a violation or a claim mismatch, 2 a record error."""
    if "error" in verdict:
        return 2
    return 0 if verdict["legal"] and not verdict["claims"] else 1
