/** `kvmq status --id`, `kvmq show` and `kvmq list --payload` show a handler's result, as text and as JSON. */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { connect, type Client } from '../src/index.js';
import { expectExit, kvmq, newStore } from './support/cli.js';
import { waitFor } from './support/wait.js';

const store = newStore();
let client: Client;

before(async () => {
  client = await connect(store, { maintenance: false });
  const worker = client.worker('jobs', ({ id }) => {
    if (id === 'bytes') return { status: 'success', result: Buffer.from([0xff, 0x00]) };
    if (id === 'none') return undefined;
    return { status: 'success', result: { total: 42 } };
  });
  for (const id of ['json', 'bytes', 'none']) await client.enqueue('jobs', id, { id });
  await waitFor(async () => (await client.queueStatus('jobs')).counts['done-awaiting-gc'] === 3);
  await worker.stop();
});

after(() => client.close());

void describe('kvmq CLI: results', { concurrency: 3 }, () => {
  void it('status --id shows the result, or - for none', async () => {
    assert.match(
      (await expectExit(0, ['status', 'jobs', '--id', 'json'], { store })).stdout,
      /^result\s+\{"total":42\}$/m,
    );
    assert.match((await expectExit(0, ['status', 'jobs', '--id', 'none'], { store })).stdout, /^result\s+-$/m);
    const json = JSON.parse(
      (await expectExit(0, ['status', 'jobs', '--id', 'bytes', '--json'], { store })).stdout,
    ) as unknown;
    assert.deepEqual((json as { result: unknown }).result, { base64: Buffer.from([0xff, 0x00]).toString('base64') });
  });

  void it('show shows the result beside the payload', async () => {
    const { stdout } = await expectExit(0, ['show', 'jobs', 'bytes'], { store });
    assert.match(stdout, /^result\s+2 bytes: base64 \/wA=$/m);
    assert.match(stdout, /^payload\s+"bytes"$/m);
    const json = JSON.parse((await expectExit(0, ['show', 'jobs', 'json', '--json'], { store })).stdout) as unknown;
    assert.deepEqual((json as { result: unknown }).result, { total: 42 });
  });

  void it('list --payload shows each result; list without it reads none', async () => {
    const lines = (await expectExit(0, ['list', 'jobs', '--payload'], { store })).stdout.trim().split('\n');
    assert.match(lines.find((l) => l.startsWith('json ')) ?? '', /result \{"total":42\}/);
    assert.doesNotMatch(lines.find((l) => l.startsWith('none ')) ?? '', /result/);
    const plain = (await expectExit(0, ['list', 'jobs'], { store })).stdout;
    assert.doesNotMatch(plain, /result/);
    const json = (await expectExit(0, ['list', 'jobs', '--payload', '--json'], { store })).stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { id: string; result?: unknown });
    assert.deepEqual(json.find((m) => m.id === 'json')?.result, { total: 42 });
  });
});

void describe('kvmq work --result-stdout', () => {
  void it("keeps a successful command's stdout as the result; over the limit fails the message", async () => {
    const own = newStore();
    await expectExit(0, ['enqueue', 'cmds', 'x', '--id', 'small'], { store: own });
    await expectExit(0, ['enqueue', 'cmds', 'x', '--id', 'large'], { store: own });
    const run = await kvmq(
      [
        'work',
        'cmds',
        '--exec',
        'if [ "$KVMQ_ID" = large ]; then head -c 70000 /dev/zero; else echo "done $KVMQ_ID"; fi',
        '--result-stdout',
        '--max',
        '2',
      ],
      { store: own },
    );
    assert.equal(run.code, 1, run.stderr);
    assert.match(run.stdout, /^done small$/m, 'stdout still passes through');
    const small = await expectExit(0, ['status', 'cmds', '--id', 'small'], { store: own });
    assert.match(small.stdout, /^result\s+11 bytes: "done small\\n"$/m);
    const large = await expectExit(0, ['status', 'cmds', '--id', 'large'], { store: own });
    assert.match(large.stdout, /^state\s+failed$/m);
    assert.match(large.stdout, /stdout is 70000 bytes, over the result limit of 65536 bytes/);
  });
});
