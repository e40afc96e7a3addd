"""Pinochle referee: a pure rules core, a game engine, audits and rules queries."""
