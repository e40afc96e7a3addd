"""The ``pinochle-referee`` command line: ``audit`` and ``query`` (GAME_RECORD.md §2-§3).

Output is JSON Lines on standard output so other tools can read it; progress and human messages
go to standard error. Bad input never produces a traceback: it becomes an ``error`` line.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from referee.audit import audit_text, verdict_exit_status

# Below this many files a process pool costs more than it saves.
_MIN_FILES_PER_JOB = 8


def _audit_file(path: str, keep_going: bool) -> dict[str, object]:
    if path == "-":
        return audit_text(sys.stdin.read(), "-", keep_going)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        return {"record": path, "error": f"cannot read the file: {error}"}
    return audit_text(text, path, keep_going)


def _audit_job(args: tuple[str, bool]) -> dict[str, object]:
    return _audit_file(*args)


def _verdicts(paths: Sequence[str], keep_going: bool, jobs: int) -> Iterator[dict[str, object]]:
    if jobs > 1 and len(paths) >= _MIN_FILES_PER_JOB and "-" not in paths:
        chunk = max(1, len(paths) // (jobs * 8))
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            yield from pool.map(_audit_job, [(p, keep_going) for p in paths], chunksize=chunk)
    else:
        for path in paths:
            yield _audit_file(path, keep_going)


def _run_audit(paths: Sequence[str], keep_going: bool, jobs: int) -> int:
    status = 0
    verdicts = _verdicts(paths, keep_going, jobs)
    show_progress = len(paths) > 1 and sys.stderr.isatty()
    if show_progress:
        from rich.progress import Progress  # noqa: PLC0415 - only on a terminal

        with Progress(transient=True) as progress:
            task = progress.add_task("auditing", total=len(paths))
            for verdict in verdicts:
                print(json.dumps(verdict), flush=False)
                status = max(status, verdict_exit_status(verdict))
                progress.advance(task)
    else:
        for verdict in verdicts:
            print(json.dumps(verdict))
            status = max(status, verdict_exit_status(verdict))
    sys.stdout.flush()
    return status


def _run_query() -> int:
    from referee.query import run_queries  # noqa: PLC0415 - audit runs need none of it

    for line in run_queries(sys.stdin):
        print(line)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pinochle-referee",
        description="Pinochle rules referee: audit records, answer rules queries.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    audit = commands.add_parser("audit", help="audit recorded games (pinochle-record/1)")
    audit.add_argument("files", nargs="+", help="record files, or - for one record on stdin")
    audit.add_argument(
        "--keep-going", action="store_true", help="report every illegal action, skipping each"
    )
    audit.add_argument("--jobs", type=int, default=1, help="processes for large batches")
    commands.add_parser("query", help="answer rules queries: JSON lines on stdin")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "audit":
        if args.jobs < 1:
            print("pinochle-referee: --jobs must be at least 1", file=sys.stderr)
            return 2
        return _run_audit(args.files, args.keep_going, args.jobs)
    return _run_query()


if __name__ == "__main__":
    sys.exit(main())
