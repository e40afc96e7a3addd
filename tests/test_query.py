"""Rules queries (GAME_RECORD.md §3; RULES.md A.9 items 9-10, A.10 item 5).

The vectors (test_vectors.py) pin the rules answers; these tests pin what they do not: the error
answers (each naming the field at fault, ``id`` always copied), the full shape of answers, the
query-only fields (``phase``, ``seat_of_partner_in_trick``) and hand_score's per-seat/per-side
bookkeeping. A hypothesis test feeds random and mutated lines to check that no input can break
the one-answer-per-line contract.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from referee.query import (
    ANSWER_FIELDS,
    QUERY_FIELDS,
    QueryError,
    answer_fields,
    answer_query,
    run_queries,
)
from referee.rules.options import VARIANT_IDS


def ask(query: dict[str, Any]) -> dict[str, Any]:
    """Answer one query through the CLI path and parse the answer line."""
    out = list(run_queries([json.dumps(query)]))
    assert len(out) == 1
    answer: dict[str, Any] = json.loads(out[0])
    return answer


def error_of(query: dict[str, Any]) -> str:
    answer = ask(query)
    assert "error" in answer, answer
    message: str = answer["error"]
    return message


# --------------------------------------------------------------------------------------------
# The line protocol


class TestLines:
    def test_one_answer_per_line_in_order_blank_lines_skipped(self) -> None:
        lines = [
            '{"id": 1, "kind": "trick_points", "cards": ["AS"]}\n',
            "\n",
            "   \n",
            "not json\n",
            '{"id": 2, "kind": "trick_winner", "trick": ["9C", "AC"], "trump": "S"}\n',
        ]
        out = [json.loads(line) for line in run_queries(lines)]
        assert out[0] == {"id": 1, "points": 10}
        assert "error" in out[1] and "JSON" in out[1]["error"]
        assert out[2] == {"id": 2, "winner": 1}
        assert len(out) == 3

    def test_byte_lines_must_be_utf8_and_the_others_are_still_answered(self) -> None:
        """Standard input comes as bytes (§1: UTF-8): a line that is not UTF-8 gets an error
        answer in its place, whatever the locale would have decoded it as."""
        lines = [
            b'{"id": "\xff", "kind": "trick_points", "cards": ["AS"]}\n',
            '{"id": "\u00ff", "kind": "trick_points", "cards": ["AS"]}\n'.encode(),
            b"\n",
        ]
        first, second = (json.loads(line) for line in run_queries(lines))
        assert list(first) == ["error"] and "not a UTF-8 line" in first["error"]
        assert second == {"id": "\u00ff", "points": 10}

    def test_non_object_json_is_an_error(self) -> None:
        for line in ("[1, 2]", '"meld"', "42", "null", "true"):
            (out,) = run_queries([line])
            answer = json.loads(out)
            assert list(answer) == ["error"]
            assert "JSON object" in answer["error"]

    @pytest.mark.parametrize("line", ['{"id": NaN, "kind": "meld"}', '{"id": 1e999}'])
    def test_numbers_json_cannot_write_back_are_refused(self, line: str) -> None:
        (out,) = run_queries([line])
        assert "error" in json.loads(out)

    def test_id_comes_first_and_answer_keys_follow_the_table(self) -> None:
        (out,) = run_queries(['{"kind": "meld", "trump": "S", "hand": [], "id": "q7"}'])
        assert out == '{"id": "q7", "total": 0, "melds": []}'

    def test_answer_query_takes_parsed_objects(self) -> None:
        assert answer_query({"kind": "trick_points", "cards": ["KS"], "last": True}) == {
            "points": 20
        }
        assert "error" in answer_query(["not", "a", "dict"])


# --------------------------------------------------------------------------------------------
# Error answers


class TestErrors:
    def test_missing_and_unknown_kind(self) -> None:
        assert "kind" in error_of({"hand": []})
        message = error_of({"kind": "melds", "hand": []})
        assert '"melds"' in message and "legal_plays" in message
        assert "unknown kind" in error_of({"kind": 3})

    def test_unknown_field_is_named(self) -> None:
        message = error_of({"kind": "legal_plays", "trump": "H", "hand": ["AS"], "trik": []})
        assert '"trik"' in message and '"trick"' in message  # named, with a suggestion

    def test_field_of_another_kind_is_unknown(self) -> None:
        assert '"last"' in error_of({"kind": "meld", "trump": "H", "hand": [], "last": True})
        # §3's table: trick_points reads cards and last only; a trump would change nothing, so
        # it is refused rather than silently ignored.
        query = {"kind": "trick_points", "cards": ["AS"], "trump": "S"}
        assert error_of(query).startswith('unknown field "trump" in a trick_points query')

    def test_missing_field(self) -> None:
        assert '"trump"' in error_of({"kind": "meld", "hand": ["AS"]})

    def test_bad_card_names_field_and_index(self) -> None:
        message = error_of({"kind": "meld", "trump": "H", "hand": ["AS", "10h", "ZZ"]})
        assert message.startswith("hand[2]: 'ZZ' is not a card")
        message = error_of(
            {"kind": "legal_plays", "trump": "H", "hand": ["AS"], "trick": ["KS", 7]}
        )
        assert message.startswith("trick[1]:")
        assert error_of({"kind": "trick_points", "cards": "AS"}).startswith("cards:")

    def test_bad_suit(self) -> None:
        assert error_of({"kind": "meld", "trump": "hearts", "hand": []}).startswith("trump:")

    def test_too_many_copies_in_hand_and_trick_together(self) -> None:
        query = {"kind": "legal_plays", "trump": "H", "hand": ["AS", "as"], "trick": ["AS"]}
        message = error_of(query)
        assert "AS" in message and "3 times" in message
        query["trick"] = ["KS"]
        assert ask(query) == {"legal": ["AS"]}

    def test_copies_follow_the_deck(self) -> None:
        four = ["AS"] * 4
        assert "error" in ask({"kind": "meld", "trump": "H", "hand": four})
        assert (
            ask({"kind": "meld", "variant": "double-deck", "trump": "H", "hand": four})["total"]
            == 0
        )
        message = error_of({"kind": "meld", "variant": "double-deck", "trump": "H", "hand": ["9H"]})
        assert "nines" in message
        # The 48-card option of double-deck has nines again.
        assert "error" not in ask(
            {
                "kind": "meld",
                "variant": "double-deck",
                "options": {"deck": 48},
                "trump": "H",
                "hand": ["9H"],
            }
        )

    def test_bad_variant_and_options(self) -> None:
        assert "variant" in error_of({"kind": "meld", "variant": "solitaire", "trump": "H"})
        message = error_of({"kind": "meld", "trump": "H", "hand": [], "options": {"hed_rule": 1}})
        assert '"hed_rule"' in message
        inapplicable = {
            "kind": "meld",
            "variant": "two-handed",
            "trump": "H",
            "hand": [],
            "options": {"save_meld": "trick"},
        }
        message = error_of(inapplicable)
        assert '"save_meld"' in message and "two-handed" in message
        bad_value = {"kind": "meld", "trump": "H", "hand": [], "options": {"head_rule": "often"}}
        assert '"head_rule"' in error_of(bad_value)
        assert "options" in error_of({"kind": "meld", "trump": "H", "hand": [], "options": [1]})

    def test_a_null_variant_is_the_default_as_null_options_are(self) -> None:
        """Every optional field given as null is read as left out (README, "Null fields"):
        ``options`` null was, ``variant`` null was refused as "unknown variant null"."""
        query = {"kind": "trick_points", "cards": ["KS"], "last": True}
        expected = ask(query)
        assert ask({**query, "variant": None}) == expected
        assert ask({**query, "variant": None, "options": None}) == expected
        assert ask({**query, "variant": "double-deck"}) != expected

    @pytest.mark.parametrize(
        ("query", "field"),
        [
            ({"kind": "meld", "trump": "H", "hand": [], "options": [1]}, "options"),
            ({"kind": "meld", "trump": "H", "hand": [], "variant": "solitaire"}, "variant"),
            ({"kind": "meld", "trump": "H", "hand": [], "variant": 7}, "variant"),
            (
                {"kind": "meld", "trump": "H", "hand": [], "options": {"hed_rule": 1}},
                "options.hed_rule",
            ),
        ],
    )
    def test_variant_and_options_errors_name_their_field(
        self, query: dict[str, Any], field: str
    ) -> None:
        """A.9 item 9: options are checked as game creation checks them, and the field at fault
        is named as CreateGame names it (the RulesService puts it in BadRequest): ``options``
        when the options object itself is wrong, ``variant`` for an unknown variant."""
        with pytest.raises(QueryError) as caught:
            answer_fields(query)
        assert caught.value.field == field

    @pytest.mark.parametrize(
        "query",
        [
            {"kind": "nope"},
            {"kind": "meld"},
            {"kind": "meld", "trump": "H", "hand": ["XX"]},
            {"kind": "meld", "trump": "H", "hand": [], "extra": 1},
            {"kind": "meld", "trump": "H", "hand": [], "options": {"bogus": True}},
            {"kind": "hand_score", "bid": 1},
        ],
    )
    @pytest.mark.parametrize("ident", [0, "abc", None, [1, {"a": 2}]])
    def test_id_copied_on_errors(self, query: dict[str, Any], ident: object) -> None:
        answer = ask({"id": ident, **query})
        assert list(answer) == ["id", "error"]
        assert answer["id"] == ident

    def test_no_id_no_id_key(self) -> None:
        assert list(ask({"kind": "nope"})) == ["error"]


# --------------------------------------------------------------------------------------------
# meld


class TestMeld:
    def test_the_game_record_example(self) -> None:
        """GAME_RECORD.md §3's example, entry by entry."""
        query = {
            "id": 1,
            "kind": "meld",
            "trump": "H",
            "hand": ["AH", "10H", "KH", "QH", "JH", "KH", "QH", "9H"],
        }
        assert ask(query) == {
            "id": 1,
            "total": 200,
            "melds": [
                {
                    "name": "run",
                    "level": 1,
                    "points": 150,
                    "cards": ["AH", "10H", "KH", "QH", "JH"],
                },
                {"name": "royal_marriage", "level": 1, "points": 40, "cards": ["KH", "QH"]},
                {"name": "dix", "level": 1, "points": 10, "cards": ["9H"]},
            ],
        }

    def test_run_counts_its_marriage_is_listed_at_full_value(self) -> None:
        """A.10 item 5: one run entry of 190, no separate royal marriage for its own K-Q."""
        answer = ask(
            {
                "kind": "meld",
                "trump": "S",
                "hand": ["AS", "TS", "KS", "QS", "JS"],
                "options": {"run_counts_its_royal_marriage": True},
            }
        )
        assert answer["total"] == 190
        assert [(m["name"], m["points"]) for m in answer["melds"]] == [("run", 190)]

    def test_entries_add_up_and_cards_are_canonical(self) -> None:
        hand = ["jd", "QS", "KD", "QD", "AC", "AD", "AH", "AS", "KC", "QC"]
        answer = ask({"kind": "meld", "trump": "C", "hand": hand})
        assert answer["total"] == sum(m["points"] for m in answer["melds"])
        names = [m["name"] for m in answer["melds"]]
        assert names == ["royal_marriage", "marriage", "aces_around", "pinochle"]
        assert answer["melds"][2]["cards"] == ["AS", "AH", "AD", "AC"]
        assert answer["total"] == 40 + 20 + 100 + 40

    def test_meld_values_option(self) -> None:
        query = {
            "kind": "meld",
            "trump": "C",
            "hand": ["QS", "JD"],
            "options": {"meld_values": {"pinochle": [60]}},
        }
        assert ask(query)["total"] == 60

    def test_empty_hand(self) -> None:
        assert ask({"kind": "meld", "trump": "D", "hand": []}) == {"total": 0, "melds": []}


