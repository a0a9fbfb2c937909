/** `kvmq work --batch`: a JSON array of messages on the command's stdin, its outcomes on stdout or its exit status. */
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { cliDir, expectExit, kvmq, newStore } from './support/cli.js';

interface BatchMessage {
  readonly queue: string;
  readonly id: string;
  readonly attempt: number;
  readonly metadata: unknown;
  readonly payload?: string;
  readonly payloadBase64?: string;
}

/** A batch command: logs each batch it is given, answers one outcome per message ('bad' fails, 'skip' null). */
async function batchScript(): Promise<{ command: string; batches: () => Promise<BatchMessage[][]> }> {
  const log = join(cliDir(), `batches-${process.hrtime.bigint()}.jsonl`);
  const script = join(cliDir(), `batch-${process.hrtime.bigint()}.mjs`);
  await writeFile(
    script,
    `import { appendFileSync, readFileSync } from 'node:fs';
const batch = JSON.parse(readFileSync(0, 'utf8'));
appendFileSync(${JSON.stringify(log)}, JSON.stringify(batch) + '\\n');
const outcomes = batch.map((m) =>
  m.id === 'bad' ? { status: 'error', error: 'bad one' } : m.id === 'skip' ? null : { status: 'success', result: { seen: m.payload, n: process.env.KVMQ_BATCH_SIZE } },
);
process.stdout.write(JSON.stringify(outcomes));
`,
  );
  return {
    command: `${JSON.stringify(process.execPath)} ${JSON.stringify(script)}`,
    batches: async () =>
      (await readFile(log, 'utf8'))
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as BatchMessage[]),
  };
}

void describe('kvmq work --batch', { concurrency: 3 }, () => {
  void it('gives the command a JSON array and keeps its per-message outcomes', async () => {
    const store = newStore();
    for (const id of ['a', 'b', 'bad', 'skip', 'e'])
      await expectExit(0, ['enqueue', 'q', `p-${id}`, '--id', id], { store });
    const { command, batches } = await batchScript();
    const run = await kvmq(['work', 'q', '--batch', '3', '--exec', command, '--max', '5'], { store });
    assert.equal(run.code, 1, run.stderr);
    assert.match(run.stderr, /q bad attempt 1 failed: bad one/);
    assert.match(run.stderr, /5 handled: 4 succeeded, 1 failed, 0 retried/);
    assert.doesNotMatch(run.stdout, /status/, 'the outcomes are not passed through');
    const seen = await batches();
    assert.deepEqual(
      seen.map((batch) => batch.map((m) => m.id)),
      [
        ['a', 'b', 'bad'],
        ['skip', 'e'],
      ],
    );
    assert.deepEqual(seen[0]?.[0], { queue: 'q', id: 'a', attempt: 1, metadata: {}, payload: 'p-a' });
    const a = await expectExit(0, ['status', 'q', '--id', 'a'], { store });
    assert.match(a.stdout, /^result\s+\{"seen":"p-a","n":"3"\}$/m);
    assert.match((await expectExit(0, ['status', 'q', '--id', 'skip'], { store })).stdout, /^state\s+done/m);
  });

  void it("an exit status other than 0 is every message's outcome; a wrong-length answer fails them", async () => {
    const store = newStore();
    for (const id of ['x', 'y']) await expectExit(0, ['enqueue', 'exits', id, '--id', id], { store });
    const failed = await kvmq(['work', 'exits', '--batch', '2', '--exec', 'cat >/dev/null; exit 3', '--max', '2'], {
      store,
    });
    assert.equal(failed.code, 1, failed.stderr);
    assert.match(failed.stderr, /2 handled: 0 succeeded, 2 failed/);
    const x = await expectExit(0, ['status', 'exits', '--id', 'x'], { store });
    assert.match(x.stdout, /command exited with code 3/);

    for (const id of ['v', 'w']) await expectExit(0, ['enqueue', 'short', id, '--id', id], { store });
    const short = await kvmq(
      ['work', 'short', '--batch', '2', '--exec', 'cat >/dev/null; echo "[null]"', '--max', '2'],
      {
        store,
      },
    );
    assert.equal(short.code, 1, short.stderr);
    const v = await expectExit(0, ['status', 'short', '--id', 'v'], { store });
    assert.match(v.stdout, /returned 1 outcome\(s\) for a batch of 2/);
  });

  void it('--batch-wait needs --batch; --result-stdout does not go with it', async () => {
    const store = newStore();
    const wait = await expectExit(2, ['work', 'q', '--batch-wait', '50ms', '--exec', 'true'], { store });
    assert.match(wait.stderr, /--batch-wait needs --batch/);
    const result = await expectExit(2, ['work', 'q', '--batch', '2', '--result-stdout', '--exec', 'true'], { store });
    assert.match(result.stderr, /--result-stdout does not go with --batch/);
    await expectExit(2, ['work', 'q', '--batch', '0', '--exec', 'true'], { store });
  });
});
