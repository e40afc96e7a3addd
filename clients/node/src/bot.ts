// Simple legal bots, as in referee/demo.py: ask ListLegalActions, pick an entry, turn a
// descriptor into a concrete action. They bid rarely and never concede.

import { isDrawnCardLead, type Action, type Card, type LegalEntry } from "./client";

/** A small seeded PRNG (mulberry32 over a string hash): same seed, same game. */
export class Rng {
  private state: number;

  constructor(seed: string) {
    let hash = 2166136261;
    for (let i = 0; i < seed.length; i++) {
      hash ^= seed.charCodeAt(i);
      hash = Math.imul(hash, 16777619);
    }
    this.state = hash >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  choice<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError("choice from an empty list");
    return items[Math.floor(this.next() * items.length)] as T;
  }

  sample<T>(items: readonly T[], count: number): T[] {
    const pool = [...items];
    const out: T[] = [];
    for (let i = 0; i < count && pool.length > 0; i++) {
      out.push(...pool.splice(Math.floor(this.next() * pool.length), 1));
    }
    return out;
  }
}

/** The entries a bot can turn into an action: all but the two-handed lead of the card about to
 * be drawn (`{"type": "play", "drawn_card": true}`), which names no card (RULES.md A.8 item 2);
 * a bot leads a card it holds instead. */
export function playable(entries: readonly LegalEntry[]): LegalEntry[] {
  return entries.filter((entry) => !isDrawnCardLead(entry));
}

/** Which entry to take (of the `playable` ones): pass 3 times in 4 when bidding is open, meld
 * when possible. */
export function pick(offered: readonly LegalEntry[], rng: Rng): LegalEntry {
  const entries = playable(offered);
  const kinds = new Set(entries.map((e) => e.type));
  if (kinds.has("bid") && kinds.has("pass") && rng.next() < 0.75) {
    const pass = entries.find((e) => e.type === "pass");
    if (pass) return pass;
  }
  let candidates = entries;
  if (candidates.length > 1) candidates = candidates.filter((e) => e.type !== "concede");
  const melds = candidates.filter((e) => e.type === "meld" || e.type === "exchange_dix");
  if (melds.length > 0 && rng.next() < 0.8) return rng.choice(melds);
  return rng.choice(candidates);
}

/** A concrete action for an entry: the lowest bid, random cards, the whole hand as meld. The
 * drawn-card lead names no card: it throws a TypeError (filter entries with `playable`). */
export function choose(entry: LegalEntry, rng: Rng): Action {
  switch (entry.type) {
    case "bid":
      return { type: "bid", amount: entry.min };
    case "pass_cards":
    case "discard":
      return { type: entry.type, cards: rng.sample<Card>(entry.from, entry.count) };
    case "meld":
      if ("from" in entry) return { type: "meld", cards: [...entry.from] };
      return { type: "meld", name: entry.name, cards: [...entry.cards], points: entry.points };
    case "play":
      if (isDrawnCardLead(entry)) {
        throw new TypeError("the drawn-card lead names no card: filter entries with playable()");
      }
      return { ...entry };
    default:
      return { ...entry };
  }
}