# --------------------------------------------------------------------------------------------
# legal_plays


class TestLegalPlays:
    TRICK: ClassVar[list[str]] = ["9C", "10C", "QC"]  # the partner (index 1) is winning with the 10

    def query(self, **fields: Any) -> dict[str, Any]:
        return {"kind": "legal_plays", "trump": "H", "hand": ["AC", "JC", "KH"], **fields}

    def test_partner_winning_need_not_be_headed_when_option_off(self) -> None:
        """A.9 item 10: with head_over_partner false, following suit is enough."""
        off = {"head_over_partner": False}
        answer = ask(self.query(trick=self.TRICK, seat_of_partner_in_trick=1, options=off))
        assert answer == {"legal": ["AC", "JC"]}

    def test_partner_not_winning_must_still_be_headed(self) -> None:
        off = {"head_over_partner": False}
        trick = ["9C", "QC", "10C"]  # the partner (index 1) played the Q; the 10 is winning
        answer = ask(self.query(trick=trick, seat_of_partner_in_trick=1, options=off))
        assert answer == {"legal": ["AC"]}

    @pytest.mark.parametrize("variant", ["partnership", "double-deck", "partnership-no-bid"])
    @pytest.mark.parametrize(("trick", "partner"), [(["9C"], 0), (["9C", "10C"], 1), (TRICK, 0)])
    def test_a_partner_anywhere_but_opposite_is_refused(
        self, variant: str, trick: list[str], partner: int
    ) -> None:
        """Review of 12-03: the partner sits opposite, so its card is the one played two
        before this seat's; another index named an opponent's card (a position no game
        reaches) and the answer was a plausible but wrong legal set."""
        query = self.query(variant=variant, trick=trick, seat_of_partner_in_trick=partner)
        if variant == "double-deck":
            query["hand"] = ["AC", "JC", "KH"]  # no nines in its deck
            query["trick"] = [c.replace("9", "J") for c in trick]
        message = error_of(query)
        assert message.startswith("seat_of_partner_in_trick: in ") and "opposite" in message
        assert f"not trick[{partner}]" in message

    def test_cutthroat_defenders_partner_is_anywhere_in_the_trick(self) -> None:
        """Cutthroat's defenders are partners against the declarer, who may have led or
        played second: both places are possible."""
        off = {"head_over_partner": False}
        cutthroat = self.query(variant="cutthroat", trick=["10C", "9C"], options=off)
        assert ask({**cutthroat, "seat_of_partner_in_trick": 0}) == {"legal": ["AC", "JC"]}
        assert ask({**cutthroat, "seat_of_partner_in_trick": 1}) == {"legal": ["AC"]}

    def test_head_over_partner_by_default(self) -> None:
        assert ask(self.query(trick=self.TRICK, seat_of_partner_in_trick=1)) == {"legal": ["AC"]}
        assert ask(self.query(trick=self.TRICK)) == {"legal": ["AC"]}

    def test_null_partner_is_no_partner(self) -> None:
        off = {"head_over_partner": False}
        answer = ask(self.query(trick=self.TRICK, seat_of_partner_in_trick=None, options=off))
        assert answer == {"legal": ["AC"]}

    @pytest.mark.parametrize("bad", [3, -1, True, "1", 1.0])
    def test_partner_index_must_be_in_the_trick(self, bad: object) -> None:
        assert error_of(self.query(trick=self.TRICK, seat_of_partner_in_trick=bad)).startswith(
            "seat_of_partner_in_trick:"
        )

    def test_leading_is_free_and_trick_may_be_left_out(self) -> None:
        assert ask(self.query()) == {"legal": ["KH", "AC", "JC"]}
        assert ask(self.query(trick=[])) == {"legal": ["KH", "AC", "JC"]}

    def test_distinct_cards_in_canonical_order(self) -> None:
        answer = ask({"kind": "legal_plays", "trump": "S", "hand": ["9C", "AD", "9C", "AS"]})
        assert answer == {"legal": ["AS", "AD", "9C"]}

    def test_full_trick_is_an_error(self) -> None:
        assert error_of(self.query(trick=["9C", "10C", "QC", "KC"])).startswith("trick:")

    def test_empty_hand_is_an_error(self) -> None:
        assert error_of({"kind": "legal_plays", "trump": "H", "hand": []}).startswith("hand:")

    def test_two_handed_phases(self) -> None:
        base = {
            "kind": "legal_plays",
            "variant": "two-handed",
            "trump": "H",
            "trick": ["10S"],
            "hand": ["AS", "9S", "9H"],
        }
        assert ask({**base, "phase": "stock"}) == {"legal": ["AS", "9S", "9H"]}
        assert ask({**base, "phase": "playoff"}) == {"legal": ["AS"]}
        assert ask(base) == {"legal": ["AS"]}  # playoff is the default
        assert error_of({**base, "phase": "Stock"}).startswith("phase:")
        assert error_of({**base, "trick": ["10S", "KS"]}).startswith("trick:")
        assert "partner" in error_of({**base, "seat_of_partner_in_trick": 0})

    def test_phase_only_for_two_handed(self) -> None:
        for variant in VARIANT_IDS:
            if variant == "two-handed":
                continue
            query = self.query(variant=variant, phase="stock")
            message = error_of(query)
            assert message.startswith("phase:") and "two-handed" in message


