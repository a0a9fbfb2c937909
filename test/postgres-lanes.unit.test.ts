/**
 * ConsumerLanes (the PostgreSQL store's order of a consumer's work): a claim goes after every finish made before
 * it, with those still waiting; finishes made while a claim is at the server go at once beside it, and the next
 * claim waits for them; one claim and one turn of finishes alone at a time; a claim waits for a committing
 * handler transaction, finishes do not.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setImmediate as tick } from 'node:timers/promises';
import { ConsumerLanes } from '../src/stores/postgres/lanes.js';
import type { ClaimRequest, ClaimResult, Finish, FinishResult } from '../src/stores/contract/contract.js';

interface Turn {
  readonly finishes: string[];
  readonly claim: number | null;
  readonly answer: () => void;
}

/** Lanes whose runner records each turn and answers it only when the test says so. */
/** A turn as the server has it: its finishes' ids and its claim's size (null: finishes alone). */
type AtServer = [string[], number | null];

function scripted(): { lanes: ConsumerLanes; turns: Turn[]; open: () => Turn[]; atServer: () => AtServer[] } {
  const turns: Turn[] = [];
  const answered = new Set<Turn>();
  const lanes = new ConsumerLanes((_queue, _consumer, finishes, claim) => {
    return new Promise<{ results: FinishResult[]; claimed: ClaimResult | null }>((resolve) => {
      const turn: Turn = {
        finishes: finishes.map((f) => f.id),
        claim: claim?.max ?? null,
        answer: () => {
          answered.add(turn);
          resolve({
            results: finishes.map((): FinishResult => 'ok'),
            claimed: claim === null ? null : { messages: [], queueSize: 0, dryRuns: 0, wakeAt: null },
          });
        },
      };
      turns.push(turn);
    });
  });
  const open = (): Turn[] => turns.filter((t) => !answered.has(t));
  return { lanes, turns, open, atServer: () => open().map((t): AtServer => [t.finishes, t.claim]) };
}

const finish = (id: string): Finish => ({
  id,
  attempt: 1,
  outcome: 'success',
  backoffMs: 0,
  error: null,
  startedAt: null,
});
const claim = (max: number): ClaimRequest => ({
  consumerId: 'c',
  max,
  lockMs: 30_000,
  accepts: null,
  eoqBackoffMs: () => 0,
});

/** Lets the lanes look at their work (they start it on the next turn of the event loop). */
async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) await tick();
}

test('a claim takes the finishes waiting with it, in one turn', async () => {
  const { lanes, turns, atServer } = scripted();
  const done = lanes.finish('q', 'c', [finish('a'), finish('b')]);
  const claimed = lanes.claim('q', 'c', claim(8));
  await settle();
  assert.deepEqual(atServer(), [[['a', 'b'], 8]]);
  turns[0]?.answer();
  assert.deepEqual(await done, ['ok', 'ok']);
  assert.equal((await claimed).messages.length, 0);
});

test('finishes made while a claim is at the server go at once; the next claim waits for them', async () => {
  const { lanes, turns, atServer } = scripted();
  const first = lanes.claim('q', 'c', claim(64));
  await settle();
  // The worker claims ahead, then its handlers finish: both while the first claim is out.
  const second = lanes.claim('q', 'c', claim(64));
  const finished = lanes.finish('q', 'c', [finish('a')]);
  await settle();
  assert.deepEqual(
    atServer(),
    [
      [[], 64],
      [['a'], null],
    ],
    'the finish goes beside the claim at the server; the second claim waits',
  );
  // More finishes wait for the turn of finishes at the server: one such turn at a time.
  const later = lanes.finish('q', 'c', [finish('b')]);
  turns[0]?.answer();
  await first;
  await settle();
  assert.equal(turns.length, 2, 'the second claim waits for the finish sent before it');
  turns[1]?.answer();
  assert.deepEqual(await finished, ['ok']);
  await settle();
  assert.deepEqual(atServer(), [[['b'], 64]], 'then it goes, with the finish that waited');
  turns[2]?.answer();
  await Promise.all([second, later]);
});

test('a claim waits for a committing handler transaction; finishes do not', async () => {
  const { lanes, open, atServer } = scripted();
  let commit = (): void => undefined;
  lanes.committing('q', 'c', new Promise<void>((resolve) => (commit = resolve)));
  const claimed = lanes.claim('q', 'c', claim(4));
  const finished = lanes.finish('q', 'c', [finish('a')]);
  await settle();
  assert.deepEqual(atServer(), [[['a'], null]]);
  open()[0]?.answer();
  await finished;
  await settle();
  assert.equal(open().length, 0, 'the claim still waits for the commit');
  commit();
  await settle();
  assert.deepEqual(atServer(), [[[], 4]]);
  open()[0]?.answer();
  await claimed;
});

test('a turn that fails rejects the work it carried, and the lane goes on', async () => {
  let calls = 0;
  const lanes = new ConsumerLanes((_queue, _consumer, finishes, request) => {
    calls += 1;
    if (calls === 1) return Promise.reject(new Error('connection lost'));
    return Promise.resolve({
      results: finishes.map((): FinishResult => 'ok'),
      claimed: request === null ? null : { messages: [], queueSize: 0, dryRuns: 0, wakeAt: null },
    });
  });
  const failed = lanes.finish('q', 'c', [finish('a')]);
  const claimed = lanes.claim('q', 'c', claim(1));
  await assert.rejects(failed, /connection lost/);
  await assert.rejects(claimed, /connection lost/);
  assert.deepEqual(await lanes.finish('q', 'c', [finish('b')]), ['ok']);
});
