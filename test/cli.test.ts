/**
 * The `kvmq` CLI, run as a subprocess on a temporary SQLite file: stdout,
 * stderr and exit codes, as a user or a script sees them.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { cliDir, expectExit, kvmq, newStore, ROOT, start, waitFor, type RunResult } from './support/cli.js';
import { connect } from '../src/index.js';

async function statusOf(store: string, queue: string, id: string): Promise<Record<string, unknown>> {
  const { stdout } = await expectExit(0, ['status', queue, '--id', id, '--json'], { store });
  return JSON.parse(stdout) as Record<string, unknown>;
}

async function queueStatus(store: string, queue: string): Promise<{ counts: Record<string, number>; total: number }> {
  const { stdout } = await expectExit(0, ['status', queue, '--json'], { store });
  return JSON.parse(stdout) as { counts: Record<string, number>; total: number };
}

/** Until `kvmq status` knows the queue by its consumer alone. */
async function waitForConsumer(store: string, queue: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const run = await kvmq(['status', queue], { store });
    if (run.code === 0) {
      assert.match(run.stdout, /^consumers: 1$/m);
      return;
    }
    assert.match(run.stderr, /unknown queue/);
    if (Date.now() > deadline) assert.fail(`status ${queue} never saw the consumer`);
  }
}

