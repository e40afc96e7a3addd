"""Rules-query behaviour that mutation testing of ``referee/query.py`` found unpinned.

GAME_RECORD.md §3: every bad query gets an error that names the field at fault (the gRPC
RulesService puts that field in a ``google.rpc.BadRequest``), a hand or trick no deck of the
variant could produce is refused, and each line gets one JSON answer. The suite pinned most of
that through ``meld`` queries and message prefixes; mutants that renamed a field of another
kind (``hand`` of legal_plays, ``trick`` of trick_winner, ``bid`` in ``field`` only), dropped a
deck check (trick_winner, trick_points), dropped a type check (``null`` meld or a missing
``kind`` answered "internal error"), moved a bound by one (``tricks`` of -1, ``declarer`` -1
read as team 1, a cutthroat partner index one past the trick) or let NaN through as a null
``id`` all passed. Each test below fails with its mutant applied and passes without it. No bug
was found.

Mutants left alive as equivalent: dropping two-handed's own ``meld + points`` branch (save rule
"none" and ``min_meld_to_record`` 0, the only values two-handed accepts, make ``score_hand`` give
the same figures), ``_bool`` returning None for False (falsy alike in the pure build; the
compiled core refuses None, so test_query kills it there), the fallback of ``_dump`` for an id
too deep to write back (the reader refuses such a line first), the lru_cache size, and mutants
that change only message wording.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from referee import query as query_module
from referee.query import QueryError, answer_fields, run_queries
from tests.test_query import ask, error_of


def field_of(query: dict[str, Any]) -> str:
    """The field a refused query names (the RulesService's BadRequest field)."""
    with pytest.raises(QueryError) as caught:
        answer_fields(query)
    return caught.value.field


HAND_SCORE: dict[str, Any] = {
    "kind": "hand_score",
    "bid": 300,
    "declarer": 1,
    "meld": [0, 100, 30, 50],
    "points": [100, 150],
    "tricks": [4, 8],
}

TWO_HANDED_PLAY: dict[str, Any] = {
    "kind": "legal_plays",
    "variant": "two-handed",
    "trump": "H",
    "trick": ["10S"],
    "hand": ["AS", "9S", "9H"],
}


# --------------------------------------------------------------------------------------------
# Every kind names its own fields (§3)


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"kind": "legal_plays", "trump": "H", "hand": ["AS", "ZZ"]}, "hand[1]"),
        ({"kind": "legal_plays", "trump": "hearts", "hand": ["AS"]}, "trump"),
        ({"kind": "legal_plays", "trump": "H", "hand": []}, "hand"),
        ({"kind": "legal_plays", "trump": "H", "hand": ["AS"], "trick": ["9C"] * 4}, "trick"),
        ({"kind": "trick_winner", "trick": ["KC", "1H"], "trump": "H"}, "trick[1]"),
        ({"kind": "trick_winner", "trick": ["KC"], "trump": "X"}, "trump"),
        ({**HAND_SCORE, "bid": True}, "bid"),
        ({**HAND_SCORE, "declarer": 4}, "declarer"),
        ({**HAND_SCORE, "declarer": -1}, "declarer"),
        ({**HAND_SCORE, "conceded": "no"}, "conceded"),
        ({**HAND_SCORE, "bid": None, "declarer": None, "conceded": True}, "conceded"),
        ({**TWO_HANDED_PLAY, "phase": "Stock"}, "phase"),
        ({**TWO_HANDED_PLAY, "seat_of_partner_in_trick": 0}, "seat_of_partner_in_trick"),
        (
            {"kind": "legal_plays", "trump": "H", "hand": ["AS"], "trick": ["9C", "KC"]}
            | {"seat_of_partner_in_trick": "0"},
            "seat_of_partner_in_trick",
        ),
    ],
)
def test_each_kind_names_its_own_field(query: dict[str, Any], field: str) -> None:
    """§3: the error names the field at fault, and the RulesService reports that same name. The
    suite checked these names through meld queries and message prefixes only ("concededX:"
    starts with "conceded" too), so a misnamed field of another kind went unnoticed."""
    assert field_of(query) == field
    message = error_of(query)
    assert message.startswith(f"{field}:"), message


