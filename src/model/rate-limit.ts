/**
 * A queue's rate limit as a generic cell rate (GCRA): the store keeps one
 * number per queue, the theoretical arrival time `tat`, and a claim reads it,
 * grants what the limit allows and writes the new `tat` in the same atomic
 * step. A fresh queue may take `max` at once; after that messages are granted
 * one per `perMs / max`, so no window of `perMs` sees much more than `max`.
 * Stores in JavaScript call `rateGrant`; Redis's Lua mirrors it (lua/lib).
 */
import type { RateLimit } from './types.js';

export interface RateGrant {
  /** How many messages the claim may take now (0 to `want`). */
  readonly granted: number;
  /** The `tat` to store after claiming `claimed` of them: pass it to `rateCharge`. */
  readonly start: number;
  /** When nothing is granted: when the next message will be (ms since the epoch); null otherwise. */
  readonly wakeAt: number | null;
}

// Guards the floor against 0.999… from a fractional interval.
const EPSILON = 1e-9;

/** What a claim wanting `want` messages may take at `now`, given the stored `tat` (0 when none is stored). */
export function rateGrant(limit: RateLimit, tat: number, now: number, want: number): RateGrant {
  const interval = limit.perMs / limit.max;
  const start = Math.max(tat, now);
  const available = Math.floor((now + limit.perMs - start) / interval + EPSILON);
  const granted = Math.max(0, Math.min(want, available));
  return { granted, start, wakeAt: granted === 0 ? Math.ceil(start - limit.perMs + interval) : null };
}

/** The `tat` to store once `claimed` messages were taken under a grant. */
export function rateCharge(limit: RateLimit, grant: RateGrant, claimed: number): number {
  return grant.start + claimed * (limit.perMs / limit.max);
}

/**
 * A strict rate for one group (groupRateLimit): starts spaced at least `perMs / max` apart, no burst, so no
 * window of `perMs` ever holds more than `max` of them. `tat` is the earliest time the next may start (0 when
 * none is stored); returns whether one may start at `now`, and the `tat` to store (or when to look again).
 */
export function spacedGrant(limit: RateLimit, tat: number, now: number): { granted: boolean; tat: number } {
  if (tat > now + EPSILON) return { granted: false, tat };
  return { granted: true, tat: Math.max(tat, now) + limit.perMs / limit.max };
}
