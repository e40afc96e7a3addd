"""The canonical log line: one structlog line per RPC saying what the call did.

The interceptor opens a line when a call starts and writes it when the call ends; servicers and
the game manager add fields to it with :func:`annotate` (game, seat, action, outcome, code,
version, request id). The fields live in one dict held by one ``ContextVar``: gRPC runs every
call in its own task, so calls never see each other's fields. Why not structlog's bound context
variables: binding and clearing them cost about 20 us per call (a ``ContextVar.set`` per key,
measured with cProfile on SubmitAction's path, 2026-12-01), a tenth of the call's own work.
"""

from __future__ import annotations

from contextvars import ContextVar, Token

_FIELDS: ContextVar[dict[str, object] | None] = ContextVar("referee_log_line", default=None)


def begin(**fields: object) -> Token[dict[str, object] | None]:
    """Open the current call's line with ``fields``."""
    return _FIELDS.set(dict(fields))


# A field quoted from a request (a game id, a request id) is cut to this many characters: a
# request may be up to a mebibyte, and its garbage should not flood the log.
MAX_FIELD = 200


def annotate(**fields: object) -> None:
    """Add fields to the current call's line; empty strings and None are left out, long
    strings cut to MAX_FIELD characters.

    Outside a call (no line open) this does nothing.
    """
    line = _FIELDS.get()
    if line is None:
        return
    for key, value in fields.items():
        if value is None or value == "":
            continue
        if isinstance(value, str) and len(value) > MAX_FIELD:
            line[key] = f"{value[:MAX_FIELD]}... ({len(value)} characters)"
        else:
            line[key] = value


def current() -> dict[str, object]:
    """The fields gathered so far (a copy; empty outside a call)."""
    line = _FIELDS.get()
    return dict(line) if line is not None else {}


def opened() -> dict[str, object] | None:
    """The current call's line itself (not a copy), for ``end`` to be given: see there."""
    return _FIELDS.get()


def end(
    token: Token[dict[str, object] | None], line: dict[str, object] | None = None
) -> dict[str, object]:
    """Close the line opened with ``token`` and return its fields.

    A stream handler passes its ``line`` (``opened()`` after ``begin``): when its client goes
    away while the handler waits at a ``yield``, gRPC lets the async generator go and asyncio
    closes it in a task of its own, in another context, where the current line is another
    call's (or none) and the token cannot be reset; the context it was set in has ended with
    the call's task, so there is nothing to restore.
    """
    if line is None:
        line = _FIELDS.get()
    try:  # noqa: SIM105 - every call ends here: no context manager on the hot path
        _FIELDS.reset(token)
    except ValueError:  # closed from another context (see above)
        pass
    return line if line is not None else {}
