/** `kvmq events`, `kvmq wait` and the events keys of `kvmq config`, run as subprocesses on SQLite files. */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, it } from 'node:test';
import { connect } from '../src/index.js';
import { expectExit, newStore, ROOT, start, waitFor } from './support/cli.js';
import { storeOf } from '../src/client/client-store.js';

describe('kvmq events, wait and the events settings', { concurrency: 3 }, () => {
  it('config sets and shows events, events_max_count and events_max_age_ms', async () => {
    const store = newStore();
    const set = await expectExit(0, ['config', 'q', 'events=true', 'events_max_count=50', 'events_max_age_ms=60000'], {
      store,
    });
    assert.match(set.stdout, /^events=true$/m);
    assert.match(set.stdout, /^events_max_count=50$/m);
    assert.match(set.stdout, /^events_max_age_ms=60000$/m);
    const json = await expectExit(0, ['config', 'q', '--json'], { store });
    const config = JSON.parse(json.stdout) as { events: boolean; eventsMaxCount: number; eventsMaxAgeMs: number };
    assert.deepEqual([config.events, config.eventsMaxCount, config.eventsMaxAgeMs], [true, 50, 60_000]);

    const bad = await expectExit(2, ['config', 'q', 'events=yes'], { store });
    assert.match(bad.stderr, /events must be true or false, got 'yes'/);
    assert.match((await expectExit(2, ['config', 'q', 'events_max_count=0'], { store })).stderr, /at least 1/);
  });

  it("events prints a completed event's result, as a line and as JSON (bytes in base64)", async () => {
    const store = newStore();
    await expectExit(0, ['config', 'jobs', 'events=true'], { store });
    await expectExit(0, ['enqueue', 'jobs', 'first', '--id', 'm1'], { store });
    await expectExit(0, ['work', 'jobs', '--exec', 'printf forty-two', '--result-stdout', '--max', '1'], { store });
    const text = start('src/cli/main.ts', ['events', 'jobs', '--from', 'start'], { store });
    const json = start('src/cli/main.ts', ['events', 'jobs', '--from', 'start', '--json'], { store });
    await waitFor(() => text.stdout().includes('completed') && json.stdout().includes('completed'), 'the events');
    text.child.kill('SIGINT');
    json.child.kill('SIGTERM');
    const [textRun, jsonRun] = await Promise.all([text.result, json.result]);
    const line = textRun.stdout.trim().split('\n').at(-1) ?? '';
    assert.match(line, /\bcompleted\s+m1\s+attempt 1\s+result 9 bytes: "forty-two"$/);
    const completed = jsonRun.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; result?: unknown })
      .find((e) => e.type === 'completed');
    assert.deepEqual(completed?.result, { base64: Buffer.from('forty-two').toString('base64') });
  });

  it('events prints transitions live, as lines and as JSON, and SIGINT ends it with 0', async () => {
    const store = newStore();
    await expectExit(0, ['config', 'jobs', 'events=true'], { store });
    await expectExit(0, ['enqueue', 'jobs', 'first', '--id', 'm1'], { store });
    const text = start('src/cli/main.ts', ['events', 'jobs', '--from', 'start'], { store });
    const json = start('src/cli/main.ts', ['events', 'jobs', '--from', 'start', '--json'], { store });
    await waitFor(() => text.stdout().includes('m1') && json.stdout().includes('m1'), 'the first event');

    // A worker in another process: the readers see its transitions as they happen.
    await expectExit(0, ['work', 'jobs', '--exec', 'true', '--max', '1'], { store });
    await waitFor(() => json.stdout().includes('"completed"'), 'the completed event');
    await waitFor(() => text.stdout().includes('completed'), 'the completed line');
    text.child.kill('SIGINT');
    json.child.kill('SIGTERM');
    const [textRun, jsonRun] = await Promise.all([text.result, json.result]);
    assert.equal(textRun.code, 0, textRun.stderr);
    assert.equal(jsonRun.code, 0, jsonRun.stderr);

    const lines = textRun.stdout.trim().split('\n');
    assert.equal(lines.length, 3);
    assert.match(lines[0] ?? '', /^\d{4}-\d\d-\d\dT[\d:.]+Z\s+enqueued\s+m1\s+attempt 0$/);
    assert.match(lines[1] ?? '', /\bstarted\s+m1\s+attempt 1$/);
    assert.match(lines[2] ?? '', /\bcompleted\s+m1\s+attempt 1$/);
    const events = jsonRun.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { type: string; id: string; attempt: number; cursor: string });
    assert.deepEqual(
      events.map((e) => [e.type, e.id, e.attempt]),
      [
        ['enqueued', 'm1', 0],
        ['started', 'm1', 1],
        ['completed', 'm1', 1],
      ],
    );

    // --from a cursor reads on after it.
    const from = events[1]?.cursor ?? '';
    const after = start('src/cli/main.ts', ['events', 'jobs', '--from', from, '--json'], { store });
    await waitFor(() => after.stdout().includes('completed'), 'the event after the cursor');
    after.child.kill('SIGTERM');
    const afterRun = await after.result;
    assert.equal(afterRun.code, 0);
    assert.deepEqual(
      afterRun.stdout
        .trim()
        .split('\n')
        .map((line) => (JSON.parse(line) as { type: string }).type),
      ['completed'],
    );
    const bad = await expectExit(2, ['events', 'jobs', '--from', 'not-a-cursor'], { store });
    assert.match(bad.stderr, /--from: event cursor "not-a-cursor" is not one this SQLite store made/);
  });

  it('events warns on stderr when it fell behind the retention, and goes on', async () => {
    const store = newStore();
    const client = await connect(store, { maintenance: false });
    try {
      await client.configure('short', { events: true, eventsMaxCount: 2 });
      const behind = await storeOf(client).eventsHead('short');
      for (const id of ['a', 'b', 'c', 'd', 'e']) await client.enqueue('short', 'x', { id });
      await client.gc('short');
      const reader = start('src/cli/main.ts', ['events', 'short', '--from', behind, '--json'], { store });
      await waitFor(() => reader.stdout().includes('"e"'), 'the events kept');
      await client.enqueue('short', 'x', { id: 'f' });
      await waitFor(() => reader.stdout().includes('"f"'), 'a later event');
      reader.child.kill('SIGINT');
      const run = await reader.result;
      assert.equal(run.code, 0);
      assert.match(run.stderr, /missed events of queue 'short'.*going on from the oldest kept/);
      assert.deepEqual(
        run.stdout
          .trim()
          .split('\n')
          .map((line) => (JSON.parse(line) as { id: string }).id),
        ['d', 'e', 'f'],
      );
    } finally {
      await client.close();
    }
  });

  it('events piped into head ends quietly, exit 0, at its next event', async () => {
    const store = newStore();
    const client = await connect(store, { maintenance: false });
    try {
      await client.configure('piped', { events: true });
      await client.enqueue('piped', 'x', { id: 'first' });
      const pipeline = spawn(
        'bash',
        ['-o', 'pipefail', '-c', 'node --import tsx src/cli/main.ts events piped --from start | head -1'],
        {
          cwd: ROOT,
          env: { ...process.env, KVMQ_STORE: store },
        },
      );
      let stdout = '';
      let stderr = '';
      pipeline.stdout.setEncoding('utf8').on('data', (text: string) => (stdout += text));
      pipeline.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
      const exit = new Promise<number | null>((resolve) => pipeline.on('close', (code) => resolve(code)));
      let done = false;
      void exit.then(() => (done = true));
      await waitFor(() => stdout.includes('first'), 'the first line');
      // The reader learns that head is gone when it writes the next event.
      for (let n = 0; !done; n++) {
        await client.enqueue('piped', 'x', { id: `more-${n}` });
        await new Promise((resolve) => setTimeout(resolve, 50));
        if (n > 400) pipeline.kill('SIGKILL');
      }
      assert.equal(await exit, 0, stderr);
      assert.equal(stderr, '');
      assert.equal(stdout.trim().split('\n').length, 1);
    } finally {
      await client.close();
    }
  });

  it('wait exits 0 completed, 1 failed, 3 on timeout, 4 when the message is not there', async () => {
    const store = newStore();
    await expectExit(0, ['enqueue', 'w', 'ok', '--id', 'good'], { store });
    await expectExit(0, ['enqueue', 'w', 'bad', '--id', 'bad'], { store });
    await expectExit(0, ['enqueue', 'w', 'later', '--id', 'later', '--delay-ms', '60000'], { store });
    const waiting = start('src/cli/main.ts', ['wait', 'w', 'good', '--timeout', '20000'], { store });
    await expectExit(1, ['work', 'w', '--exec', 'test "$(cat)" = ok', '--max', '2', '--max-attempts', '1'], { store });
    const good = await waiting.result;
    assert.equal(good.code, 0, good.stderr);
    assert.match(good.stdout, /^completed good attempt 1$/m);
    const bad = await expectExit(1, ['wait', 'w', 'bad', '--json'], { store });
    assert.equal((JSON.parse(bad.stdout) as { outcome: string }).outcome, 'failed');
    const late = await expectExit(3, ['wait', 'w', 'later', '--timeout', '100'], { store });
    assert.match(late.stderr, /did not complete or fail within 100 ms/);
    const gone = await expectExit(4, ['wait', 'w', 'never'], { store });
    assert.match(gone.stderr, /not in queue 'w'/);
    await expectExit(2, ['wait', 'w'], { store });
    await expectExit(2, ['wait', 'w', 'good', '--timeout', 'soon'], { store });
  });
});