def test_a_missing_kind_is_named_not_an_internal_error() -> None:
    """§3: a query without ``kind`` is refused naming ``kind``; without the check it reached
    ``query["kind"]`` and answered "internal error: KeyError: 'kind'", which still contains the
    word the old test looked for."""
    assert field_of({"hand": []}) == "kind"
    assert error_of({"hand": []}).startswith('missing field "kind"')
    assert field_of({"kind": "melds", "hand": []}) == "kind"


def test_answer_fields_refuses_a_query_that_is_not_an_object() -> None:
    """The RulesService calls ``answer_fields`` directly, without ``answer_query``'s own check:
    a query that is not a JSON object is refused as such, with no field (the query as a whole
    is wrong), not as an object missing ``kind``."""
    for query in ([{"kind": "meld"}], "meld", 7, None):
        with pytest.raises(QueryError, match="a query must be a JSON object") as caught:
            answer_fields(query)
        assert caught.value.field == ""


@pytest.mark.parametrize(("given", "field"), [("bid", "declarer"), ("declarer", "bid")])
def test_bid_without_declarer_names_the_one_left_out(given: str, field: str) -> None:
    """§3: a contract needs both bid and declarer; the field named is the one left out (null),
    so a client knows which to fill in."""
    query = {**HAND_SCORE, field: None}
    assert field_of(query) == field
    assert error_of(query).startswith("bid and declarer:")


def test_a_bug_is_still_answered_as_an_internal_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """§3: one bad line must not cost the answers after it, and that holds for our own bugs:
    an unexpected exception is answered "internal error", naming it, with the id copied."""

    def broken(query: object, rules: object) -> dict[str, object]:
        raise ZeroDivisionError("boom")

    monkeypatch.setitem(query_module._HANDLERS, "trick_points", broken)
    lines = ['{"id": 1, "kind": "trick_points", "cards": []}', '{"id": 2, "kind": "meld"}']
    first, second = (json.loads(out) for out in run_queries(lines))
    assert first == {"id": 1, "error": "internal error: ZeroDivisionError: boom"}
    assert second["id"] == 2 and second["error"].startswith('missing field "hand"')


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_numbers_json_cannot_write_back_are_not_a_json_line(number: str) -> None:
    """§3 answers are JSON lines: NaN, the infinities and floats too large for a double (read as
    infinity) are refused as "not a JSON line" with no ``id``, not answered with an id of null
    or of ``Infinity``, which is not JSON."""
    line = f'{{"id": {number}, "kind": "trick_points", "cards": []}}'
    (out,) = run_queries([line])
    answer = json.loads(out, parse_constant=_not_json)
    assert list(answer) == ["error"]
    assert answer["error"].startswith("not a JSON line:")


def test_only_the_inputs_first_line_may_start_with_a_byte_order_mark() -> None:
    """README: a byte order mark at the start of the input is skipped; one later in the stream
    is not, even when the first line was refused as not UTF-8 (that line was the start)."""
    line = '{"id": 2, "kind": "trick_points", "cards": []}'
    first, second = (json.loads(out) for out in run_queries([b"\xff\n", "\ufeff" + line]))
    assert first["error"].startswith("not a UTF-8 line")
    assert list(second) == ["error"] and second["error"].startswith("not a JSON line")
    assert [json.loads(out) for out in run_queries(["\ufeff" + line])] == [{"id": 2, "points": 0}]


def _not_json(name: str) -> object:
    raise AssertionError(f"{name} written back: not JSON")


# --------------------------------------------------------------------------------------------
# A hand or trick no deck could produce (§3)


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"kind": "meld", "trump": "H", "hand": ["AS"] * 3}, "hand"),
        ({"kind": "trick_winner", "trick": ["AS", "AS", "AS"], "trump": "H"}, "trick"),
        ({"kind": "trick_points", "cards": ["KD", "KD", "KD"]}, "cards"),
        (
            {"kind": "legal_plays", "trump": "H", "hand": ["AS", "AS"], "trick": ["AS"]},
            "hand",
        ),
    ],
)
def test_cards_no_deck_could_produce_are_refused_by_every_kind(
    query: dict[str, Any], field: str
) -> None:
    """§3: "a hand or trick that no deck of the variant could produce" is an error, in every
    kind, not only meld and legal_plays; the field named is the query's own (legal_plays names
    the hand, the player's own cards, not the phrase "hand and trick together")."""
    assert "3 times" in error_of(query)
    assert field_of(query) == field