# --------------------------------------------------------------------------------------------
# trick_winner, trick_points


class TestTricks:
    def test_partial_trick(self) -> None:
        assert ask({"kind": "trick_winner", "trick": ["KC"], "trump": "H"}) == {"winner": 0}
        assert ask({"kind": "trick_winner", "trick": ["KC", "9H"], "trump": "H"}) == {"winner": 1}

    @pytest.mark.parametrize(
        ("variant", "size"), [("partnership", 0), ("partnership", 5), ("two-handed", 3)]
    )
    def test_trick_size(self, variant: str, size: int) -> None:
        trick = ["KC", "QC", "JC", "9C", "AC"][:size]
        query = {"kind": "trick_winner", "variant": variant, "trick": trick, "trump": "H"}
        assert error_of(query).startswith("trick:")

    def test_last_defaults_to_false_and_must_be_bool(self) -> None:
        assert ask({"kind": "trick_points", "cards": []}) == {"points": 0}
        assert ask({"kind": "trick_points", "cards": [], "last": True}) == {"points": 10}
        assert error_of({"kind": "trick_points", "cards": [], "last": 1}).startswith("last:")

    def test_last_trick_bonus_follows_the_scheme(self) -> None:
        query = {
            "kind": "trick_points",
            "cards": ["AS", "KD"],
            "last": True,
            "options": {"count_scheme": "points1"},
        }
        assert ask(query) == {"points": 3}


