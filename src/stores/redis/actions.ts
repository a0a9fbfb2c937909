/** retry, retryFailed, remove, promote, cancel and update: one script call each, each id changed atomically. */
import { encodeContent, list, num, text } from './codec.js';
import type { MessageEdit } from '../../model/update.js';
import { SCRIPTS } from './scripts.generated.js';
import type { LuaScript } from './scripts.generated.js';
import type { ScriptArg, Scripts } from './scripts.js';
import type { ActionResult, MessageState } from '../../model/types.js';

/** Runs an action script on ids; its reply per id is 'ok' or the state that refused it ('' unknown). */
export async function act(
  scripts: Scripts,
  script: LuaScript,
  queue: string,
  ids: readonly string[],
  after: MessageState | null,
  lead: readonly ScriptArg[] = [],
): Promise<ActionResult[]> {
  if (ids.length === 0) return [];
  const replies = list(await scripts.run(script, queue, [...lead, ...ids]));
  return ids.map((id, i): ActionResult => {
    const reply = text(replies[i]) ?? '';
    if (reply === 'ok') return { ok: true, id, state: after };
    return { ok: false, id, state: reply === '' ? null : (reply as MessageState) };
  });
}

export const retryMessages = (scripts: Scripts, queue: string, ids: readonly string[]): Promise<ActionResult[]> =>
  act(scripts, SCRIPTS.retry, queue, ids, 'queued', ['ids']);

export async function retryOldestFailed(scripts: Scripts, queue: string, max: number): Promise<number> {
  if (max <= 0) return 0;
  return num(await scripts.run(SCRIPTS.retry, queue, ['oldest', max]));
}

export const removeMessages = (scripts: Scripts, queue: string, ids: readonly string[]): Promise<ActionResult[]> =>
  act(scripts, SCRIPTS.remove, queue, ids, null);

export const promoteMessages = (scripts: Scripts, queue: string, ids: readonly string[]): Promise<ActionResult[]> =>
  act(scripts, SCRIPTS.promoteNow, queue, ids, 'queued');

/** Cancels a waiting, delayed or running message (cancel.lua); its holder hears of it on the wake channel. */
export async function cancelMessage(scripts: Scripts, queue: string, id: string, error: string): Promise<ActionResult> {
  const [reply, , moved] = list(await scripts.run(SCRIPTS.cancel, queue, [id, error])).map((r) => text(r) ?? '');
  if (reply === 'ok') return { ok: true, id, state: moved === '1' ? null : 'failed' };
  return { ok: false, id, state: reply === '' || reply === undefined ? null : (reply as MessageState) };
}

/** Changes a waiting message (update.lua): one script, so a claim comes wholly before or after it. */
export async function updateMessage(
  scripts: Scripts,
  queue: string,
  id: string,
  edit: MessageEdit,
): Promise<ActionResult> {
  const which = [
    edit.payload === null ? '' : 'c',
    edit.priority === null ? '' : 'p',
    edit.filters === null ? '' : 'f',
    edit.delayMs === null ? '' : 'd',
  ].join('');
  const args: ScriptArg[] = [
    id,
    which,
    edit.payload === null ? '' : encodeContent(edit.payload.bytes, edit.payload.encoding),
    edit.priority ?? 0,
    edit.filters?.filterClass ?? '',
    edit.delayMs ?? 0,
  ];
  const [reply, after] = list(await scripts.run(SCRIPTS.update, queue, args)).map((r) => text(r) ?? '');
  if (reply === 'ok') return { ok: true, id, state: after as MessageState };
  return { ok: false, id, state: reply === '' || reply === undefined ? null : (reply as MessageState) };
}
