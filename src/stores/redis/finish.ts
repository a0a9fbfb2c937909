import { errorTail } from '../../model/history.js';
import { resultEventText } from '../../model/events.js';
import { encodeContent, isOk, list, text } from './codec.js';
import { SCRIPTS } from './scripts.generated.js';
import type { ScriptArg, Scripts } from './scripts.js';
import type { Finish, FinishResult, HeldAttempt } from '../contract/contract.js';

/** Records outcomes with one script call; each result says whether the consumer still held its message. */
export async function finishMessages(
  scripts: Scripts,
  queue: string,
  consumerId: string,
  finishes: readonly Finish[],
): Promise<FinishResult[]> {
  if (finishes.length === 0) return [];
  // Plain successes (no backoff, no error) first, as id and attempt only; the others after, with every field.
  const order: number[] = [];
  const others: number[] = [];
  const args: ScriptArg[] = [consumerId, 0];
  for (let i = 0; i < finishes.length; i++) {
    const f = finishes[i] as Finish;
    if (isPlainSuccess(f)) {
      order.push(i);
      args.push(f.id, f.attempt);
    } else {
      others.push(i);
    }
  }
  args[1] = order.length;
  for (const i of others) {
    const f = finishes[i] as Finish;
    order.push(i);
    // The history keeps the error cut (errorTail); sent only when it differs from the error.
    const tail = errorTail(f.error);
    args.push(
      f.id,
      f.attempt,
      f.outcome,
      f.backoffMs,
      f.error === null ? '-' : `+${f.error}`,
      f.startedAt ?? '',
      tail === f.error ? '' : `+${tail}`,
      f.result === undefined ? '' : encodeContent(f.result.bytes, f.result.encoding),
      // A JSON result's event text is its content without the tag: the script cuts it there.
      f.result?.encoding === 'bytes' ? resultEventText(f.result) : '',
    );
  }
  const replies = list(await scripts.run(SCRIPTS.finish, queue, args));
  const results = new Array<FinishResult>(finishes.length);
  for (let k = 0; k < order.length; k++) results[order[k] as number] = isOk(replies[k]) ? 'ok' : 'lost';
  return results;
}

function isPlainSuccess(f: Finish): boolean {
  return f.outcome === 'success' && f.backoffMs === 0 && f.error === null && f.result === undefined;
}

/** Renews locks with one script call; returns the ids no longer held. */
export async function extendLocks(
  scripts: Scripts,
  queue: string,
  consumerId: string,
  held: readonly HeldAttempt[],
  lockMs: number,
): Promise<string[]> {
  if (held.length === 0) return [];
  const args: ScriptArg[] = [consumerId, lockMs];
  for (const { id, attempt } of held) args.push(id, attempt);
  const lost = list(await scripts.run(SCRIPTS.extend, queue, args));
  return lost.map((id) => text(id) ?? '');
}