# --------------------------------------------------------------------------------------------
# hand_score


class TestHandScore:
    def query(self, **fields: Any) -> dict[str, Any]:
        base: dict[str, Any] = {
            "kind": "hand_score",
            "bid": 300,
            "declarer": 1,
            "meld": [0, 100, 30, 50],
            "points": [100, 150],
            "tricks": [4, 8],
        }
        return {**base, **fields}

    def test_meld_is_summed_by_team(self) -> None:
        # Team 1 (seats 1, 3): 150 meld + 150 points = 300, made. Team 0: 30 + 100.
        assert ask(self.query()) == {"delta": [130, 300], "saved": [True, True]}

    def test_declarer_seat_picks_the_team(self) -> None:
        # Declarer seat 2: team 0 has 30 + 100 < 300.
        assert ask(self.query(declarer=2))["delta"] == [-300, 300]

    def test_no_contract(self) -> None:
        # A.7 item 2: a hand with no numeric bid ends unplayed; every delta 0 (as in a game).
        answer = ask(self.query(bid=None, declarer=None))
        assert answer == {"delta": [0, 0], "saved": [True, True]}

    def test_a_bid_of_zero_is_the_lower_bound(self) -> None:
        """§3: bid is an integer >= 0 (a stateless query checks no auction): 0 is scored, -1 is
        refused with bid named."""
        # Team 1 makes a 0 contract with 150 meld + 150 points.
        assert ask(self.query(bid=0)) == {"delta": [130, 300], "saved": [True, True]}
        assert error_of(self.query(bid=-1)).startswith("bid:")

    def test_a_negative_last_trick_bonus_lets_points_go_below_zero(self) -> None:
        """``points`` include the last-trick bonus, any integer (OPTIONS.md): with -10, a team
        that took only the last trick, no counters in it, has -10 card points, as a game scores
        it. Was: "points[0]: must be >= 0", so such a hand could not be scored by a query."""
        options = {"last_trick_bonus": -10}
        query = self.query(bid=250, meld=[0, 100, 0, 0], points=[-10, 240], tricks=[1, 11])
        # Team 0 is not saved (trick_point: -10 is not one card point) and keeps its -10.
        assert ask({**query, "options": options}) == {"delta": [-10, 340], "saved": [False, True]}
        # Below the bonus no hand goes: refused, naming the figure; without a negative bonus the
        # floor stays 0.
        assert error_of({**query, "points": [-11, 241], "options": options}).startswith(
            "points[0]: must be >= -10"
        )
        assert error_of(query).startswith("points[0]: must be >= 0")
        lowest = -(2**31)
        two_handed = {"kind": "hand_score", "variant": "two-handed", "meld": [0, 40]}
        answer = ask(
            {**two_handed, "points": [lowest, 250], "options": {"last_trick_bonus": lowest}}
        )
        assert answer == {"delta": [lowest, 290], "saved": [True, True]}

    def test_bid_and_declarer_go_together(self) -> None:
        assert "bid and declarer" in error_of(self.query(declarer=None))
        assert "bid and declarer" in error_of(self.query(bid=None))

    def test_bidding_variants_need_the_bid(self) -> None:
        query = self.query()
        del query["bid"]
        assert '"bid"' in error_of(query)

    def test_conceded(self) -> None:
        answer = ask(self.query(conceded=True, points=[0, 0], tricks=[0, 0]))
        assert answer == {"delta": [30, -300], "saved": [True, False]}
        message = error_of(self.query(bid=None, declarer=None, conceded=True))
        assert message.startswith("conceded:")

    @pytest.mark.parametrize(
        ("field", "value"),
        [
            ("bid", True),
            ("bid", 300.0),
            ("bid", -10),
            ("declarer", 4),
            ("declarer", False),
            ("meld", [0, 100, 30]),
            ("meld", [0, 100, 30, True]),
            ("meld", "100"),
            ("points", [100, 150, 0, 0]),
            ("points", [100, -1]),
            ("tricks", [4]),
            ("dix", [0, 0, 0]),
            ("dix", [10, 0, 0, 0]),  # more than seat 0's meld
            ("conceded", "no"),
        ],
    )
    def test_bad_values_name_the_field(self, field: str, value: object) -> None:
        assert error_of(self.query(**{field: value})).startswith(field)

    def test_dix_survives_a_failed_save(self) -> None:
        # Team 0 takes no card point: its meld is lost, but its dix is exempt (partnership).
        query = self.query(
            meld=[10, 100, 30, 50], dix=[10, 0, 0, 0], points=[0, 250], tricks=[1, 11]
        )
        assert ask(query) == {"delta": [10, 400], "saved": [False, True]}

    def test_cutthroat_scores_each_seat(self) -> None:
        query = {
            "kind": "hand_score",
            "variant": "cutthroat",
            "bid": 300,
            "declarer": 1,
            "meld": [100, 200, 40],
            "points": [50, 150, 50],
            "tricks": [3, 10, 2],
        }
        assert ask(query) == {"delta": [150, 350, 90], "saved": [True, True, True]}
        assert error_of({**query, "points": [50, 200]}).startswith("points:")

    def test_two_handed_adds_meld_and_points(self) -> None:
        query = {
            "kind": "hand_score",
            "variant": "two-handed",
            "meld": [120, 40],
            "points": [140, 110],
        }
        assert ask(query) == {"delta": [260, 150], "saved": [True, True]}
        assert ask({**query, "bid": None, "declarer": None, "tricks": [14, 10]})["delta"] == [
            260,
            150,
        ]
        assert error_of({**query, "bid": 300, "declarer": 0}).startswith("bid:")
        assert error_of({**query, "conceded": True}).startswith("conceded:")

    def test_no_bid_variant(self) -> None:
        query = {
            "kind": "hand_score",
            "variant": "partnership-no-bid",
            "meld": [60, 20, 0, 0],
            "points": [250, 0],
            "tricks": [12, 0],
        }
        # save_meld "trick" for no-bid: team 1 took no trick and loses its 20.
        assert ask(query) == {"delta": [310, 0], "saved": [True, False]}
        assert error_of({**query, "declarer": 0}).startswith("declarer:")


