/**
 * Input the CLI reads from stdin or a file is read to a bound: a stream without end (/dev/zero) or a document far
 * over any limit stops with one line and exit 1, nothing written, instead of filling memory.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { expectExit, newStore } from './support/cli.js';
import { connect } from '../src/index.js';

const ENDLESS = '/dev/zero';

async function total(store: string, queue: string): Promise<number> {
  const client = await connect(store);
  try {
    return (await client.queueStatus(queue)).total;
  } finally {
    await client.close();
  }
}

void describe('kvmq CLI input limits', { concurrency: 4 }, () => {
  it('a payload from stdin without end stops at 4 MiB, nothing enqueued', async () => {
    const store = newStore();
    await expectExit(0, ['enqueue', 'limits', 'first'], { store });
    const result = await expectExit(1, ['enqueue', 'limits'], { store, stdinFrom: ENDLESS });
    assert.equal(
      result.stderr,
      'kvmq: stdin is over 4194304 bytes: far over the 1 MiB payload limit of every store; ' +
        'store large data elsewhere and enqueue a reference to it\n',
    );
    assert.equal(await total(store, 'limits'), 1);
  });

  it('a payload a little over a store limit still gets the store refusal with its size', async () => {
    const store = newStore();
    const result = await expectExit(1, ['enqueue', 'limits'], { store, input: Buffer.alloc(1_100_000, 1) });
    assert.match(result.stderr, /^kvmq: payload is 1100000 bytes, over this store's limit of \d+ bytes/);
  });

  it('--file with a line without end names the line, nothing enqueued', async () => {
    const store = newStore();
    const result = await expectExit(1, ['enqueue', 'limits', '--file', ENDLESS], { store });
    assert.match(result.stderr, /^kvmq: line 1: a line is over 4194304 bytes: far over the 1 MiB payload limit/m);
    assert.match(result.stderr, /^kvmq: stopped at line 1: nothing was added/m);
    assert.equal(await total(store, 'limits'), 0);
  });

  it('schedule and update read their payload to the same bound', async () => {
    const store = newStore();
    const schedule = await expectExit(1, ['schedule', 'add', 'limits', 'nightly', '--every', '1h'], {
      store,
      stdinFrom: ENDLESS,
    });
    assert.match(schedule.stderr, /^kvmq: stdin is over 4194304 bytes/);
    await expectExit(0, ['enqueue', 'limits', 'small', '--id', 'm1'], { store });
    const update = await expectExit(1, ['update', 'limits', 'm1', '--payload-file', ENDLESS], { store });
    assert.match(update.stderr, /^kvmq: \/dev\/zero is over 4194304 bytes/);
  });

  it('flow add stops reading a document at 64 MiB, from stdin or a file', async () => {
    const store = newStore();
    const fromStdin = await expectExit(1, ['flow', 'add'], { store, stdinFrom: ENDLESS });
    assert.equal(fromStdin.stderr, 'kvmq: stdin is over 67108864 bytes: more than this command reads\n');
    const fromFile = await expectExit(1, ['flow', 'add', ENDLESS], { store });
    assert.equal(fromFile.stderr, 'kvmq: /dev/zero is over 67108864 bytes: more than this command reads\n');
  });
});
