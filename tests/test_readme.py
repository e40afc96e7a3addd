"""The README's examples are run as written, so the README stays true.

A reader copies these snippets first. Each Python snippet is executed (the client's against an
in-process server, its address put in for ``127.0.0.1:50051``) and every ``print`` is compared
with the comment that shows its output: the comment on the same line, or the comment line just
below a ``print`` that has none. ``...`` in a shown output stands for any text. The shell
transcripts of "Auditing a recorded game" and "Asking a rules question" are run in the
repository's root with bash, and their output and exit status compared line for line.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from referee.audit import audit_record
from tests.service_helpers import Served, serving

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
README_ADDRESS = "127.0.0.1:50051"


def section(title: str) -> str:
    """The text under the heading ``title`` (any level), up to the next heading."""
    lines = README.read_text(encoding="utf-8").splitlines()
    heading = re.compile(r"#{1,6} ")
    starts = [
        i for i, line in enumerate(lines) if heading.match(line) and line.split(" ", 1)[1] == title
    ]
    assert len(starts) == 1, f"README has {len(starts)} headings {title!r}"
    body: list[str] = []
    in_code = False
    for line in lines[starts[0] + 1 :]:
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and heading.match(line):
            break
        body.append(line)
    return "\n".join(body)


def code_blocks(text: str, language: str) -> list[str]:
    """The fenced blocks of ``text`` whose fence names ``language`` ("" for a bare fence)."""
    pattern = re.compile(r"^```" + re.escape(language) + r"\n(.*?)^```$", re.M | re.S)
    return [match.group(1) for match in pattern.finditer(text)]


def shown(expected: str) -> re.Pattern[str]:
    """A shown output as a pattern: literal text, ``...`` standing for anything."""
    return re.compile(".*".join(re.escape(part) for part in expected.split("...")), re.S)


@dataclass(frozen=True)
class Shown:
    """A ``print`` of a snippet and the output its comment shows."""

    line: int
    source: str
    output: str


def shown_outputs(snippet: str) -> list[Shown]:
    """Every ``print(...)`` of ``snippet`` with the output shown for it, in order."""
    lines = snippet.splitlines()
    found: list[Shown] = []
    for number, line in enumerate(lines):
        code, _, comment = line.partition("#")
        if "print(" not in code:
            continue
        if not comment.strip() and number + 1 < len(lines):
            following = lines[number + 1].strip()
            if following.startswith("#"):
                comment = following[1:]
        assert comment.strip(), f"README snippet line {number + 1} prints with no output shown"
        found.append(Shown(number + 1, code.strip(), comment.strip()))
    return found


def check_printed(snippet: str, printed: str) -> None:
    expected = shown_outputs(snippet)
    got = printed.splitlines()
    assert len(got) == len(expected), f"printed {got}, README shows {[e.output for e in expected]}"
    for line, each in zip(got, expected, strict=True):
        assert shown(each.output).fullmatch(line), (
            f"README line {each.line} `{each.source}` shows {each.output!r}; it prints {line!r}"
        )


def test_the_comments_that_show_outputs_are_found() -> None:
    """The extraction itself: a same-line comment, a comment on the next line, elision."""
    snippet = "x = 1  # not a print\nprint(x)  # 1\nprint('a', x)\n# a 1\n"
    snippet += "print([x, 2])  # [1, ...]\n"
    found = [(each.line, each.output) for each in shown_outputs(snippet)]
    assert found == [(2, "1"), (3, "a 1"), (5, "[1, ...]")]
    check_printed(snippet, "1\na 1\n[1, 2]\n")
    with pytest.raises(AssertionError, match="shows '1'"):
        check_printed(snippet, "2\na 1\n[1, 2]\n")
    with pytest.raises(AssertionError, match="printed"):
        check_printed(snippet, "1\na 1\n")


async def test_the_python_client_example(tmp_path: Path) -> None:
    """ "From Python": the snippet as printed, against a real server."""
    (snippet,) = code_blocks(section("From Python"), "python")
    assert README_ADDRESS in snippet
    served: Served
    async with serving(tmp_path) as served:
        source = snippet.replace(README_ADDRESS, served.address)
        namespace: dict[str, Any] = {}
        wrapped = "async def readme_example():\n" + textwrap.indent(source, "    ")
        exec(compile(wrapped, "README.md", "exec"), namespace)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            await namespace["readme_example"]()
    check_printed(snippet, printed.getvalue())


def test_the_engine_library_example() -> None:
    """ "Using the engine as a library": the snippet as printed, and its export audits as legal."""
    (snippet,) = code_blocks(section("Using the engine as a library"), "python")
    namespace: dict[str, Any] = {}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(snippet, "README.md", "exec"), namespace)
    check_printed(snippet, printed.getvalue())
    record = namespace["record"]
    assert record["format"] == "pinochle-record/1"
    verdict = audit_record(record)
    assert verdict["legal"] is True, verdict


def transcript(block: str) -> list[tuple[str, list[str]]]:
    """``$ command`` lines (continued while a quote is open) and the output shown after each."""
    steps: list[tuple[str, list[str]]] = []
    lines = block.splitlines()
    index = 0
    while index < len(lines):
        assert lines[index].startswith("$ "), f"not a command: {lines[index]!r}"
        command = lines[index][2:]
        index += 1
        while not _complete(command):
            command += "\n" + lines[index]
            index += 1
        output: list[str] = []
        while index < len(lines) and not lines[index].startswith("$ "):
            output.append(lines[index])
            index += 1
        steps.append((command, output))
    return steps


def _complete(command: str) -> bool:
    try:
        shlex.split(command)
    except ValueError:
        return False
    return True


def run_transcript(block: str) -> None:
    """Run the commands in one bash, in the repository's root, and compare each one's output."""
    status = 0
    for command, output in transcript(block):
        if command == "echo $?":
            got = [str(status)]
        else:
            result = subprocess.run(
                ["bash", "-c", command],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert result.stderr == "", f"`{command}` wrote to standard error: {result.stderr}"
            status = result.returncode
            got = result.stdout.splitlines()
        assert got == output, f"`{command}`: README shows {output}, it prints {got}"


@pytest.mark.parametrize("title", ["Auditing a recorded game", "Asking a rules question"])
def test_the_shell_transcripts(title: str) -> None:
    blocks = code_blocks(section(title), "")
    assert blocks, f"no transcript under {title!r}"
    for block in blocks:
        run_transcript(block)