# --------------------------------------------------------------------------------------------
# Random and mutated input


def _vector_queries() -> list[dict[str, Any]]:
    queries = []
    for path in sorted((Path(__file__).parent / "vectors").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                queries.append(json.loads(line)["query"])
    return queries


VECTOR_QUERIES = _vector_queries()

_CARDISH = st.sampled_from(
    ["AS", "10H", "th", "KD", "qc", "JS", "9H", "9D", " QS ", "1H", "ZZ", "", "A", "10X"]
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**6), max_value=10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | _CARDISH,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)

_FIELD_NAMES = sorted(
    {"kind", "variant", "options", "id"} | {f for fields in QUERY_FIELDS.values() for f in fields}
)
_OPTIONS = st.sampled_from(
    [
        {},
        {"head_over_partner": False},
        {"must_overtrump": False},
        {"run_shares_marriage_cards": True},
        {"count_scheme": "classic_11"},
        {"save_meld": 20},
        {"deck": 48},
        {"meld_values": {"pinochle": [0, 1]}},
        {"nines_redeal": True},
        {"bogus": 1},
    ]
)


@st.composite
def mutated_queries(draw: st.DrawFn) -> object:
    """A vector query with a few random edits: the inputs most likely to reach deep code."""
    query: dict[str, Any] = json.loads(json.dumps(draw(st.sampled_from(VECTOR_QUERIES))))
    for _ in range(draw(st.integers(0, 4))):
        edit = draw(st.integers(0, 6))
        if edit == 0 and query:
            del query[draw(st.sampled_from(sorted(query)))]
        elif edit == 1:
            query[draw(st.sampled_from(_FIELD_NAMES))] = draw(json_values)
        elif edit == 2:
            query["variant"] = draw(st.sampled_from([*VARIANT_IDS, "nope"]))
        elif edit == 3:
            query["options"] = draw(_OPTIONS)
        elif edit == 4:
            lists = sorted(k for k, v in query.items() if isinstance(v, list))
            if lists:
                items = query[draw(st.sampled_from(lists))]
                if items and draw(st.booleans()):
                    items[draw(st.integers(0, len(items) - 1))] = draw(_CARDISH | json_values)
                else:
                    items.append(draw(_CARDISH))
        elif edit == 5:
            query["kind"] = draw(st.sampled_from([*QUERY_FIELDS, "Meld", 1]))
        else:
            query[draw(st.sampled_from(_FIELD_NAMES))] = draw(
                st.lists(_CARDISH, max_size=5) | st.integers(-2, 5) | st.booleans()
            )
    if draw(st.booleans()):
        query["id"] = draw(json_values)
    return query


