/** `kvmq show` prints what a message's handlers reported: the latest progress and the log. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connect } from '../src/index.js';
import { waitForStatus } from './support/jobs.js';
import { expectExit, newStore } from './support/cli.js';

test('kvmq show prints progress and log, and --json carries them', async () => {
  const store = newStore();
  const client = await connect(store, { maintenance: false });
  try {
    const worker = client.worker('jobs', (job) => {
      job.progress({ done: 3, of: 3 });
      job.log('first line');
      job.log('second line');
    });
    await client.enqueue('jobs', 'x', { id: 'm' });
    await waitForStatus(client, 'jobs', 'm', 'done-awaiting-gc');
    await worker.stop();
  } finally {
    await client.close();
  }
  const shown = await expectExit(0, ['show', 'jobs', 'm'], { store });
  assert.match(shown.stdout, /^progress +\{"done":3,"of":3\}$/m);
  assert.match(shown.stdout, /^log\n {2}first line\n {2}second line$/m);
  const json = JSON.parse((await expectExit(0, ['show', 'jobs', 'm', '--json'], { store })).stdout) as {
    progress: unknown;
    log: string[];
    logDropped: number;
  };
  assert.deepEqual([json.progress, json.log, json.logDropped], [{ done: 3, of: 3 }, ['first line', 'second line'], 0]);
});
