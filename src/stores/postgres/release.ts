/**
 * Instant release: every consumer's process holds a session advisory lock (space, key) while it lives
 * (session.ts); PostgreSQL frees it when that session ends, a crash included. A claim ends the locks of
 * messages held by a registered consumer whose advisory lock is free, in its own transaction, so they are
 * taken (as lost deliveries) at once instead of when their locks would have run out. A consumer registered
 * with key 0 holds no lock (it runs behind a transaction pooler, polling-session.ts): its messages are left
 * to their locks.
 */
import type { WriteContext } from './tx.js';

/** Returns how many messages it released. */
export async function releaseDeadHolders(tx: WriteContext, lockSpace: number): Promise<number> {
  const { db, s, queue, now } = tx;
  // The dead consumers first (usually none, and then no message is read), then theirs among the locked.
  const released = await db.query(
    `WITH dead AS MATERIALIZED (
       SELECT c.id FROM ${s}.consumers c
       WHERE c.queue = $1 AND c.lock_key <> 0
         AND NOT EXISTS (
           SELECT 1 FROM pg_locks l
           WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
             AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
             AND l.classid = $3::bigint::oid AND l.objid = c.lock_key::bigint::oid))
     UPDATE ${s}.messages m SET lock_until = 0 FROM dead d
     WHERE m.queue = $1 AND m.phase = 1 AND m.lock_until > $2 AND m.consumer = d.id`,
    [queue, now, lockSpace],
  );
  return released.rowCount ?? 0;
}
