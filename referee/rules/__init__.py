"""Pure rules: cards, tricks, melds, scoring and variants. No I/O, clock or logging here."""
