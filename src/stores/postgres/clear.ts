/**
 * clear(queues): every message and event of the queues deleted in one transaction, their counters taken down by
 * what went (the filter classes stay, as the configuration does). A flow's child among them that still owes its
 * parent a count ends for it first, as a removal does (flows.ts clearedChildrenEnd), so a parent in a queue not
 * cleared is queued or failed instead of waiting forever.
 */
import { emptyEvents } from './events.js';
import { clearedChildrenEnd } from './flows.js';
import { ensureQueueRow, type ConfigCache } from './queue-row.js';
import { quoteIdent } from './sql-text.js';
import { writeContext } from './tx.js';
import type { Queryable } from './queryable.js';

/** Passes of ends and deletes a clear makes while flows keep arriving in its queues. */
const CLEAR_PASSES = 10;

/**
 * In the caller's transaction. The children owing their parents are ended first, and the deletes take only
 * messages that owe nothing: a flow's child committed after the ends (each statement sees what committed before
 * it) stays rather than go uncounted, and the next pass ends and deletes it. The counters lose what the deletes
 * took, as GC's do, and the filter classes stay: a message committed after a delete keeps its count and the
 * class its claims look in (their rows deleted too, it was counted low and claimed by no one).
 */
export async function clearQueues(
  db: Queryable,
  schema: string,
  queues: readonly string[],
  configs: ConfigCache,
): Promise<void> {
  const s = quoteIdent(schema);
  const [first] = queues;
  if (first === undefined) return;
  for (let pass = 0; pass < CLEAR_PASSES; pass++) {
    const owed = await endOwingChildren(db, schema, first, queues, configs);
    if (pass > 0 && !owed) break;
    for (const queue of queues) {
      await db.query(
        `WITH gone AS (DELETE FROM ${s}.messages WHERE queue = $1 AND parent_wait = 0 RETURNING phase),
           n AS (SELECT count(*) FILTER (WHERE phase IN (0, 1)) AS size, count(*) FILTER (WHERE phase = 2) AS done,
             count(*) FILTER (WHERE phase = 3) AS failed FROM gone)
         SELECT ${s}.add_counts($1, -n.size, -n.done, -n.failed) FROM n WHERE n.size + n.done + n.failed > 0`,
        [queue],
      );
    }
  }
  for (const queue of queues) {
    await db.query(`UPDATE ${s}.queues SET dry_runs = 0, eoq_until = 0, rate_tat = 0 WHERE queue = $1`, [queue]);
    await emptyEvents(db, s, queue);
  }
}

/** Ends, as removals, the children in `queues` still owing their parents a count; whether there were any. */
async function endOwingChildren(
  db: Queryable,
  schema: string,
  first: string,
  queues: readonly string[],
  configs: ConfigCache,
): Promise<boolean> {
  const s = quoteIdent(schema);
  const owing = await db.query(
    `SELECT 1 FROM ${s}.messages WHERE queue = ANY($1::text[]) AND parent_wait = 1 LIMIT 1`,
    [queues],
  );
  if (owing.rows.length === 0) return false;
  const { tx, finish } = writeContext(db, schema, first, await ensureQueueRow(db, s, first), configs);
  await clearedChildrenEnd(tx, queues);
  // What the ends wrote to the cleared queues' counters and events goes with them below.
  await finish();
  return true;
}
