"""Durable game storage behind one small interface (``base.GameStore``)."""
