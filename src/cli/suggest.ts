/** "Did you mean ...?": the nearest known word to a mistyped one, by edit distance. */

/** Edits (insert, delete, substitute, swap of neighbours) that turn `a` into `b`. */
export function editDistance(a: string, b: string): number {
  const rows: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  const at = (i: number, j: number): number => rows[i]?.[j] ?? Infinity;
  for (let i = 1; i <= a.length; i += 1) {
    const row = rows[i] ?? [];
    for (let j = 1; j <= b.length; j += 1) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, at(i - 2, j - 2) + 1);
      row[j] = best;
    }
  }
  return at(a.length, b.length);
}

/**
 * The known word nearest to `word`, when it is near enough to be a typo: a third of its length in edits
 * (at least one, at most three), compared without case. Ties go to the first in `known`.
 */
export function nearest(word: string, known: readonly string[]): string | undefined {
  const lower = word.toLowerCase();
  const allowed = Math.min(3, Math.max(1, Math.floor(lower.length / 3)));
  let best: string | undefined;
  let bestDistance = allowed + 1;
  for (const candidate of known) {
    const distance = editDistance(lower, candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

/** `" (did you mean 'x'?)"`, or nothing when no known word is near. */
export function didYouMean(word: string, known: readonly string[]): string {
  const match = nearest(word, known);
  return match === undefined || match === word ? '' : ` (did you mean '${match}'?)`;
}
