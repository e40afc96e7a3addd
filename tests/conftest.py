"""Settings and fixtures every test module shares.

Hypothesis: no per-example deadline. The properties check behaviour, not speed (speed is
measured in ``bench/``), and on a loaded two-core CI machine a 200 ms deadline fails an example
for a garbage-collection pause, not for a bug. A failure prints the blob that reproduces it.

Ctrl-C: a suite started as a shell's background job (``make test &`` in a script, some CI
runners) inherits SIGINT ignored, and so would every process the tests start, so the tests
that press Ctrl-C on a command (``audit``, ``serve``, a rules query) would wait for an exit that
never comes. Ctrl-C reaches a command in a terminal, which is what they check: SIGINT gets
Python's usual handler back here, and the commands the tests start get the default.

Compiled core: ``make install`` compiles ``referee/rules`` and ``referee/engine`` in place with
mypyc (``setup.py``), and Python imports a ``.so`` before its ``.py``. A source edited since its
module was compiled would be tested as it was, not as it is, so the run stops at once and says
to run ``make install`` (which ``make test`` does): ``referee/compiled.py``, which the command
line checks too.
"""

import signal
from collections.abc import Iterator

import pytest
import structlog
from hypothesis import settings

from referee.compiled import stale_build_problem
from referee.service.observability import configure_logging
from tests.service_helpers import quiet_logs

settings.register_profile("referee", deadline=None, print_blob=True)
settings.load_profile("referee")


def pytest_sessionstart(session: pytest.Session) -> None:
    if problem := stale_build_problem():
        pytest.exit(problem, returncode=4)


if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def json_logs() -> Iterator[None]:
    """The server's production logging (JSON lines on stderr) for one test."""
    configure_logging("json")
    try:
        yield
    finally:
        structlog.reset_defaults()
        quiet_logs()


@pytest.fixture
def restored_logging() -> Iterator[None]:
    """Let a test reconfigure structlog (the demo quiets it for the whole process, the logging
    tests set their own); the configuration before it is put back afterwards."""
    saved = structlog.get_config()
    saved["processors"] = list(saved["processors"])
    try:
        yield
    finally:
        structlog.reset_defaults()
        structlog.configure(**saved)
