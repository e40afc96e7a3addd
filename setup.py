"""Compiles the pure rules core to C extension modules with mypyc; everything else is in
``pyproject.toml``.

Why: the core (``referee/rules`` and ``referee/engine``) is the hot path of every action, every
audited record and every rules query, and it is already strict-mypy-typed Python. mypyc turns
that same source into C extensions (about twice the card plays per second, see the README's
"Benchmarks"), so there stays one source of the rules and no second language to keep in step.
``pip install`` (and so ``make install`` and the container build) compiles it; the ``.py``
files stay beside the ``.so`` files and Python's import system prefers the compiled ones.

``PINOCHLE_REFEREE_PURE=1`` skips the compilation (a machine without a C compiler): the same
modules then run as plain Python and behave the same, only slower. ``options.py`` is not
compiled: it runs once per game and subclasses ``dict`` and ``list``, which mypyc cannot
compile as native classes.
"""

import os

from setuptools import setup

NATIVE_MODULES = [
    "referee/rules/cards.py",
    "referee/rules/dealing.py",
    "referee/rules/frozen.py",
    "referee/rules/melds.py",
    "referee/rules/scoring.py",
    "referee/rules/tricks.py",
    "referee/engine/actions.py",
    "referee/engine/engine.py",
    "referee/engine/errors.py",
    "referee/engine/events.py",
    "referee/engine/game.py",
    "referee/engine/state.py",
    "referee/engine/two_handed.py",
    "referee/engine/views.py",
]

if os.environ.get("PINOCHLE_REFEREE_PURE", "") == "1":
    setup()
else:
    from mypyc.build import mypycify

    # One shared library inside the package (not at the top level of site-packages) for the
    # compiled modules' common runtime.
    setup(ext_modules=mypycify(NATIVE_MODULES, group_name="referee._native", opt_level="3"))
