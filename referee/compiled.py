"""Whether the compiled rules core is older than its source, in a source checkout.

Why: ``make install`` compiles ``referee/rules`` and ``referee/engine`` in place with mypyc
(``setup.py``), and Python imports a module's ``.so`` before its ``.py``. A source edited since
the last build would run as it was compiled, not as it reads: the tests and every command would
check and serve the old rules without a word. So ``tests/conftest.py`` and the command line
refuse to start on a stale build and say how to rebuild it.

Only a source checkout (a ``setup.py`` beside the package) is checked: the times of an installed
wheel's files are those of its installation, in whatever order the installer wrote them, and an
installed wheel is not edited in place.
"""

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def stale_compiled_modules(package: Path = PACKAGE) -> list[str]:
    """The package's compiled sources (an ``X.py`` beside an ``X.cpython-*.so``) edited after
    the last build. The code of all of them is in one shared library, rebuilt by every build,
    while a module's own ``.so`` is a small stub that a build leaves as it was: so a source is
    compared with the newest ``.so`` of the package."""
    compiled = sorted(package.rglob("*.so"))
    if not compiled:
        return []
    built = max(path.stat().st_mtime for path in compiled)
    sources = (path.with_name(path.name.split(".", 1)[0] + ".py") for path in compiled)
    return [
        str(source.relative_to(package.parent))
        for source in sources
        if source.is_file() and source.stat().st_mtime > built
    ]


def stale_build_problem(package: Path = PACKAGE) -> str | None:
    """Why the code of this source checkout must not run as it is built, or None when it may
    (a fresh build, a pure-Python one, or an installed package)."""
    if not (package.parent / "setup.py").is_file():
        return None
    stale = stale_compiled_modules(package)
    if not stale:
        return None
    return (
        f"{', '.join(stale)} changed after it was compiled: run `make install` to compile the "
        "rules core again, or `PINOCHLE_REFEREE_PURE=1 make install` for pure Python"
    )