# --------------------------------------------------------------------------------------------
# legal_plays: seat_of_partner_in_trick


@pytest.mark.parametrize("partner", [2, 3, -1])
def test_a_cutthroat_partner_index_outside_the_trick_is_refused(partner: int) -> None:
    """§3: seat_of_partner_in_trick is an index into ``trick``. Cutthroat has no opposite seat
    to check against (its defenders are partners wherever the declarer sits), so the range
    check alone refuses an index one past the trick (2 with two cards played) or below 0."""
    query = {
        "kind": "legal_plays",
        "variant": "cutthroat",
        "trump": "H",
        "hand": ["AC", "JC", "KH"],
        "trick": ["10C", "9C"],
        "seat_of_partner_in_trick": partner,
    }
    assert field_of(query) == "seat_of_partner_in_trick"
    assert "is not an index into trick" in error_of(query)


# --------------------------------------------------------------------------------------------
# hand_score figures


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("meld", None),
        ("points", None),
        *(
            (field, value)
            for field in ("meld", "points", "tricks", "dix")
            for value in ({"a": 1}, "1234")
        ),
    ],
)
def test_a_list_field_that_is_not_a_list_is_refused_by_name(field: str, value: object) -> None:
    """§3: meld, points, tricks and dix are lists of integers. Anything else is refused as
    not a list, naming the field; without that check ``null`` answered "internal error:
    TypeError" and a four-character string was read character by character."""
    query = {**HAND_SCORE, field: value}
    assert field_of(query) == field
    assert error_of(query).startswith(f"{field}: expected a list of ")


@pytest.mark.parametrize("field", ["tricks", "meld", "dix"])
def test_figures_other_than_points_are_never_negative(field: str) -> None:
    """§3: tricks, meld and dix are counts >= 0; only ``points`` may go below 0, and only down to
    a negative last-trick bonus. -1 is refused with the element named."""
    query = {**HAND_SCORE, "dix": [0, 0, 0, 0]}
    query[field] = [-1, *query[field][1:]]
    assert field_of(query) == f"{field}[0]"
    assert error_of(query).startswith(f"{field}[0]: must be >= 0")


def test_two_handed_checks_tricks_when_given() -> None:
    """§3: ``tricks`` is optional in two-handed alone (it only feeds the save rule), but when
    given it is checked like every other figure: one per seat, integers >= 0."""
    query = {"kind": "hand_score", "variant": "two-handed", "meld": [0, 40], "points": [0, 250]}
    assert ask({**query, "tricks": [0, 24]}) == {"delta": [0, 290], "saved": [True, True]}
    assert field_of({**query, "tricks": [24]}) == "tricks"
    assert field_of({**query, "tricks": [-1, 25]}) == "tricks[0]"


@pytest.mark.parametrize("variant", ["partnership", "partnership-no-bid", "cutthroat"])
def test_a_null_tricks_is_refused_where_tricks_is_required(variant: str) -> None:
    """§3: outside two-handed ``tricks`` is required, so a null is refused as a null ``meld`` or
    ``points`` is. It was read as no tricks taken, which under save rule "trick" cost every side
    its meld without a word; two-handed keeps null as "not given"."""
    query: dict[str, object] = {"kind": "hand_score", "variant": variant, "tricks": None}
    if variant == "cutthroat":
        query.update(bid=250, declarer=0, meld=[60, 20, 0], points=[250, 0, 0])
    elif variant == "partnership":
        query.update(bid=250, declarer=0, meld=[60, 20, 0, 0], points=[250, 0])
    else:
        query.update(meld=[60, 20, 0, 0], points=[250, 0])
    assert field_of(query) == "tricks"
    two_handed = {"kind": "hand_score", "variant": "two-handed", "meld": [0, 40]}
    assert ask({**two_handed, "points": [0, 250], "tricks": None}) == ask(
        {**two_handed, "points": [0, 250]}
    )
