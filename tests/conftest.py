"""Settings and fixtures every test module shares.

Hypothesis: no per-example deadline. The properties check behaviour, not speed (speed is
measured in ``bench/``), and on a loaded two-core CI machine a 200 ms deadline fails an example
for a garbage-collection pause, not for a bug. A failure prints the blob that reproduces it.
"""

from collections.abc import Iterator

import pytest
import structlog
from hypothesis import settings

from referee.service.observability import configure_logging
from tests.service_helpers import quiet_logs

settings.register_profile("referee", deadline=None, print_blob=True)
settings.load_profile("referee")


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
