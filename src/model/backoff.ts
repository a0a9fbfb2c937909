export interface ExpBackoffOptions {
  /** @defaultValue 0 */
  readonly min?: number;
  /** @defaultValue Infinity */
  readonly max?: number;
  /** Milliseconds per unit. @defaultValue 1000 */
  readonly factor?: number;
}

/**
 * Binary exponential backoff with jitter: a random value in
 * [2^n / 2, 2^n) × factor ms, clamped to [min, max]. n is capped at 36.
 * With the default factor, n = 0..4 gives 0.5–1, 1–2, 2–4, 4–8 and 8–16 s.
 */
export function expBackoff(n: number, options: ExpBackoffOptions = {}): number {
  const { min = 0, max = Infinity, factor = 1000 } = options;
  const exp = 2 ** Math.min(36, Math.max(0, Math.floor(n)));
  const ms = Math.floor((exp + Math.random() * exp) * 0.5 * factor);
  return Math.min(max, Math.max(min, ms));
}
