"""Tests for referee.rules.options: defaults, refusals, derived sizes (OPTIONS.md, RULES.md A)."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from referee.rules.options import (
    MELD_NAMES,
    REQUIRES_ENFORCED,
    VARIANT_IDS,
    VARIANTS,
    OptionError,
    RuleSet,
    option_schema,
    resolve_options,
    variant_defaults,
)

# --------------------------------------------------------------------------------------------
# Expected defaults, typed in from OPTIONS.md (not read from OPTIONS.json, so a drift shows)
# --------------------------------------------------------------------------------------------

MELDS_2H = {
    "run": [150, 300],
    "royal_marriage": [40, 80],
    "marriage": [20, 40],
    "dix": [10, 20],
    "aces_around": [100, 200],
    "kings_around": [80, 160],
    "queens_around": [60, 120],
    "jacks_around": [40, 80],
    "pinochle": [40, 80],
    "roundhouse_bonus": [0, 0],
}
MELDS_ABUNDANCE = {
    "run": [150, 1500],
    "royal_marriage": [40, 80],
    "marriage": [20, 40],
    "dix": [10, 20],
    "aces_around": [100, 1000],
    "kings_around": [80, 800],
    "queens_around": [60, 600],
    "jacks_around": [40, 400],
    "pinochle": [40, 300],
    "roundhouse_bonus": [0, 0],
}
MELDS_DD48 = {
    "run": [15, 150],
    "royal_marriage": [4, 8],
    "marriage": [2, 4],
    "dix": [1, 2],
    "aces_around": [10, 100],
    "kings_around": [8, 80],
    "queens_around": [6, 60],
    "jacks_around": [4, 40],
    "pinochle": [4, 30],
    "roundhouse_bonus": [0, 0],
}
MELDS_DD80 = {
    "run": [15, 150, 225, 300],
    "royal_marriage": [4, 8, 12, 16],
    "marriage": [2, 4, 6, 8],
    "dix": [1, 2, 3, 4],
    "aces_around": [10, 100, 150, 200],
    "kings_around": [8, 80, 120, 160],
    "queens_around": [6, 60, 90, 120],
    "jacks_around": [4, 40, 60, 80],
    "pinochle": [4, 30, 60, 90],
    "roundhouse_bonus": [0, 0, 0, 0],
}

# Options that apply to every variant, with the defaults they share.
SHARED = {
    "meld_declaration": "declared",
    "run_counts_its_royal_marriage": False,
    "run_shares_marriage_cards": False,
    "head_rule": "always",
    "head_when_trumped": "not_required",
    "head_over_partner": True,
    "must_trump_when_void": True,
    "must_overtrump": True,
    "must_trump_even_if_cannot_overtrump": True,
    "classic_rounding_7_9": False,
    "min_meld_to_record": 0,
}
BIDDING = ("min_bid", "bid_step", "max_raise", "bid_schedule")

EXPECTED_DEFAULTS: dict[str, dict[str, object]] = {
    "two-handed": {
        **SHARED,
        "deck": 48,
        "meld_values": MELDS_2H,
        "count_scheme": "simple_10_5",
        "last_trick_bonus": 10,
        "target": 1000,
        "both_reach": "higher_total",
        "margin_win": False,
        "new_card_required": True,
        "deferred_meld_scoring": True,
        "dix_scores_when_played": True,
        "last_draw": "winner_facedown",
        "one_meld_per_trick": True,
        "meld_before_draw": True,
        "phase1_free_play": True,
    },
    "cutthroat": {
        **SHARED,
        "deck": 48,
        "min_bid": 300,
        "bid_step": 10,
        "max_raise": None,
        "bid_schedule": None,
        "allow_pass_with_help": False,
        "allow_bid_or_redeal": False,
        "all_pass": "redeal",
        "trump_requires_marriage": False,
        "may_bury_melded_cards": False,
        "meld_values": MELDS_ABUNDANCE,
        "count_scheme": "modern10",
        "last_trick_bonus": 10,
        "save_meld": "trick",
        "save_applies_to": "defenders",
        "dix_exempt_from_save": False,
        "target": 1500,
        "both_reach": "bidder_wins",
        "margin_win": False,
    },
    "partnership": {
        **SHARED,
        "deck": 48,
        "min_bid": 250,
        "bid_step": 10,
        "max_raise": 20,
        "bid_schedule": None,
        "allow_pass_with_help": True,
        "allow_bid_or_redeal": False,
        "all_pass": "dealer_stuck",
        "trump_requires_marriage": False,
        "exchange_mode": "partner",
        "exchange_count": 4,
        "meld_values": MELDS_ABUNDANCE,
        "count_scheme": "modern10",
        "last_trick_bonus": 10,
        "save_meld": "trick_point",
        "save_applies_to": "both",
        "dix_exempt_from_save": True,
        "target": 1500,
        "both_reach": "bidder_wins",
        "margin_win": False,
    },
    "double-deck": {
        **SHARED,
        "deck": 80,
        "min_bid": 50,
        "bid_step": 1,
        "max_raise": None,
        "bid_schedule": None,
        "allow_pass_with_help": False,
        "allow_bid_or_redeal": True,
        "all_pass": "dealer_stuck",
        "trump_requires_marriage": True,
        "exchange_mode": "partner",
        "exchange_count": 4,
        "meld_values": MELDS_DD80,
        "count_scheme": "points1",
        "last_trick_bonus": 2,
        "save_meld": 20,
        "save_applies_to": "both",
        "dix_exempt_from_save": False,
        "target": 500,
        "both_reach": "higher_total",
        "margin_win": True,
    },
    "partnership-no-bid": {
        **SHARED,
        "deck": 48,
        "meld_values": MELDS_ABUNDANCE,
        "count_scheme": "modern10",
        "last_trick_bonus": 10,
        "save_meld": "trick",
        "save_applies_to": "both",
        "dix_exempt_from_save": False,
        "target": 1500,
        "both_reach": "higher_total",
        "margin_win": False,
    },
}

# The values RuleSet holds for options that do not apply to a variant (RuleSet docstring).
NEUTRAL = {
    "min_bid": 0,
    "bid_step": 1,
    "max_raise": None,
    "bid_schedule": None,
    "allow_pass_with_help": False,
    "allow_bid_or_redeal": False,
    "all_pass": "redeal",
    "trump_requires_marriage": False,
    "exchange_mode": "none",
    "exchange_count": 0,
    "may_bury_melded_cards": False,
    "save_meld": "none",
    "save_applies_to": "both",
    "dix_exempt_from_save": False,
    "new_card_required": False,
    "deferred_meld_scoring": False,
    "dix_scores_when_played": False,
    "last_draw": "winner_facedown",
}

# Options whose only accepted value is fixed: they are validated but have no RuleSet field.
FIXED_ONLY = {"classic_rounding_7_9", "one_meld_per_trick", "meld_before_draw", "phase1_free_play"}


def refusal(variant: str, options: object, *, for_game: bool = True) -> OptionError:
    with pytest.raises(OptionError) as caught:
        resolve_options(variant, options, for_game=for_game)
    return caught.value


def as_lists(table: object) -> dict[str, list[int]]:
    assert isinstance(table, dict)
    return {name: list(levels) for name, levels in table.items()}


# --------------------------------------------------------------------------------------------
# Variants and defaults
# --------------------------------------------------------------------------------------------


class TestVariants:
    def test_registry_lists_the_five_variants_of_a1(self) -> None:
        assert tuple(VARIANTS) == VARIANT_IDS
        facts = {v.id: (v.players, v.partnerships, v.bidding) for v in VARIANTS.values()}
        assert facts == {
            "two-handed": (2, False, False),
            "cutthroat": (3, False, True),
            "partnership": (4, True, True),
            "double-deck": (4, True, True),
            "partnership-no-bid": (4, True, False),
        }
        assert all(v.description and "\n" not in v.description for v in VARIANTS.values())

    def test_variant_info_is_frozen(self) -> None:
        with pytest.raises(dataclasses.FrozenInstanceError):
            VARIANTS["cutthroat"].players = 4  # type: ignore[misc]

    @pytest.mark.parametrize("variant", ["poker", "", "Two-Handed", None, 2, ["two-handed"]])
    def test_unknown_variant_is_refused_with_the_list_of_ids(self, variant: object) -> None:
        error = refusal(variant, None)  # type: ignore[arg-type]
        assert error.option is None
        assert all(vid in str(error) for vid in VARIANT_IDS)

    def test_variant_defaults_refuses_an_unknown_variant(self) -> None:
        with pytest.raises(OptionError):
            variant_defaults("pinochle")


class TestDefaults:
    @pytest.mark.parametrize("variant", VARIANT_IDS)
    def test_variant_defaults_match_options_md(self, variant: str) -> None:
        assert variant_defaults(variant) == EXPECTED_DEFAULTS[variant]

    @pytest.mark.parametrize("variant", VARIANT_IDS)
    def test_resolved_defaults_match_options_md_and_neutral_values(self, variant: str) -> None:
        rules = resolve_options(variant)
        expected = {**NEUTRAL, **EXPECTED_DEFAULTS[variant]}
        for name, value in expected.items():
            if name in FIXED_ONLY:
                continue
            got = getattr(rules, name)
            if name == "meld_values":
                assert as_lists(got) == value
            else:
                assert got == value, name
        assert rules.explicit == {}
        assert rules.variant == variant

    def test_every_option_is_a_ruleset_field_or_fixed(self) -> None:
        fields = {f.name for f in dataclasses.fields(RuleSet)}
        names = {entry["name"] for entry in option_schema()}
        assert names - fields == FIXED_ONLY
        assert set(NEUTRAL) <= fields

    def test_double_deck_with_48_cards_takes_the_48_card_defaults(self) -> None:
        rules = resolve_options("double-deck", {"deck": 48})
        assert (rules.deck, rules.min_bid, rules.target) == (48, 25, 150)
        assert rules.last_trick_bonus == 1
        assert rules.save_meld == 1
        assert rules.dix_exempt_from_save is True
        assert rules.trump_requires_marriage is False
        assert as_lists(rules.meld_values) == MELDS_DD48
        # What does not depend on the deck stays.
        assert (rules.bid_step, rules.allow_bid_or_redeal, rules.margin_win) == (1, True, True)

    def test_explicit_values_beat_deck_dependent_defaults(self) -> None:
        rules = resolve_options("double-deck", {"deck": 48, "target": 300, "save_meld": "none"})
        assert (rules.target, rules.save_meld, rules.min_bid) == (300, "none", 25)

    def test_variant_defaults_are_fresh_copies(self) -> None:
        first = variant_defaults("partnership")
        first["min_bid"] = 1
        meld_values = first["meld_values"]
        assert isinstance(meld_values, dict)
        meld_values["run"].append(9)
        assert variant_defaults("partnership") == EXPECTED_DEFAULTS["partnership"]


class TestLastTrickBonus:
    @pytest.mark.parametrize(
        ("scheme", "deck48", "deck80"),
        [
            ("modern10", 10, 10),
            ("simple_10_5", 10, 10),
            ("classic_11", 10, 10),
            ("points1", 1, 2),
            ("points1_single", 1, 1),
            ("points1_double", 2, 2),
        ],
    )
    def test_follows_a_given_count_scheme(self, scheme: str, deck48: int, deck80: int) -> None:
        dd = "double-deck"
        assert resolve_options(dd, {"count_scheme": scheme, "deck": 48}).last_trick_bonus == deck48
        assert resolve_options(dd, {"count_scheme": scheme}).last_trick_bonus == deck80
        assert resolve_options("partnership", {"count_scheme": scheme}).last_trick_bonus == deck48

    def test_given_bonus_wins_over_the_scheme(self) -> None:
        options = {"count_scheme": "points1", "last_trick_bonus": 7}
        assert resolve_options("cutthroat", options).last_trick_bonus == 7

    def test_left_out_with_no_scheme_keeps_the_variant_default(self) -> None:
        assert resolve_options("two-handed", {"target": 500}).last_trick_bonus == 10
        assert resolve_options("double-deck", {"deck": 48}).last_trick_bonus == 1

    def test_any_integer_is_accepted(self) -> None:
        assert resolve_options("partnership", {"last_trick_bonus": -5}).last_trick_bonus == -5


class TestSizes:
    @pytest.mark.parametrize(
        ("variant", "options", "hand", "widow"),
        [
            ("two-handed", {}, 12, 0),
            ("cutthroat", {}, 15, 3),
            ("partnership", {}, 12, 0),
            ("partnership", {"exchange_mode": "none"}, 12, 0),
            ("partnership", {"exchange_mode": "kitty"}, 11, 4),
            ("double-deck", {}, 20, 0),
            ("double-deck", {"exchange_mode": "kitty"}, 19, 4),
            ("double-deck", {"deck": 48}, 12, 0),
            ("double-deck", {"deck": 48, "exchange_mode": "kitty", "exchange_count": 4}, 11, 4),
            ("partnership-no-bid", {}, 12, 0),
        ],
    )
    def test_hand_and_widow_sizes(
        self, variant: str, options: dict[str, object], hand: int, widow: int
    ) -> None:
        rules = resolve_options(variant, options)
        assert (rules.hand_size, rules.widow_size) == (hand, widow)
        # Every card is dealt: hands plus widow (two-handed: plus the stock of 24).
        stock = 24 if variant == "two-handed" else 0
        assert rules.players * rules.hand_size + rules.widow_size + stock == rules.deck

    def test_exchange_count_is_kept_under_mode_none(self) -> None:
        rules = resolve_options("partnership", {"exchange_mode": "none", "exchange_count": 2})
        assert (rules.exchange_mode, rules.exchange_count) == ("none", 2)


class TestStepAt:
    def test_without_a_schedule_the_step_is_bid_step_at_every_level(self) -> None:
        rules = resolve_options("partnership", {"bid_step": 5})
        assert rules.bid_schedule is None
        assert [rules.step_at(level) for level in (0, 250, 1000)] == [5, 5, 5]

    def test_schedule_picks_the_last_pair_at_or_below_the_level(self) -> None:
        rules = resolve_options("double-deck", {"bid_schedule": [[50, 1], [60, 5], [100, 10]]})
        assert rules.bid_schedule == ((50, 1), (60, 5), (100, 10))
        levels = (0, 49, 50, 59, 60, 99, 100, 500)
        assert [rules.step_at(level) for level in levels] == [1, 1, 1, 1, 5, 5, 10, 10]

    def test_below_the_first_level_the_first_step_applies(self) -> None:
        rules = resolve_options("cutthroat", {"bid_schedule": [[250, 20], [400, 50]]})
        assert rules.step_at(100) == 20

    def test_tuples_are_accepted_as_json_arrays(self) -> None:
        rules = resolve_options("double-deck", {"bid_schedule": ((50, 1), (60, 5))})
        assert rules.step_at(70) == 5


# --------------------------------------------------------------------------------------------
# Refusals
# --------------------------------------------------------------------------------------------


class TestOptionsObject:
    @pytest.mark.parametrize("options", [[], "deck=48", 48, True, [("deck", 48)]])
    def test_options_must_be_an_object(self, options: object) -> None:
        error = refusal("partnership", options)
        assert error.option is None
        assert "object" in str(error)

    def test_option_names_must_be_strings(self) -> None:
        error = refusal("partnership", {1: 2})
        assert error.option is None

    def test_none_and_empty_object_mean_all_defaults(self) -> None:
        assert resolve_options("cutthroat", None) == resolve_options("cutthroat", {})


class TestNames:
    def test_unknown_name_is_refused_with_a_suggestion(self) -> None:
        error = refusal("partnership", {"min_bids": 260})
        assert error.option == "min_bids"
        assert "unknown option" in str(error)
        assert '"min_bid"' in str(error)

    def test_unknown_name_without_a_close_match(self) -> None:
        error = refusal("partnership", {"flavour": "mint"})
        assert (error.option, "unknown option" in str(error)) == ("flavour", True)

    @pytest.mark.parametrize(
        ("name", "why"),
        [
            ("players", "fixed by the variant"),
            ("hand_size", "follows from deck"),
            ("nines_redeal", "A.10 item 7"),
            ("declare_out", "A.8 item 9"),
            ("allow_bor", "use allow_bid_or_redeal"),
        ],
    )
    def test_not_configurable_names_say_not_supported_and_why(self, name: str, why: str) -> None:
        error = refusal("partnership", {name: 1})
        assert error.option == name
        assert "not supported in this version" in str(error)
        assert why in str(error)
        assert str(error).count("not supported") == 1  # nines_redeal's reason says it too

    @pytest.mark.parametrize(
        ("variant", "name", "value"),
        [
            ("two-handed", "min_bid", 250),
            ("partnership-no-bid", "bid_step", 10),
            ("cutthroat", "exchange_mode", "partner"),
            ("partnership", "may_bury_melded_cards", True),
            ("two-handed", "save_meld", "trick"),
            ("cutthroat", "last_draw", "winner_chooses"),
            ("partnership", "one_meld_per_trick", True),
        ],
    )
    def test_inapplicable_option_is_refused(self, variant: str, name: str, value: object) -> None:
        error = refusal(variant, {name: value})
        assert error.option == name
        assert f"does not apply to {variant}" in str(error)

    def test_first_problem_in_sorted_name_order(self) -> None:
        error = refusal("partnership", {"zeta": 1, "target": 0, "alpha": 1})
        assert error.option == "alpha"
        error = refusal("partnership", {"target": 0, "deck": 80})
        assert error.option == "deck"

    def test_single_option_problems_come_before_combinations(self) -> None:
        options = {"exchange_mode": "kitty", "exchange_count": 3, "target": 0}
        assert refusal("partnership", options).option == "target"


class TestTypes:
    @pytest.mark.parametrize(
        ("variant", "name", "value"),
        [
            ("partnership", "min_bid", True),  # a bool is not an int
            ("partnership", "target", False),
            ("partnership", "min_bid", 250.0),
            ("partnership", "min_bid", "250"),
            ("partnership", "head_over_partner", 1),  # an int is not a bool
            ("partnership", "must_overtrump", 0),
            ("partnership", "must_overtrump", "true"),
            ("partnership", "head_rule", 1),
            ("partnership", "count_scheme", None),
            ("partnership", "save_meld", 1.5),
            ("partnership", "save_meld", True),
            ("partnership", "save_meld", None),
            ("partnership", "meld_values", [["run", 150]]),
            ("partnership", "bid_schedule", None),  # not nullable: leave it out
            ("partnership", "bid_schedule", {"250": 10}),
            ("double-deck", "deck", True),
            ("partnership", "target", float("nan")),
            ("partnership", "target", {1, 2}),
        ],
    )
    def test_wrong_type_is_refused(self, variant: str, name: str, value: object) -> None:
        error = refusal(variant, {name: value})
        assert error.option == name
        assert f'"{name}" must be' in str(error)

    def test_null_is_accepted_where_nullable(self) -> None:
        assert resolve_options("partnership", {"max_raise": None}).max_raise is None
        assert resolve_options("cutthroat", {"max_raise": 50}).max_raise == 50


class TestValues:
    @pytest.mark.parametrize(
        ("variant", "name", "value", "allowed"),
        [
            ("partnership", "min_bid", 0, ">= 1"),
            ("partnership", "bid_step", -10, ">= 1"),
            ("cutthroat", "max_raise", 0, ">= 1, or null"),
            ("partnership", "exchange_count", 6, "from 0 to 5"),
            ("double-deck", "exchange_count", -1, "from 0 to 5"),
            ("partnership", "target", 0, ">= 1"),
            ("partnership", "save_meld", -1, ">= 0"),
        ],
    )
    def test_out_of_range(self, variant: str, name: str, value: int, allowed: str) -> None:
        error = refusal(variant, {name: value})
        assert error.option == name
        assert "out of range" in str(error)
        assert allowed in str(error)
        assert str(value) in str(error)

    @pytest.mark.parametrize(
        ("variant", "name", "value"),
        [
            ("double-deck", "deck", 52),
            ("partnership", "all_pass", "eldest_forced"),
            ("partnership", "head_rule", "sometimes"),
            ("partnership", "count_scheme", "points2"),
            ("double-deck", "exchange_mode", "widow"),
            ("partnership", "save_meld", "always"),
            ("cutthroat", "both_reach", "declare_out"),  # spelled only where not_supported
        ],
    )
    def test_not_in_values(self, variant: str, name: str, value: object) -> None:
        error = refusal(variant, {name: value})
        assert error.option == name
        assert "is not allowed" in str(error)
        assert json.dumps(value) in str(error)

    @pytest.mark.parametrize(
        ("variant", "name", "value", "allowed"),
        [
            ("two-handed", "deck", 80, "48"),
            ("cutthroat", "deck", 80, "48"),
            ("partnership", "deck", 80, "48"),
            ("partnership-no-bid", "deck", 80, "48"),
            ("two-handed", "both_reach", "bidder_wins", '"higher_total", "extend_250"'),
            ("partnership", "both_reach", "extend_250", '"higher_total", "bidder_wins"'),
            ("partnership-no-bid", "both_reach", "bidder_wins", '"higher_total"'),
        ],
    )
    def test_values_by_variant(self, variant: str, name: str, value: object, allowed: str) -> None:
        error = refusal(variant, {name: value})
        assert error.option == name
        assert f"not allowed for {variant}" in str(error)
        assert f"(allowed: {allowed})" in str(error)
        # The same value passes where the narrower list does not apply.
        other = "double-deck" if name == "deck" else "two-handed"
        other = "partnership" if value == "bidder_wins" else other
        assert getattr(resolve_options(other, {name: value}), name) == value

    def test_accepted_values_reach_the_ruleset(self) -> None:
        options: dict[str, object] = {
            "all_pass": "redeal",
            "allow_bid_or_redeal": True,
            "count_scheme": "classic_11",
            "head_rule": "trump_lead_only",
            "head_when_trumped": "beat_highest_led_card",
            "meld_declaration": "auto",
            "save_meld": 0,
            "save_applies_to": "defenders",
            "min_meld_to_record": 20,
            "margin_win": True,
        }
        rules = resolve_options("partnership", options)
        for name, value in options.items():
            assert getattr(rules, name) == value
        assert rules.last_trick_bonus == 10


class TestNotSupported:
    @pytest.mark.parametrize(
        ("variant", "name", "value"),
        [
            ("two-handed", "meld_declaration", "auto"),
            ("two-handed", "both_reach", "declare_out"),
            ("partnership-no-bid", "both_reach", "declare_out"),
            ("two-handed", "margin_win", True),
            ("cutthroat", "margin_win", True),
            ("partnership", "classic_rounding_7_9", True),
            ("double-deck", "classic_rounding_7_9", True),
            ("two-handed", "one_meld_per_trick", False),
            ("two-handed", "meld_before_draw", False),
            ("two-handed", "phase1_free_play", False),
            ("two-handed", "min_meld_to_record", 10),
            ("two-handed", "min_meld_to_record", -1),
            ("partnership-no-bid", "save_applies_to", "defenders"),
        ],
    )
    def test_refused_as_not_supported(self, variant: str, name: str, value: object) -> None:
        error = refusal(variant, {name: value})
        assert error.option == name
        assert "not supported in this version" in str(error)
        assert json.dumps(value) in str(error)
        assert variant in str(error)
        # Also in a rules query: only game_values_by_variant is game-only.
        assert refusal(variant, {name: value}, for_game=False).option == name

    def test_the_accepted_value_of_a_fixed_option_passes(self) -> None:
        options = {"one_meld_per_trick": True, "meld_before_draw": True, "phase1_free_play": True}
        assert resolve_options("two-handed", options).explicit == options
        assert resolve_options("cutthroat", {"classic_rounding_7_9": False}).variant == "cutthroat"

    @pytest.mark.parametrize("name", ["run_counts_its_royal_marriage", "run_shares_marriage_cards"])
    def test_two_handed_run_options_are_refused_in_games_only(self, name: str) -> None:
        error = refusal("two-handed", {name: True})
        assert error.option == name
        assert "not supported in this version" in str(error)
        assert "two-handed game" in str(error)
        query = resolve_options("two-handed", {name: True}, for_game=False)
        assert getattr(query, name) is True
        # False is fine in both; true is fine in games of the other variants.
        assert getattr(resolve_options("two-handed", {name: False}), name) is False
        assert getattr(resolve_options("partnership", {name: True}), name) is True

    def test_queries_check_everything_else_like_games(self) -> None:
        assert refusal("two-handed", {"min_bid": 250}, for_game=False).option == "min_bid"
        assert refusal("partnership", {"bogus": 1}, for_game=False).option == "bogus"
        assert refusal("partnership", {"deck": 80}, for_game=False).option == "deck"


class TestMeldValues:
    def test_overrides_replace_whole_entries_of_the_default_table(self) -> None:
        rules = resolve_options("partnership", {"meld_values": {"pinochle": [40], "dix": [0]}})
        expected = {**MELDS_ABUNDANCE, "pinochle": [40], "dix": [0]}
        assert as_lists(rules.meld_values) == expected
        assert rules.meld_values["pinochle"] == (40,)
        assert set(rules.meld_values) == set(MELD_NAMES)

    def test_double_deck_overrides_apply_to_the_deck_table(self) -> None:
        rules = resolve_options("double-deck", {"deck": 48, "meld_values": {"run": [15, 150]}})
        assert as_lists(rules.meld_values) == MELDS_DD48
        rules = resolve_options("double-deck", {"meld_values": {"roundhouse_bonus": [24]}})
        assert as_lists(rules.meld_values) == {**MELDS_DD80, "roundhouse_bonus": [24]}

    def test_two_handed_accepts_longer_lists(self) -> None:
        rules = resolve_options("two-handed", {"meld_values": {"pinochle": [40, 300]}})
        assert rules.meld_values["pinochle"] == (40, 300)

    def test_unknown_meld_name_is_named(self) -> None:
        error = refusal("partnership", {"meld_values": {"flush": [150]}})
        assert error.option == "meld_values.flush"
        assert "meld_values.flush" in str(error)

    def test_roundhouse_bonus_is_refused_in_two_handed(self) -> None:
        error = refusal("two-handed", {"meld_values": {"roundhouse_bonus": [240]}})
        assert error.option == "meld_values.roundhouse_bonus"
        assert "does not apply to two-handed" in str(error)
        rules = resolve_options("cutthroat", {"meld_values": {"roundhouse_bonus": [240]}})
        assert rules.meld_values["roundhouse_bonus"] == (240,)

    @pytest.mark.parametrize(
        "levels", [[], [-1], [40, -1], [True], [40.0], "40", 40, None, [1, 2, 3, 4, 5]]
    )
    def test_bad_level_lists_are_refused(self, levels: object) -> None:
        error = refusal("partnership", {"meld_values": {"run": levels}})
        assert error.option == "meld_values.run"
        assert "meld_values.run" in str(error)

    def test_non_string_keys_are_refused(self) -> None:
        assert refusal("partnership", {"meld_values": {1: [1]}}).option == "meld_values"

    def test_meld_names_are_checked_in_sorted_order(self) -> None:
        error = refusal("partnership", {"meld_values": {"zzz": [1], "run": []}})
        assert error.option == "meld_values.run"


class TestBidSchedule:
    @pytest.mark.parametrize(
        ("schedule", "words"),
        [
            ([], "non-empty"),
            ([[250]], "[level, step]"),
            ([[250, 10, 20]], "[level, step]"),
            ([250, 10], "[level, step]"),
            ([[250, True]], "[level, step]"),
            ([[250.0, 10]], "[level, step]"),
            ([[250, 0]], "step must be >= 1"),
            ([[200, 10], [300, -5]], "step must be >= 1"),
            ([[200, 10], [200, 20]], "rise strictly"),
            ([[200, 10], [150, 20]], "rise strictly"),
        ],
    )
    def test_shape_is_checked(self, schedule: object, words: str) -> None:
        error = refusal("partnership", {"bid_schedule": schedule})
        assert error.option == "bid_schedule"
        assert words in str(error)

    def test_first_level_must_not_be_above_the_resolved_min_bid(self) -> None:
        error = refusal("double-deck", {"bid_schedule": [[60, 5]]})
        assert error.option == "bid_schedule"
        assert "min_bid 50" in str(error)
        # With 48 cards min_bid is 25, so a schedule from 50 no longer fits.
        assert refusal("double-deck", {"deck": 48, "bid_schedule": [[50, 1]]}).option == (
            "bid_schedule"
        )
        # A given min_bid counts.
        rules = resolve_options("double-deck", {"min_bid": 60, "bid_schedule": [[60, 5]]})
        assert rules.min_bid == 60
        assert resolve_options("cutthroat", {"bid_schedule": [[250, 10]]}).min_bid == 300

    def test_requires_entries_are_all_enforced(self) -> None:
        conditions: set[object] = set()
        for entry in option_schema():
            requires = entry.get("requires", [])
            assert isinstance(requires, list)
            conditions.update(requires)
        assert conditions == REQUIRES_ENFORCED


class TestKitty:
    @pytest.mark.parametrize("count", [0, 3, 5])
    def test_kitty_needs_exchange_count_4(self, count: int) -> None:
        options = {"exchange_mode": "kitty", "exchange_count": count}
        error = refusal("double-deck", options)
        assert error.option == "exchange_count"
        assert "kitty" in str(error)
        assert "4" in str(error)
        # The same count is fine when cards are passed to the partner.
        assert resolve_options("double-deck", {"exchange_count": count}).exchange_count == count

    def test_kitty_with_the_default_count_is_fine(self) -> None:
        rules = resolve_options("partnership", {"exchange_mode": "kitty"})
        assert (rules.exchange_mode, rules.exchange_count) == ("kitty", 4)


# --------------------------------------------------------------------------------------------
# RuleSet as a value
# --------------------------------------------------------------------------------------------


class TestRuleSetValue:
    def test_explicit_is_the_options_as_given_and_json_ready(self) -> None:
        options = {
            "bid_schedule": [[50, 1], [60, 5]],
            "meld_values": {"run": [15, 150]},
            "save_meld": "trick",
            "max_raise": None,
        }
        rules = resolve_options("double-deck", options)
        assert rules.explicit == options
        assert json.loads(json.dumps(rules.explicit)) == options
        # Feeding it back gives the same rules (records replay under their own options).
        assert resolve_options("double-deck", rules.explicit) == rules

    def test_ruleset_and_its_mappings_are_read_only(self) -> None:
        rules = resolve_options("partnership", {"meld_values": {"run": [150, 1500]}})
        with pytest.raises(dataclasses.FrozenInstanceError):
            rules.target = 1  # type: ignore[misc]
        explicit: Any = rules.explicit
        meld_values: Any = rules.meld_values
        with pytest.raises(TypeError):
            explicit["target"] = 1
        with pytest.raises(TypeError):
            explicit["meld_values"]["run"].append(1)
        with pytest.raises(TypeError):
            meld_values["run"] = (1,)
        with pytest.raises(TypeError):
            meld_values.update(run=(1,))

    def test_caller_mutation_does_not_reach_the_ruleset(self) -> None:
        options: dict[str, Any] = {"bid_schedule": [[250, 10]]}
        rules = resolve_options("partnership", options)
        options["bid_schedule"][0][1] = 99
        assert rules.explicit == {"bid_schedule": [[250, 10]]}
        assert rules.step_at(300) == 10

    def test_equal_options_give_the_same_cached_ruleset(self) -> None:
        first = resolve_options("cutthroat", {"target": 1000, "min_bid": 250})
        again = resolve_options("cutthroat", {"min_bid": 250, "target": 1000})
        assert first is again
        assert resolve_options("cutthroat", {"target": 1000}) != first

    def test_ruleset_is_hashable_picklable_and_copyable(self) -> None:
        rules = resolve_options("double-deck", {"bid_schedule": [[25, 1]], "deck": 48})
        assert hash(rules) == hash(copy.deepcopy(rules))
        assert pickle.loads(pickle.dumps(rules)) == rules
        assert (
            len({rules, resolve_options("double-deck", {"bid_schedule": [[25, 1]], "deck": 48})})
            == 1
        )

    def test_option_error_keeps_its_option_through_pickle(self) -> None:
        error = refusal("partnership", {"target": 0})
        restored = pickle.loads(pickle.dumps(error))
        assert (restored.option, str(restored)) == ("target", str(error))
        assert isinstance(error, ValueError)


class TestSchema:
    def test_schema_is_the_options_json_entries(self) -> None:
        schema = option_schema()
        names = [entry["name"] for entry in schema]
        assert len(names) == len(set(names))
        assert {"deck", "meld_values", "bid_schedule", "last_draw"} <= set(names)
        for entry in schema:
            assert {"name", "type", "values", "applies_to", "default", "meaning"} <= set(entry)
        json.dumps(schema)

    def test_schema_is_a_fresh_copy(self) -> None:
        schema = option_schema()
        schema[0]["name"] = "changed"
        assert option_schema()[0]["name"] != "changed"

    def test_shipped_json_equals_the_shared_spec(self) -> None:
        shared = Path("/work/shared/OPTIONS.json")
        if not shared.exists():
            pytest.skip("the shared spec directory is not present here")
        shipped = Path(__file__).resolve().parents[1] / "referee" / "rules" / "options.json"
        assert json.loads(shipped.read_text()) == json.loads(shared.read_text())
