"""Settings every test module shares.

Hypothesis: no per-example deadline. The properties check behaviour, not speed (speed is
measured in ``bench/``), and on a loaded two-core CI machine a 200 ms deadline fails an example
for a garbage-collection pause, not for a bug. A failure prints the blob that reproduces it.
"""

from hypothesis import settings

settings.register_profile("referee", deadline=None, print_blob=True)
settings.load_profile("referee")