_line_text = st.text(alphabet=st.characters(blacklist_characters="\n\r"), max_size=40)

lines = st.lists(
    st.one_of(
        mutated_queries().map(json.dumps),
        json_values.map(json.dumps),
        _line_text,
        st.sampled_from(["", "  ", "{", "NaN", '{"kind": "meld", "id": Infinity}']),
    ),
    max_size=8,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines)
def test_random_lines_each_get_one_well_formed_answer(batch: list[str]) -> None:
    """No input escapes as an exception; each non-blank line gets one JSON object back, either
    an error (never an internal one) or exactly its kind's answer fields, with its id."""
    out = list(run_queries(batch))
    asked = [line for line in batch if line.strip()]
    assert len(out) == len(asked)
    for line, answer_line in zip(asked, out, strict=True):
        assert "\n" not in answer_line
        answer = json.loads(answer_line)
        assert isinstance(answer, dict)
        query = _strict_json(line)
        if "error" in answer:
            assert isinstance(answer["error"], str) and answer["error"]
            assert not answer["error"].startswith("internal error"), answer["error"]
            assert set(answer) <= {"id", "error"}
        else:
            assert isinstance(query, dict)
            assert set(answer) - {"id"} == set(ANSWER_FIELDS[query["kind"]])
        if isinstance(query, dict) and "id" in query:
            assert answer["id"] == query["id"]
        else:
            assert "id" not in answer


