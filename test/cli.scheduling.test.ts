/**
 * `kvmq enqueue`'s scheduling flags (priority, run-at, group, debounce) and
 * `kvmq config`'s rate_limit and group_concurrency, run as a subprocess on a
 * temporary SQLite file: what a user sees, and that a bad value writes nothing.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { expectExit, newStore } from './support/cli.js';

async function showJson(store: string, queue: string, id: string): Promise<Record<string, unknown>> {
  const { stdout } = await expectExit(0, ['show', queue, id, '--json'], { store });
  return JSON.parse(stdout) as Record<string, unknown>;
}

async function total(store: string, queue: string): Promise<number> {
  const { stdout } = await expectExit(0, ['status', queue, '--json'], { store });
  return (JSON.parse(stdout) as { total: number }).total;
}

async function configJson(store: string, queue: string): Promise<Record<string, unknown>> {
  const { stdout } = await expectExit(0, ['config', queue, '--json'], { store });
  return JSON.parse(stdout) as Record<string, unknown>;
}

describe('kvmq CLI scheduling', { concurrency: 4 }, () => {
  it('lists the scheduling flags and settings in help', async () => {
    const store = newStore();
    const enqueueHelp = await expectExit(0, ['enqueue', '--help'], { store });
    for (const flag of ['--priority N', '--run-at TIME', '--group NAME', '--debounce ID', '--debounce-ms T']) {
      assert.ok(enqueueHelp.stdout.includes(flag), `enqueue --help shows ${flag}`);
    }
    const configHelp = await expectExit(0, ['config', '--help'], { store });
    assert.match(configHelp.stdout, /rate_limit=MAX\/PERIOD/);
    assert.match(configHelp.stdout, /group_concurrency=N/);
  });

  it('stores priority and group, shows them, and runs the lower priority number first', async () => {
    const store = newStore();
    await expectExit(0, ['enqueue', 'jobs', 'late', '--id', 'late', '--priority', '7', '--group', 'tenant-a'], {
      store,
    });
    await expectExit(0, ['enqueue', 'jobs', 'plain', '--id', 'plain'], { store });
    await expectExit(0, ['enqueue', 'jobs', 'last', '--id', 'last', '--priority', '1000'], { store });

    const text = await expectExit(0, ['show', 'jobs', 'late'], { store });
    assert.match(text.stdout, /^priority\s+7$/m);
    assert.match(text.stdout, /^group\s+tenant-a$/m);
    const plainText = await expectExit(0, ['show', 'jobs', 'plain'], { store });
    assert.match(plainText.stdout, /^priority\s+0$/m);
    assert.match(plainText.stdout, /^group\s+-$/m);
    const late = await showJson(store, 'jobs', 'late');
    assert.equal(late.priority, 7);
    assert.equal(late.group, 'tenant-a');
    const plain = await showJson(store, 'jobs', 'plain');
    assert.equal(plain.priority, 0);
    assert.equal(plain.group, null);

    const run = await expectExit(0, ['work', 'jobs', '--max', '3', '--exec', 'cat; echo'], { store });
    assert.equal(run.stdout, 'plain\nlate\nlast\n');
  });

  it('keeps a message back until --run-at, given as ISO 8601 or ms since the epoch', async () => {
    const store = newStore();
    const future = new Date(Date.now() + 3_600_000);
    await expectExit(0, ['enqueue', 'later', 'a', '--id', 'iso', '--run-at', future.toISOString()], { store });
    await expectExit(0, ['enqueue', 'later', 'b', '--id', 'ms', '--run-at', String(future.getTime())], { store });
    await expectExit(0, ['enqueue', 'later', 'c', '--id', 'past', '--run-at', '2001-02-03T04:05:06Z'], { store });
    for (const id of ['iso', 'ms']) {
      const shown = await showJson(store, 'later', id);
      assert.equal(shown.state, 'queued-with-backoff', id);
      // The client turns runAt into a delay from its own clock: the ready time is within a few seconds of it.
      assert.ok(Math.abs(Number(shown.until) - future.getTime()) < 5_000, `${id}: ${String(shown.until)}`);
    }
    assert.equal((await showJson(store, 'later', 'past')).state, 'queued');
    const run = await expectExit(0, ['work', 'later', '--idle-exit-ms', '300', '--exec', 'cat; echo'], { store });
    assert.equal(run.stdout, 'c\n', 'only the message whose time has come runs');
  });

  it('--expire-after gives a time to live: a message not started within it fails as expired', async () => {
    const store = newStore();
    const before = Date.now();
    await expectExit(0, ['enqueue', 'ttl', 'a', '--id', 'kept', '--expire-after', '1h'], { store });
    await expectExit(0, ['enqueue', 'ttl', 'b', '--id', 'short', '--expire-after', '200ms'], { store });
    const kept = (await showJson(store, 'ttl', 'kept')).policy as { expireAt: number };
    assert.ok(kept.expireAt >= before + 3_600_000 && kept.expireAt <= Date.now() + 3_600_000, 'the deadline is kept');
    await new Promise((resolve) => setTimeout(resolve, 300));
    const run = await expectExit(0, ['work', 'ttl', '--idle-exit-ms', '300', '--exec', 'cat; echo'], { store });
    assert.equal(run.stdout, 'a\n', 'the expired message does not run');
    const short = await showJson(store, 'ttl', 'short');
    assert.equal(short.state, 'failed');
    assert.equal(short.lastError, 'expired');
    for (const bad of ['0', 'soon', '-5s']) {
      await expectExit(2, ['enqueue', 'ttl', 'x', '--expire-after', bad], { store });
    }
    const late = await expectExit(1, ['enqueue', 'ttl', 'x', '--expire-after', '1s', '--delay-ms', '5s'], { store });
    assert.match(late.stderr, /expireAfterMs \(1000\) must be longer than the message's delay/);
    assert.equal(await total(store, 'ttl'), 2, 'a refused enqueue writes nothing');
  });

  it('--debounce replaces the waiting message of that id and prints its id', async () => {
    const store = newStore();
    const first = await expectExit(
      0,
      ['enqueue', 'deb', 'one', '--id', 'first', '--debounce', 'user-7', '--debounce-ms', '60000'],
      { store },
    );
    assert.equal(first.stdout, 'first\n');
    const second = await expectExit(
      0,
      ['enqueue', 'deb', 'two', '--debounce', 'user-7', '--debounce-ms', '60000', '--json'],
      { store },
    );
    assert.deepEqual(JSON.parse(second.stdout), { id: 'first', ok: true, action: 'debounced' });
    const other = await expectExit(0, ['enqueue', 'deb', 'x', '--debounce', 'user-8', '--debounce-ms', '60000'], {
      store,
    });
    assert.notEqual(other.stdout, 'first\n', 'another debounce id is a message of its own');
    assert.equal(await total(store, 'deb'), 2);
    const shown = await expectExit(0, ['show', 'deb', 'first'], { store });
    assert.match(shown.stdout, /^payload\s+3 bytes: "two"$/m);
    assert.match(shown.stdout, /^state\s+queued-with-backoff$/m);
  });

  it('refuses bad scheduling flags with exit 2, says what is allowed and writes nothing', async () => {
    const store = newStore();
    const cases: [args: string[], allowed: RegExp][] = [
      [['--priority=-1'], /--priority must be a whole number from 0 \(runs first, the default\) to 1000/],
      [['--priority', '1001'], /priority must be a whole number from 0 .* to 1000/],
      [['--priority', '2.5'], /--priority must be a whole number/],
      [['--run-at', 'tomorrow'], /--run-at must be an ISO 8601 time like .* or ms since the epoch/],
      [['--run-at', '2030-13-45T00:00:00Z'], /--run-at must be an ISO 8601 time/],
      [['--group', 'a b'], /group "a b" is invalid: use 1-64 letters, digits/],
      [['--debounce', 'd1'], /--debounce ID and --debounce-ms MS go together/],
      [['--debounce-ms', '10'], /--debounce ID and --debounce-ms MS go together/],
      [['--debounce', 'bad id', '--debounce-ms', '10'], /debounce id "bad id" is invalid/],
      [
        ['--debounce', 'd1', '--debounce-ms', 'soon'],
        /--debounce-ms must be a duration of at least 0 ms such as 500ms/,
      ],
      [['--delay-ms', '10', '--run-at', '0'], /give at most one of --delay-ms, --run-at and --debounce/],
      [['--lifo', '--delay-ms', '10'], /--lifo is for a message ready at once, not with --delay-ms/],
      [
        ['--run-at', '0', '--debounce', 'd', '--debounce-ms', '1'],
        /give at most one of .*, not --run-at and --debounce/,
      ],
    ];
    for (const [args, allowed] of cases) {
      const result = await expectExit(2, ['enqueue', 'bad', 'x', ...args], { store });
      assert.equal(result.stdout, '');
      assert.match(result.stderr, allowed, args.join(' '));
      assert.match(result.stderr, /^kvmq: .*\nTry 'kvmq enqueue --help' for usage\.\n$/, args.join(' '));
    }
    // Nothing written: the queue is not even known.
    assert.match((await expectExit(1, ['status', 'bad'], { store })).stderr, /^kvmq: unknown queue 'bad'/);
  });

  it('--lifo runs a message before the waiting ones, and --file --lifo the last line first', async () => {
    const store = newStore();
    await expectExit(0, ['enqueue', 'jobs', 'first', '--id', 'first'], { store });
    await expectExit(0, ['enqueue', 'jobs', 'urgent', '--id', 'urgent', '--lifo'], { store });
    await expectExit(0, ['enqueue', 'jobs', '--file', '-', '--lifo'], { store, input: 'line-1\nline-2\n' });
    const run = await expectExit(0, ['work', 'jobs', '--max', '4', '--exec', 'cat; echo'], { store });
    assert.equal(run.stdout, 'line-2\nline-1\nurgent\nfirst\n');
  });

  it('sets, shows and removes group_rate_limit, and says what a bad one should look like', async () => {
    const store = newStore();
    assert.match((await expectExit(0, ['config', 'grl'], { store })).stdout, /^group_rate_limit=none$/m);
    const set = await expectExit(0, ['config', 'grl', 'group_rate_limit=2/1s'], { store });
    assert.match(set.stdout, /^group_rate_limit=2\/1s$/m);
    assert.deepEqual((await configJson(store, 'grl')).groupRateLimit, { max: 2, perMs: 1000 });
    const bad = await expectExit(2, ['config', 'grl', 'group_rate_limit=0/1s'], { store });
    assert.match(bad.stderr, /^kvmq: group_rate_limit must look like MAX\/PERIOD/);
    const removed = await expectExit(0, ['config', 'grl', 'group_rate_limit=none'], { store });
    assert.match(removed.stdout, /^group_rate_limit=none$/m);
  });

  it('sets, shows and removes rate_limit and group_concurrency', async () => {
    const store = newStore();
    const defaults = await expectExit(0, ['config', 'lim'], { store });
    assert.match(defaults.stdout, /^rate_limit=none$/m);
    assert.match(defaults.stdout, /^group_concurrency=none$/m);

    const set = await expectExit(0, ['config', 'lim', 'rate_limit=100/1s', 'group_concurrency=3'], { store });
    assert.match(set.stdout, /^rate_limit=100\/1s$/m);
    assert.match(set.stdout, /^group_concurrency=3$/m);
    const json = await configJson(store, 'lim');
    assert.deepEqual(json.rateLimit, { max: 100, perMs: 1000 });
    assert.equal(json.groupConcurrency, 3);

    // Each unit, and the shortest spelling back.
    for (const [given, shown, perMs] of [
      ['5/250ms', '5/250ms', 250],
      ['1000/m', '1000/1m', 60_000],
      ['7/90s', '7/90s', 90_000],
      ['2/2h', '2/2h', 7_200_000],
      ['3/1000ms', '3/1s', 1000],
      // The period is a duration as everywhere in the CLI: days, compounds and bare milliseconds.
      ['50000/1d', '50000/1d', 86_400_000],
      ['4/24h', '4/1d', 86_400_000],
      ['10/1h30m', '10/90m', 5_400_000],
      ['6/1500', '6/1500ms', 1500],
    ] as const) {
      const out = await expectExit(0, ['config', 'lim', `rate_limit=${given}`], { store });
      assert.match(out.stdout, new RegExp(`^rate_limit=${shown}$`, 'm'), given);
      assert.equal(((await configJson(store, 'lim')).rateLimit as { perMs: number }).perMs, perMs, given);
    }

    // What `kvmq config` prints, it takes back: copying a queue's settings keeps the limits.
    const source = (await expectExit(0, ['config', 'lim'], { store })).stdout.trim().split('\n');
    const copied = await expectExit(0, ['config', 'copy', ...source], { store });
    assert.equal(copied.stdout.trim(), source.join('\n'));

    const removed = await expectExit(0, ['config', 'lim', 'rate_limit=none', 'group_concurrency=none'], { store });
    assert.match(removed.stdout, /^rate_limit=none$/m);
    assert.match(removed.stdout, /^group_concurrency=none$/m);
    const after = await configJson(store, 'lim');
    assert.equal(after.rateLimit, null);
    assert.equal(after.groupConcurrency, null);
  });

  it('refuses bad rate_limit and group_concurrency values with exit 2 and keeps the configuration', async () => {
    const store = newStore();
    await expectExit(0, ['config', 'keep', 'rate_limit=10/1s', 'group_concurrency=2'], { store });
    const before = await configJson(store, 'keep');
    const cases: [setting: string, allowed: RegExp][] = [
      [
        'rate_limit=0/1s',
        /rate_limit must look like MAX\/PERIOD with MAX from 1 to 1000000 and PERIOD a duration like 1s/,
      ],
      ['rate_limit=100/0s', /rate_limit must look like MAX\/PERIOD/],
      ['rate_limit=100', /rate_limit must look like MAX\/PERIOD/],
      ['rate_limit=100/1w', /PERIOD a duration like 1s, 250ms, 1m, 1h or 1d/],
      ['rate_limit=100/', /rate_limit must look like MAX\/PERIOD/],
      ['rate_limit=/1s', /rate_limit must look like MAX\/PERIOD/],
      ['rate_limit=-1/1s', /rate_limit must look like MAX\/PERIOD/],
      ['rate_limit=1000001/1s', /MAX from 1 to 1000000/],
      ['group_concurrency=0', /group_concurrency must be a whole number from 1 to 100000, or none/],
      ['group_concurrency=-1', /group_concurrency must be a whole number from 1 to 100000, or none/],
      ['group_concurrency=many', /group_concurrency must be a whole number/],
    ];
    for (const [setting, allowed] of cases) {
      // A good setting beside the bad one is not written either.
      const result = await expectExit(2, ['config', 'keep', 'paused=true', setting], { store });
      assert.equal(result.stdout, '');
      assert.match(result.stderr, allowed, setting);
      assert.match(result.stderr, /^kvmq: [^\n]+\nTry 'kvmq config --help' for usage\.\n$/, setting);
    }
    assert.deepEqual(await configJson(store, 'keep'), before);
  });

  it('a rate-limited queue hands out no more than its limit', async () => {
    const store = newStore();
    await expectExit(0, ['config', 'slow', 'rate_limit=2/1h'], { store });
    for (const id of ['a', 'b', 'c', 'd']) await expectExit(0, ['enqueue', 'slow', id, '--id', id], { store });
    const run = await expectExit(
      0,
      ['work', 'slow', '--concurrency', '4', '--idle-exit-ms', '1000', '--exec', 'echo "$KVMQ_ID"'],
      { store },
    );
    assert.equal(run.stdout.trim().split('\n').length, 2, run.stdout);
    assert.equal((await expectExit(0, ['status', 'slow', '--json'], { store })).stdout.includes('"queued":2'), true);
  });
});
