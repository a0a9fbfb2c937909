/**
 * The ranges of the pending index: one per (filter class, priority) holding pending messages, found by one
 * index seek each (a loose index scan), never a walk of the backlog. Reads ordered by ready time (the next
 * backoff end, counts of backoffs, listings) read each range and merge, as the index leads with the class
 * and the priority.
 */

/**
 * A `WITH RECURSIVE ranges(filters, priority)` prefix over the classes in `classes` (a text[] parameter, $2
 * unless named) of the queue in $1; the statement that follows reads `ranges`.
 */
export function pendingRanges(s: string, classes = '$2'): string {
  const next = (after: string, filters: string): string =>
    `(SELECT m.priority FROM ${s}.messages m WHERE m.queue = $1 AND m.filters = ${filters} AND m.phase = 0
       AND m.priority > ${after} ORDER BY m.priority LIMIT 1)`;
  return `WITH RECURSIVE walk(filters, priority) AS (
      SELECT f.filters, ${next('-1', 'f.filters')} FROM unnest(${classes}::text[]) AS f(filters)
      UNION ALL
      SELECT w.filters, ${next('w.priority', 'w.filters')} FROM walk w WHERE w.priority IS NOT NULL),
    ranges AS (SELECT filters, priority FROM walk WHERE priority IS NOT NULL)`;
}

/**
 * For the queue in $1, after `now`: `ready`, when the first pending message of `classes` becomes ready (a
 * backoff or delay ends), and `lock`, when the first held lock ends. One index seek per class and priority.
 */
export function nextTimesSql(s: string, classes: string, now: string): string {
  return `${pendingRanges(s, classes)}
    SELECT (SELECT min((SELECT m.ready_at FROM ${s}.messages m
              WHERE m.queue = $1 AND m.filters = r.filters AND m.phase = 0 AND m.priority = r.priority
                AND m.ready_at > ${now} ORDER BY m.ready_at LIMIT 1))
            FROM ranges r) AS ready,
      (SELECT min(m.lock_until) FROM ${s}.messages m WHERE m.queue = $1 AND m.phase = 1 AND m.lock_until > ${now})
        AS lock`;
}