def _refuse(text: str) -> float:
    raise ValueError(text)


def _strict_json(line: str) -> object:
    """The line as the referee reads it (no NaN or infinities), or None when it is not JSON."""
    try:
        return json.loads(
            line,
            parse_constant=_refuse,
            parse_float=lambda text: (
                float(text) if abs(float(text)) != float("inf") else _refuse(text)
            ),
        )
    except (ValueError, RecursionError):
        return None


def _query_process(stdin: int | IO[bytes]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "referee.cli", "query"],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_a_reader_that_goes_away_ends_query_quietly(tmp_path: Path) -> None:
    """Was: ``pinochle-referee query < questions | head -1`` ended in a BrokenPipeError
    traceback. It ends quietly with 141, the status the shell gives ``cat`` killed by SIGPIPE."""
    questions = tmp_path / "questions.jsonl"
    questions.write_text('{"kind": "trick_points", "cards": ["AS"]}\n' * 100_000)
    with questions.open("rb") as stdin:
        process = _query_process(stdin)
        assert process.stdout is not None and process.stderr is not None
        assert process.stdout.readline() == b'{"points": 10}\n'
        process.stdout.close()
        assert process.wait(60) == 141
    assert process.stderr.read() == b""


def test_ctrl_c_ends_query_quietly() -> None:
    """Was: Ctrl-C while query waited for the next line printed a KeyboardInterrupt traceback.
    Exit 130, the shell's status for an interrupted command, and nothing on standard error."""
    process = _query_process(subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None
    assert process.stderr is not None
    process.stdin.write(b'{"id": 1, "kind": "trick_points", "cards": ["AS"]}\n')
    process.stdin.flush()
    assert process.stdout.readline() == b'{"id": 1, "points": 10}\n'  # waiting for the next
    process.send_signal(signal.SIGINT)
    assert process.wait(30) == 130
    assert process.stderr.read() == b""
    process.stdin.close()