// Independent tests (each on its own store file) overlap their spawns.
describe('kvmq CLI', { concurrency: 4 }, () => {
  it('enqueues and shows a message and its queue, as text and as JSON', async () => {
    const store = newStore();
    const added = await expectExit(0, ['enqueue', 'jobs', 'hello', '--id', 'm1', '--metadata', '{"by":"test"}'], {
      store,
    });
    assert.equal(added.stdout, 'm1\n');
    assert.equal(added.stderr, '');

    const random = await expectExit(0, ['enqueue', 'jobs', 'world', '--json'], { store });
    const parsed = JSON.parse(random.stdout) as { id: string; ok: boolean; action: string };
    assert.deepEqual(Object.keys(parsed), ['id', 'ok', 'action']);
    assert.equal(parsed.ok, true);
    assert.equal(parsed.action, 'added');

    const text = await expectExit(0, ['status', 'jobs', '--id', 'm1'], { store });
    assert.match(text.stdout, /^state\s+queued$/m);
    assert.match(text.stdout, /^attempt\s+0$/m);

    const status = await statusOf(store, 'jobs', 'm1');
    assert.equal(Object.keys(status)[0], 'state');
    assert.equal(status.state, 'queued');
    assert.equal(status.id, 'm1');
    assert.equal(status.attempt, 0);

    const queueText = await expectExit(0, ['status', 'jobs'], { store });
    assert.match(queueText.stdout, /2 messages/);
    assert.match(queueText.stdout, /^\s+queued\s+2$/m);
    const queue = await queueStatus(store, 'jobs');
    assert.deepEqual(Object.keys(queue), ['counts', 'consumers', 'dryRuns', 'total', 'paused']);
    assert.equal(queue.counts.queued, 2);
    assert.equal(queue.total, 2);
  });

  it("flow show prints a flow's tree from any node of it, as text and as JSON", async () => {
    const store = newStore();
    const client = await connect(store, { maintenance: false });
    try {
      await client.flow({
        queue: 'jobs',
        payload: 'p',
        id: 'p',
        children: [
          { queue: 'jobs', payload: 'a', id: 'a' },
          { queue: 'parts', payload: 'b', id: 'b', children: [{ queue: 'parts', payload: 'c', id: 'c' }] },
        ],
      });
      await client.cancel('parts', 'c', 'gone');
    } finally {
      await client.close();
    }
    const text = await expectExit(0, ['flow', 'show', 'parts', 'c'], { store });
    assert.equal(
      text.stdout,
      [
        'jobs/p failed  child parts/b failed: child parts/c failed: canceled: gone',
        '  jobs/a queued',
        '  parts/b failed  child parts/c failed: canceled: gone',
        '    parts/c failed  canceled: gone',
        '',
      ].join('\n'),
    );
    const json = JSON.parse((await expectExit(0, ['flow', 'show', 'jobs', 'a', '--json'], { store })).stdout) as {
      id: string;
      children: { id: string; state: string }[];
    };
    assert.equal(json.id, 'p');
    assert.deepEqual(
      json.children.map((child) => [child.id, child.state]),
      [
        ['a', 'queued'],
        ['b', 'failed'],
      ],
    );
    assert.match(
      (await expectExit(1, ['flow', 'show', 'jobs', 'nobody'], { store })).stderr,
      /message nobody not found/,
    );
    assert.match(
      (await expectExit(2, ['flow', 'list', 'jobs', 'a'], { store })).stderr,
      /unknown subcommand 'list': use add or show/,
    );
  });

  it('reports a missing message with exit 1', async () => {
    const store = newStore();
    await expectExit(0, ['enqueue', 'jobs', 'x'], { store });
    const text = await expectExit(1, ['status', 'jobs', '--id', 'nope'], { store });
    assert.equal(text.stdout, '');
    assert.match(text.stderr, /not found/);
    const json = await expectExit(1, ['status', 'jobs', '--id', 'nope', '--json'], { store });
    assert.deepEqual(JSON.parse(json.stdout), { state: null });
  });

  it('refuses a duplicate id with exit 3 and says its state', async () => {
    const store = newStore();
    await expectExit(0, ['enqueue', 'jobs', 'a', '--id', 'dup'], { store });
    const text = await expectExit(3, ['enqueue', 'jobs', 'b', '--id', 'dup'], { store });
    assert.equal(text.stdout, '');
    assert.equal(text.stderr, 'kvmq: message dup was refused: it is queued\n');
    const json = await expectExit(3, ['enqueue', 'jobs', 'b', '--id', 'dup', '--json'], { store });
    assert.deepEqual(JSON.parse(json.stdout), { id: 'dup', ok: false, state: 'queued' });
  });

  it('enqueues one message per non-empty line of --file, and of stdin with --file -', async () => {
    const store = newStore();
    const file = join(cliDir(), 'lines.txt');
    const lines = Array.from({ length: 2500 }, (_, i) => `line ${i}`);
    await writeFile(file, `${lines.join('\n')}\n\n\r\nlast`);
    const fromFile = await expectExit(0, ['enqueue', 'lines', '--file', file], { store });
    assert.equal(fromFile.stdout, 'accepted 2501, refused 0\n');

    const fromStdin = await expectExit(0, ['enqueue', 'lines', '--file', '-', '--json'], { store, input: 'x\ny\n' });
    assert.deepEqual(JSON.parse(fromStdin.stdout), { accepted: 2, refused: 0, refusals: [] });
    assert.equal((await queueStatus(store, 'lines')).total, 2503);

    // A line the store refuses is named, with the reason; the lines before it are kept.
    const big = join(cliDir(), 'big-line.txt');
    await writeFile(big, `a\nb\n\n${'x'.repeat(1_100_000)}\nd\n`);
    const tooBig = await expectExit(1, ['enqueue', 'big', '--file', big], { store });
    assert.match(tooBig.stderr, /^kvmq: line 4: payload is 1100000 bytes, over this store's limit of \d+ bytes/m);
    assert.match(tooBig.stderr, /^kvmq: stopped at line 4: nothing was added, none from line 1 on$/m);
    const missing = await expectExit(1, ['enqueue', 'lines', '--file', join(cliDir(), 'no-such-file')], { store });
    assert.match(missing.stderr, /^kvmq: ENOENT/);
  });

  it('hands the exact payload bytes from stdin to the command', async () => {
    const store = newStore();
    const bytes = Buffer.from([0, 1, 0xff, 0xfe, 10, 13, 10, 0x41]);
    await expectExit(0, ['enqueue', 'bytes', '--id', 'b1'], { store, input: bytes });
    const out = join(cliDir(), 'payload.bin');
    await expectExit(0, ['work', 'bytes', '--max', '1', '--exec', 'cat > "$OUT"'], { store, env: { OUT: out } });
    assert.deepEqual(await readFile(out), bytes);
  });

  it('works messages with a command: exit 0 succeeds, 75 retries, 1 fails with its stderr', async () => {
    const store = newStore();
    await expectExit(0, ['enqueue', 'jobs', 'ok', '--id', 'ok', '--metadata', '{"n":1}'], { store });
    await expectExit(0, ['enqueue', 'jobs', 'again', '--id', 'again'], { store });
    await expectExit(0, ['enqueue', 'jobs', 'fail', '--id', 'fail'], { store });
    await expectExit(0, ['enqueue', 'jobs', 'left', '--id', 'left'], { store });
    const command = [
      'p=$(cat)',
      'echo "$p $KVMQ_QUEUE $KVMQ_ID $KVMQ_ATTEMPT $KVMQ_METADATA"',
      'case "$p" in again) echo try later >&2; exit 75;; fail) echo it broke >&2; exit 1;; esac',
    ].join('\n');
    // --max 3 leaves the fourth message alone, prefetch or not; one failed for good, so exit 1.
    const run = await expectExit(
      1,
      ['work', 'jobs', '--max', '3', '--prefetch', '8', '--retry-backoff-ms', '60000', '--exec', command],
      { store },
    );
    assert.equal(
      run.stdout,
      'ok jobs ok 1 {"n":1}\nagain jobs again 1 {}\nfail jobs fail 1 {}\n',
      'stdout passes through, in order at concurrency 1',
    );
    assert.deepEqual(
      run.stderr.split('\n').filter((line) => line.startsWith('kvmq work: ')),
      [
        'kvmq work: jobs again attempt 1 failed, retrying in 60000 ms: command exited with code 75: try later',
        'kvmq work: jobs fail attempt 1 failed: command exited with code 1: it broke',
        'kvmq work: 3 handled: 1 succeeded, 1 failed, 1 retried',
      ],
    );

    const ok = await statusOf(store, 'jobs', 'ok');
    assert.equal(ok.state, 'done-awaiting-gc');
    assert.equal(ok.outcome, 'success');
    assert.equal(ok.attempt, 1);

    const again = await statusOf(store, 'jobs', 'again');
    assert.equal(again.state, 'queued-with-backoff');
    assert.equal(again.outcome, 'retry');
    assert.equal(again.attempt, 1);
    assert.match(String(again.lastError), /exited with code 75\ntry later$/);

    const fail = await statusOf(store, 'jobs', 'fail');
    assert.equal(fail.state, 'failed');
    assert.equal(fail.outcome, 'error');
    assert.equal(fail.attempt, 1);
    assert.match(String(fail.lastError), /exited with code 1\nit broke$/);

    assert.equal((await statusOf(store, 'jobs', 'left')).state, 'queued');
  });

  it('a command that is not found fails every message, says so per message and exits 1', async () => {
    const store = newStore();
    await expectExit(0, ['enqueue', 'typo', 'a', '--id', 'a'], { store });
    await expectExit(0, ['enqueue', 'typo', 'b', '--id', 'b'], { store });
    const run = await expectExit(1, ['work', 'typo', '--idle-exit-ms', '300', '--exec', 'kvmq-no-such-command'], {
      store,
    });
    for (const id of ['a', 'b']) {
      assert.match(
        run.stderr,
        new RegExp(
          `^kvmq work: typo ${id} attempt 1 failed: command exited with code 127: .*kvmq-no-such-command.*$`,
          'm',
        ),
      );
    }
    assert.match(run.stderr, /^kvmq work: 2 handled: 0 succeeded, 2 failed, 0 retried$/m);
    assert.equal((await statusOf(store, 'typo', 'a')).outcome, 'error');
  });

  it('exits 0 with a summary when every message succeeded', async () => {
    const store = newStore();
    await expectExit(0, ['enqueue', 'good', 'a'], { store });
    await expectExit(0, ['enqueue', 'good', 'b'], { store });
    const run = await expectExit(0, ['work', 'good', '--max', '2', '--exec', 'cat >/dev/null'], { store });
    assert.equal(run.stderr, 'kvmq work: 2 handled: 2 succeeded, 0 failed, 0 retried\n');
  });

  it('--timeout ends a command that runs too long and fails its message', async () => {
    const store = newStore();
    await expectExit(0, ['enqueue', 'slow', 'x', '--id', 't1'], { store });
    const started = Date.now();
    const run = await expectExit(1, ['work', 'slow', '--max', '1', '--timeout', '300', '--exec', 'sleep 20'], {
      store,
    });
    assert.ok(Date.now() - started < 15_000, 'the command was not waited for');
    assert.match(run.stderr, /^kvmq work: slow t1 attempt 1 failed: timed out after 300 ms$/m);
    const status = await statusOf(store, 'slow', 't1');
    assert.equal(status.outcome, 'error');
    assert.equal(status.lastError, 'timed out after 300 ms');
  });

  it('exits by itself after --idle-exit-ms with nothing to do', async () => {
    const store = newStore();
    await expectExit(0, ['enqueue', 'idle', 'a'], { store });
    await expectExit(0, ['enqueue', 'idle', 'b'], { store });
    const started = Date.now();
    const run = await expectExit(
      0,
      // Each command writes its line in one write, so two at once cannot interleave within a line.
      ['work', 'idle', '--concurrency', '2', '--idle-exit-ms', '300', '--exec', 'echo "$(cat)"'],
      {
        store,
      },
    );
    // Two commands run at once: their lines may come in either order.
    assert.equal(run.stdout.split('\n').sort().join(''), 'ab');
    assert.ok(Date.now() - started < 10_000);
    assert.equal((await queueStatus(store, 'idle')).counts['done-awaiting-gc'], 2);
  });

  it('stops gracefully on SIGTERM, letting the running command finish', async () => {
    const store = newStore();
    await expectExit(0, ['enqueue', 'slow', 'x', '--id', 's1'], { store });
    const worker = start('src/cli/main.ts', ['work', 'slow', '--exec', 'echo started; sleep 1; echo finished'], {
      store,
    });
    await waitFor(() => worker.stdout().includes('started'), 'the command to start');
    worker.child.kill('SIGTERM');
    const run = await worker.result;
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, 'started\nfinished\n');
    const status = await statusOf(store, 'slow', 's1');
    assert.equal(status.state, 'done-awaiting-gc');
    assert.equal(status.outcome, 'success');
  });

  it('stops at once on a second signal and hands the message back', async () => {
    const store = newStore();
    await expectExit(0, ['enqueue', 'slow', 'x', '--id', 's2'], { store });
    const worker = start('src/cli/main.ts', ['work', 'slow', '--exec', 'echo started; sleep 20; echo finished'], {
      store,
    });
    await waitFor(() => worker.stdout().includes('started'), 'the command to start');
    worker.child.kill('SIGTERM');
    await waitFor(() => worker.stderr().includes('stopping once'), 'the first signal to be taken');
    worker.child.kill('SIGINT');
    const run = await worker.result;
    assert.equal(run.code, 130, run.stderr);
    assert.equal(run.stdout, 'started\n');
    const status = await statusOf(store, 'slow', 's2');
    assert.equal(status.state, 'queued');
    assert.equal(status.attempt, 1);
  });

  it('sets and shows the configuration, and enforces filter enums', async () => {
    const store = newStore();
    const set = await expectExit(
      0,
      ['config', 'cfg', 'task_gc_lifetime=60000', 'gc_interval_ms=5000', 'filter.size=small,medium,large'],
      { store },
    );
    const settings =
      'gc_lifetime_ms=60000\nfailed_lifetime_ms=604800000\ngc_interval_ms=5000\nmax_deliveries=10\n' +
      'dead_letter_queue=\npaused=false\nevents=false\nevents_max_count=10000\nevents_max_age_ms=86400000\n' +
      'rate_limit=none\ngroup_concurrency=none\ngroup_rate_limit=none\nkeep_done=none\nkeep_failed=none\n';
    assert.equal(set.stdout, `${settings}filter.size=small,medium,large\n`);
    const json = await expectExit(0, ['config', 'cfg', '--json'], { store });
    assert.deepEqual(JSON.parse(json.stdout), {
      gcLifetimeMs: 60000,
      failedLifetimeMs: 604800000,
      keepDone: null,
      keepFailed: null,
      gcIntervalMs: 5000,
      filterEnums: { size: ['small', 'medium', 'large'] },
      paused: false,
      maxDeliveries: 10,
      deadLetterQueue: null,
      events: false,
      eventsMaxCount: 10_000,
      eventsMaxAgeMs: 86_400_000,
      rateLimit: null,
      groupConcurrency: null,
      groupRateLimit: null,
    });
    const failures = await expectExit(
      0,
      ['config', 'cfg', 'failed_lifetime_ms=1000', 'max_deliveries=3', 'dead_letter_queue=cfg-dead', '--json'],
      { store },
    );
    assert.deepEqual(
      (({ failedLifetimeMs, maxDeliveries, deadLetterQueue }) => ({
        failedLifetimeMs,
        maxDeliveries,
        deadLetterQueue,
      }))(JSON.parse(failures.stdout) as Record<string, unknown>),
      { failedLifetimeMs: 1000, maxDeliveries: 3, deadLetterQueue: 'cfg-dead' },
    );
    await expectExit(0, ['config', 'cfg', 'failed_lifetime_ms=604800000', 'max_deliveries=10', 'dead_letter_queue='], {
      store,
    });
    assert.match(
      (await expectExit(2, ['config', 'cfg', 'paused=maybe'], { store })).stderr,
      /paused must be true or false/,
    );
    const kept = await expectExit(0, ['config', 'cfg', 'keep_done=1000', 'keep_failed=0'], { store });
    assert.match(kept.stdout, /^keep_done=1000\nkeep_failed=0$/m);
    assert.match(
      (await expectExit(0, ['config', 'cfg', 'keep_done=none', 'keep_failed=none'], { store })).stdout,
      /^keep_done=none\nkeep_failed=none$/m,
    );
    assert.match((await expectExit(2, ['config', 'cfg', 'keep_failed=-1'], { store })).stderr, /keep_failed/);

    const refused = await expectExit(1, ['enqueue', 'cfg', 'x', '--filter', 'size=huge'], { store });
    assert.equal(refused.stdout, '');
    assert.match(
      refused.stderr,
      /^kvmq: filter size=huge is not allowed on queue 'cfg'; allowed values are small, medium, large\n$/,
    );
    await expectExit(0, ['enqueue', 'cfg', 'x', '--filter', 'size=medium', '--id', 'f1'], { store });
    // `at_least`: a worker of the highest size takes a medium message.
    const worker = await expectExit(
      0,
      ['work', 'cfg', '--filter', 'size=large:at_least', '--max', '1', '--exec', 'cat'],
      { store },
    );
    assert.equal(worker.stdout, 'x');

    const removed = await expectExit(0, ['config', 'cfg', 'filter.size='], { store });
    assert.equal(removed.stdout, settings);
    const unknown = await expectExit(2, ['config', 'cfg', 'colour=red'], { store });
    assert.match(unknown.stderr, /^kvmq: unknown setting 'colour'/);
  });

  it('lists failed messages, shows one, retries them; removes, promotes, pauses', async () => {
    const store = newStore();
    for (const id of ['a', 'b', 'c']) await expectExit(0, ['enqueue', 'jobs', `payload ${id}`, '--id', id], { store });
    await expectExit(1, ['work', 'jobs', '--max', '3', '--exec', 'echo "no $KVMQ_ID" >&2; exit 4'], { store });

    const listed = await expectExit(0, ['list', 'jobs', '--state', 'failed', '--limit', '2'], { store });
    const lines = listed.stdout.trim().split('\n');
    assert.equal(lines.length, 2);
    assert.match(lines[0] ?? '', /^a {2}failed {2}attempt 1 {2}\S+Z {2}command exited with code 4: no a$/);
    const more = /--cursor (\S+)$/m.exec(listed.stderr);
    assert.ok(more !== null, listed.stderr);
    const rest = await expectExit(0, ['list', 'jobs', '--state', 'failed', '--limit', '2', '--cursor', more[1] ?? ''], {
      store,
    });
    assert.match(rest.stdout, /^c {2}failed/);
    const json = await expectExit(0, ['list', 'jobs', '--state', 'failed', '--all', '--json', '--payload'], { store });
    const messages = json.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { id: string; payload: { base64: string } });
    assert.deepEqual(
      messages.map((m) => [m.id, Buffer.from(m.payload.base64, 'base64').toString()]),
      [
        ['a', 'payload a'],
        ['b', 'payload b'],
        ['c', 'payload c'],
      ],
    );
    assert.match(
      (await expectExit(2, ['list', 'jobs', '--state', 'broken'], { store })).stderr,
      /^kvmq: state "broken" is not one of queued, .*awaiting-children\n/,
    );

    const shown = await expectExit(0, ['show', 'jobs', 'a'], { store });
    assert.match(shown.stdout, /^state +failed$/m);
    assert.match(shown.stdout, /^payload +9 bytes: "payload a"$/m);
    assert.match(shown.stdout, /^ {2}attempt 1 error at \S+ started \S+ by \S+: command exited with code 4: no a$/m);
    await expectExit(1, ['show', 'jobs', 'nope'], { store });

    const retried = await expectExit(0, ['retry', 'jobs', 'a'], { store });
    assert.equal(retried.stdout, 'a queued\n');
    const refused = await expectExit(3, ['retry', 'jobs', 'a'], { store });
    assert.equal(refused.stderr, 'kvmq: message a was refused: it is queued\n');
    await expectExit(1, ['retry', 'jobs', 'ghost'], { store });
    assert.equal((await expectExit(0, ['retry', 'jobs', '--all-failed'], { store })).stdout, 'retried 2\n');
    await expectExit(0, ['work', 'jobs', '--max', '3', '--exec', 'cat >/dev/null'], { store });
    assert.equal((await queueStatus(store, 'jobs')).counts['done-awaiting-gc'], 3);
    // The dashboard's names for the states work too, in any case.
    for (const [state, lines] of [
      ['done', 3],
      ['Done', 3],
      ['done-awaiting-gc', 3],
      ['Done, held', 0],
      ['failed', 0],
    ] as const) {
      const { stdout } = await expectExit(0, ['list', 'jobs', '--state', state], { store });
      assert.equal(stdout === '' ? 0 : stdout.trim().split('\n').length, lines, `--state ${state}`);
    }
    assert.match(
      (await expectExit(2, ['list', 'jobs', '--state', 'dnoe'], { store })).stderr,
      /^kvmq: state "dnoe" is not one of .* \(did you mean 'done'\?\); the dashboard's names work too: queued, delayed,/,
    );

    await expectExit(0, ['enqueue', 'jobs', 'later', '--id', 'l', '--delay-ms', '600000'], { store });
    assert.equal((await expectExit(0, ['promote', 'jobs', 'l'], { store })).stdout, 'l queued\n');
    assert.equal((await expectExit(0, ['remove', 'jobs', 'l'], { store })).stdout, 'l removed\n');

    await expectExit(0, ['enqueue', 'jobs', 'unwanted', '--id', 'c', '--delay-ms', '600000'], { store });
    assert.equal(
      (await expectExit(0, ['cancel', 'jobs', 'c', '--reason', 'not needed'], { store })).stdout,
      'c failed\n',
    );
    assert.match(
      (await expectExit(3, ['cancel', 'jobs', 'c'], { store })).stderr,
      /message c was refused: it is failed/,
    );
    assert.match((await expectExit(1, ['cancel', 'jobs', 'nobody'], { store })).stderr, /message nobody not found/);
    assert.match((await expectExit(0, ['show', 'jobs', 'c'], { store })).stdout, /canceled: not needed/);

    await expectExit(0, ['enqueue', 'jobs', 'first', '--id', 'u', '--delay-ms', '600000'], { store });
    assert.equal(
      (
        await expectExit(0, ['update', 'jobs', 'u', '--payload', 'second', '--priority', '7', '--delay-ms', '0'], {
          store,
        })
      ).stdout,
      'u queued\n',
    );
    assert.match((await expectExit(0, ['show', 'jobs', 'u'], { store })).stdout, /second/);
    assert.equal(
      (await expectExit(0, ['update', 'jobs', 'u', '--run-at', '2099-01-01T00:00:00Z'], { store })).stdout,
      'u queued-with-backoff\n',
    );
    assert.match(
      (await expectExit(2, ['update', 'jobs', 'u', '--run-at', '2099-01-01T00:00:00Z', '--delay-ms', '1s'], { store }))
        .stderr,
      /--run-at or --delay-ms, not both/,
    );
    assert.match((await expectExit(2, ['update', 'jobs', 'u'], { store })).stderr, /give something to change/);
    assert.match(
      (await expectExit(3, ['update', 'jobs', 'c', '--priority', '1'], { store })).stderr,
      /message c was refused: it is failed/,
    );
    assert.match(
      (await expectExit(1, ['update', 'jobs', 'nobody', '--priority', '1'], { store })).stderr,
      /message nobody not found/,
    );

    assert.equal(
      (await expectExit(0, ['pause', 'jobs'], { store })).stdout,
      "paused jobs: workers claim nothing from it until 'kvmq resume jobs'\n",
    );
    await expectExit(0, ['resume', 'jobs'], { store });
    const paused = await expectExit(0, ['pause', 'fresh', '--json'], { store });
    assert.deepEqual(JSON.parse(paused.stdout), { paused: true, created: true });
    assert.match(paused.stderr, /had no configuration; created it/);
    assert.match((await expectExit(0, ['status', 'fresh'], { store })).stdout, /^queue fresh \(paused\): 0 messages/);
    await expectExit(0, ['enqueue', 'fresh', 'x'], { store });
    await expectExit(0, ['work', 'fresh', '--idle-exit-ms', '500', '--exec', 'cat'], { store });
    assert.equal((await queueStatus(store, 'fresh')).counts.queued, 1, 'nothing was taken while paused');
    assert.equal(
      (await expectExit(0, ['resume', 'fresh'], { store })).stdout,
      'resumed fresh: workers claim from it again\n',
    );
    assert.equal((await expectExit(0, ['work', 'fresh', '--max', '1', '--exec', 'cat'], { store })).stdout, 'x');
  });

  it('removes finished messages with gc, and everything with clear', async () => {
    const store = newStore();
    await expectExit(0, ['config', 'jobs', 'gc_lifetime_ms=0'], { store });
    await expectExit(0, ['enqueue', 'jobs', 'a', '--id', 'g1'], { store });
    await expectExit(0, ['enqueue', 'jobs', 'b', '--id', 'g2'], { store });
    await expectExit(0, ['work', 'jobs', '--max', '1', '--exec', 'cat >/dev/null'], { store });
    const gc = await expectExit(0, ['gc', 'jobs'], { store });
    assert.equal(gc.stdout, 'removed 1 finished message of jobs\n');
    assert.deepEqual(JSON.parse((await expectExit(0, ['gc', 'jobs', '--json'], { store })).stdout), {
      ran: true,
      removed: 0,
    });
    assert.equal((await queueStatus(store, 'jobs')).total, 1);

    await expectExit(0, ['enqueue', 'other', 'c'], { store });
    await expectExit(0, ['enqueue', 'other', 'd'], { store });
    // Not at a terminal, so no one to ask: --yes says it.
    const refused = await expectExit(2, ['clear', 'jobs', 'other'], { store });
    assert.match(refused.stderr, /^kvmq: clear would remove 1 message of jobs, 2 messages of other; not at a terminal/);
    assert.equal((await queueStatus(store, 'other')).total, 2, 'nothing was removed');
    const cleared = await expectExit(0, ['clear', 'jobs', 'other', '--json', '--yes'], { store });
    assert.deepEqual(JSON.parse(cleared.stdout), { cleared: ['jobs', 'other'], removed: { jobs: 1, other: 2 } });
    assert.equal((await queueStatus(store, 'jobs')).total, 0);
    // Without messages or a configuration, a cleared queue is unknown again.
    assert.match((await expectExit(1, ['status', 'other'], { store })).stderr, /^kvmq: unknown queue 'other'/);
    await expectExit(0, ['enqueue', 'jobs', 'e'], { store });
    assert.equal((await expectExit(0, ['clear', 'jobs', '-y'], { store })).stdout, 'cleared jobs: removed 1 message\n');
  });

  it('clear asks at a terminal, and clears only on yes', async () => {
    const store = newStore();
    // Configured, so the queue stays known once empty.
    await expectExit(0, ['config', 'jobs', 'max_deliveries=5'], { store });
    await expectExit(0, ['enqueue', 'jobs', 'a'], { store });
    await expectExit(0, ['enqueue', 'jobs', 'b'], { store });
    // script(1) gives the command a terminal; what it is given on stdin is typed at it.
    const atTerminal = (answer: string): Promise<RunResult> => {
      const command = `${process.execPath} --import tsx src/cli/main.ts clear jobs`;
      const child = spawn('script', ['-qec', command, '/dev/null'], {
        cwd: ROOT,
        env: { ...process.env, KVMQ_STORE: store },
      });
      let stdout = '';
      child.stdout.setEncoding('utf8').on('data', (text: string) => (stdout += text));
      child.stdin.end(`${answer}\n`);
      return new Promise((resolve) =>
        child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr: '' })),
      );
    };
    const no = await atTerminal('n');
    assert.match(no.stdout, /kvmq: remove 2 messages of jobs for good\? \[y\/N\] /);
    assert.match(no.stdout, /kvmq: nothing cleared/);
    assert.equal(no.code, 1);
    assert.equal((await queueStatus(store, 'jobs')).total, 2);
    const yes = await atTerminal('y');
    assert.match(yes.stdout, /cleared jobs: removed 2 messages/);
    assert.equal(yes.code, 0);
    assert.equal((await queueStatus(store, 'jobs')).total, 0);
  });

  it('says a queue nobody has used is unknown, with the nearest known name', async () => {
    const store = newStore();
    const none = await expectExit(1, ['status', 'jobs'], { store });
    assert.equal(none.stdout, '');
    assert.equal(
      none.stderr,
      "kvmq: unknown queue 'jobs': no messages, configuration or consumers; this store has no queues yet\n",
    );
    await expectExit(0, ['enqueue', 'jobs', 'x', '--id', 'x'], { store });
    await expectExit(0, ['config', 'emails', 'max_deliveries=3'], { store });
    const typo =
      /^kvmq: unknown queue 'jbos': no messages, configuration or consumers \(did you mean 'jobs'\?\); known: emails, jobs$/m;
    for (const args of [
      ['status', 'jbos'],
      ['status', 'jbos', '--id', 'x'],
      ['list', 'jbos'],
      ['show', 'jbos', 'x'],
      ['gc', 'jbos'],
      ['clear', 'jbos'],
      ['retry', 'jbos', '--all-failed'],
      ['remove', 'jbos', 'x'],
    ]) {
      const run = await expectExit(1, args, { store });
      assert.match(run.stderr, typo, args.join(' '));
      assert.equal(run.stdout, '', args.join(' '));
    }
    // Known ones: with messages, with a configuration only, or with a live consumer.
    assert.match((await expectExit(0, ['status', 'jobs'], { store })).stdout, /^queue jobs: 1 message, /);
    assert.match((await expectExit(0, ['status', 'emails'], { store })).stdout, /^queue emails: 0 messages/);
    const worker = start('src/cli/main.ts', ['work', 'waiting', '--exec', 'cat'], { store });
    await waitForConsumer(store, 'waiting');
    worker.child.kill('SIGTERM');
    await worker.result;
  });

  it('rejects usage errors with exit 2 and a hint on stderr', async () => {
    const store = newStore();
    const cases: [args: string[], message: RegExp][] = [
      [['enqueue', 'jobs', 'x', '--bogus'], /^kvmq: unknown option '--bogus'\nTry 'kvmq enqueue --help'/],
      [['enqueue'], /^kvmq: missing argument: <queue>/],
      [['enqueue', 'jobs', 'x', '--delay-ms', 'soon'], /^kvmq: --delay-ms must be a duration .* such as 500ms, 30s/],
      [['work', 'jobs'], /^kvmq: missing --exec/],
      [['work', 'jobs', '--exec', 'cat', '--timeout', '0'], /^kvmq: --timeout must be a duration of at least 1 ms/],
      [['frobnicate'], /^kvmq: unknown command 'frobnicate'\nTry 'kvmq --help'/],
      [['stauts', 'jobs'], /^kvmq: unknown command 'stauts' \(did you mean 'status'\?\)\n/],
      [['help', 'lsit'], /^kvmq: unknown command 'lsit' \(did you mean 'list'\?\)\n/],
      [['list', 'jobs', '--limt', '5'], /^kvmq: unknown option '--limt' \(did you mean '--limit'\?\)\nTry 'kvmq list/],
      [
        ['work', 'jobs', '--exec', 'cat', '--idle-exit', '1s'],
        /unknown option '--idle-exit' \(did you mean '--idle-exit-ms'\?\)/,
      ],
      [
        ['config', 'jobs', 'gc_lifetme_ms=1'],
        /^kvmq: unknown setting 'gc_lifetme_ms' \(did you mean 'gc_lifetime_ms'\?\)/,
      ],
      [['list', 'jobs', '--bogus'], /^kvmq: unknown option '--bogus'\nTry/],
      [[], /^Usage: kvmq <command>/],
    ];
    await Promise.all(
      cases.map(async ([args, message]) => {
        const run = await expectExit(2, args, { store });
        assert.equal(run.stdout, '');
        assert.match(run.stderr, message);
      }),
    );
  });

  it('takes durations with units wherever an option takes a time', async () => {
    const store = newStore();
    const before = Date.now();
    await expectExit(0, ['enqueue', 'later', 'x', '--id', 'd', '--delay-ms', '10m', '--backoff-ms', '2s'], { store });
    const until = Number((await statusOf(store, 'later', 'd')).until);
    assert.ok(until >= before + 600_000 && until <= Date.now() + 600_000, `until ${until}`);
    await expectExit(0, ['enqueue', 'now', 'y', '--timeout', '1m'], { store });
    const run = await expectExit(
      0,
      ['work', 'now', '--idle-exit-ms', '300ms', '--lock-ms', '5s', '--timeout', '30s', '--exec', 'cat'],
      { store },
    );
    assert.equal(run.stdout, 'y');
    await expectExit(3, ['wait', 'later', 'd', '--timeout', '250ms'], { store });
    await expectExit(0, ['config', 'later', 'gc_lifetime_ms=1d', 'gc_interval_ms=1h30m'], { store });
    const config = JSON.parse((await expectExit(0, ['config', 'later', '--json'], { store })).stdout) as {
      gcLifetimeMs: number;
      gcIntervalMs: number;
    };
    assert.deepEqual([config.gcLifetimeMs, config.gcIntervalMs], [86_400_000, 5_400_000]);
  });

  it('reports a bad store URL with exit 1 and the accepted forms', async () => {
    const run = await expectExit(1, ['status', 'jobs'], { store: 'mongodb://localhost' });
    assert.match(run.stderr, /^kvmq: unknown store URL "mongodb:\/\/localhost"; accepted forms:\n\s+sqlite:PATH/);
    assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack trace');
    // --store wins over $KVMQ_STORE.
    const flag = await expectExit(1, ['status', 'jobs', '--store', 'nope:x'], { store: newStore() });
    assert.match(flag.stderr, /unknown store URL "nope:x"/);
  });

  it('prints help and the version', async () => {
    const store = newStore();
    const [help, enqueueHelp, flowHelp, version] = await Promise.all([
      expectExit(0, ['--help'], { store }),
      expectExit(0, ['enqueue', '--help'], { store }),
      expectExit(0, ['flow', '--help'], { store }),
      expectExit(0, ['--version'], { store }),
    ]);
    assert.match(help.stdout, /Commands:\n\s+enqueue/);
    assert.match(help.stdout, /^\s+flow\s+write a flow .* or show one's tree/m);
    assert.match(enqueueHelp.stdout, /^Usage: kvmq enqueue <queue> \[payload\]/);
    assert.match(flowHelp.stdout, /^Usage: kvmq flow add \[file\]\n\s+kvmq flow show <queue> <id>\n/);
    assert.match(flowHelp.stdout, /\{"base64": "..."\} for bytes/);
    const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    assert.equal(version.stdout, `${pkg.version}\n`);
  });

  it('runs the demo to the end: all 10,000 messages done', async () => {
    const run = await start('src/demo.ts', [], { store: newStore() }).result;
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /^queue demo: 10,000 messages \(done-awaiting-gc 10,000\)$/m);
    assert.match(run.stderr, /^work: 50% /m, 'a progress line every 10% when stderr is not a terminal');
  });
});
