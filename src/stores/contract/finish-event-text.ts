/** What a finish's queue event keeps in its slot, the same on every store. */
import { resultEventText } from '../../model/events.js';
import type { Finish } from './contract.js';

/** A success's result (none without one: a success's error text is not its event's), else the error. */
export function finishEventText(f: Finish): string | null {
  if (f.outcome !== 'success') return f.error;
  return f.result === undefined ? null : resultEventText(f.result);
}
