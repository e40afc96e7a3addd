"""Game engine: immutable state, one validating apply(), legal actions and views."""
