"""The public test vectors (shared/vectors/README.md), run through the CLI's own code path.

Each case's ``query`` goes through :func:`referee.query.run_queries` as one JSON line, exactly as
``pinochle-referee query`` would receive it on standard input, and every field of ``expect`` must
match the answer exactly. Going through the line reader rather than ``answer_query`` is the point:
the vectors pin what a user of the CLI sees, JSON encoding included.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from referee.query import ANSWER_FIELDS, KINDS, run_queries

VECTOR_DIR = Path(__file__).parent / "vectors"


def _load_cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    for path in sorted(VECTOR_DIR.glob("*.jsonl")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                case = json.loads(line)
                case["_where"] = f"{path.name}:{number}"
                cases.append(case)
    return cases


CASES = _load_cases()


def test_vectors_are_present_and_named_uniquely() -> None:
    """A missing or renamed vector file must not make the suite pass vacuously."""
    names = [case["name"] for case in CASES]
    assert len(names) == len(set(names)), "duplicate vector names"
    kinds = {case["query"]["kind"] for case in CASES}
    assert kinds == set(KINDS)


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_vector(case: dict[str, Any]) -> None:
    line = json.dumps(case["query"])
    answers = list(run_queries([line + "\n"]))
    assert len(answers) == 1
    answer = json.loads(answers[0])
    assert "error" not in answer, f"{case['_where']}: {answer['error']}"
    kind = case["query"]["kind"]
    assert set(case["expect"]) <= set(ANSWER_FIELDS[kind])
    for field, expected in case["expect"].items():
        assert answer[field] == expected, f"{case['_where']} {field}: {answer[field]!r}"
