/**
 * `kvmq flow add` on SQLite, as a subprocess: a tree written from a file or stdin and run to completion, parents
 * after their children; dependsOn on a message already enqueued; refusals (exit 3) and mistakes (exit 2), with
 * nothing written.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { cliDir, expectExit, newStore } from './support/cli.js';
import { connect } from '../src/index.js';
import { FLOW_MAX_NODES } from '../src/model/flow.js';

// Each message's id and its stdin, one line per run: the order the worker ran them in.
const ECHO = 'printf "%s %s\\n" "$KVMQ_ID" "$(cat)"';

let files = 0;

/** A file in the test's temp dir holding `text`. */
async function fileWith(text: string): Promise<string> {
  files += 1;
  const path = join(cliDir(), `flow-${files}.json`);
  await writeFile(path, text);
  return path;
}

/** The ids of `kvmq work`'s ECHO lines, in the order they ran. */
function ranOrder(stdout: string): string[] {
  return stdout
    .trim()
    .split('\n')
    .map((line) => line.split(' ')[0] ?? '');
}

describe('kvmq flow add', { concurrency: 4 }, () => {
  it('writes a tree from a file, and kvmq work runs each parent after its children', async () => {
    const store = newStore();
    const tree = {
      queue: 'pipeline',
      id: 'deploy',
      payload: { env: 'prod' },
      children: [
        {
          queue: 'pipeline',
          id: 'build',
          payload: 'build it',
          children: [{ queue: 'pipeline', id: 'fetch', payload: 7 }],
        },
        {
          queue: 'pipeline',
          id: 'test',
          payload: { base64: Buffer.from('bytes\x00!').toString('base64') },
          priority: 3,
        },
      ],
    };
    const file = await fileWith(JSON.stringify(tree, null, 2));
    const added = await expectExit(0, ['flow', 'add', file], { store });
    assert.equal(added.stdout, 'pipeline/deploy\npipeline/build\npipeline/fetch\npipeline/test\n');
    assert.equal(added.stderr, '');
    assert.equal(
      (await expectExit(0, ['flow', 'show', 'pipeline', 'fetch'], { store })).stdout,
      'pipeline/deploy waiting-children\n  pipeline/build waiting-children\n    pipeline/fetch queued\n' +
        '  pipeline/test queued\n',
    );

    const work = await expectExit(0, ['work', 'pipeline', '--exec', ECHO, '--idle-exit-ms', '1s'], { store });
    const order = ranOrder(work.stdout);
    assert.deepEqual([...order].sort(), ['build', 'deploy', 'fetch', 'test']);
    assert.ok(order.indexOf('fetch') < order.indexOf('build'), `build ran before its child: ${order.join(' ')}`);
    assert.ok(order.indexOf('build') < order.indexOf('deploy'), `deploy ran before build: ${order.join(' ')}`);
    assert.ok(order.indexOf('test') < order.indexOf('deploy'), `deploy ran before test: ${order.join(' ')}`);
    // JSON payloads reach the command as `kvmq work` gives any: a string as its text, other values as JSON.
    assert.match(work.stdout, /^deploy \{"env":"prod"\}$/m);
    assert.match(work.stdout, /^build build it$/m);
    assert.match(work.stdout, /^fetch 7$/m);
    const test = JSON.parse((await expectExit(0, ['show', 'pipeline', 'test', '--json'], { store })).stdout) as {
      payload: unknown;
      priority: number;
    };
    assert.deepEqual(test.payload, { base64: Buffer.from('bytes\x00!').toString('base64') }, 'bytes, as given');
    assert.equal(test.priority, 3);
  });

  it('writes from stdin with dependsOn on a message already enqueued, and a worker reads its outcome', async () => {
    const store = newStore();
    await expectExit(0, ['enqueue', 'import', 'rows.csv', '--id', 'imp1'], { store });
    const tree = {
      queue: 'notify',
      id: 'n1',
      payload: 'imported',
      runAt: '2020-01-02T03:04:05Z',
      dependsOn: [{ queue: 'import', id: 'imp1' }],
    };
    const added = await expectExit(0, ['flow', 'add', '--json'], { store, input: JSON.stringify(tree) });
    assert.deepEqual(JSON.parse(added.stdout), { queue: 'notify', id: 'n1', children: [] });
    assert.equal(
      (await expectExit(0, ['flow', 'show', 'import', 'imp1'], { store })).stdout,
      'notify/n1 waiting-children\n  import/imp1 queued\n',
    );
    // The parent waits: a worker of its queue finds nothing to do.
    const idle = await expectExit(0, ['work', 'notify', '--exec', ECHO, '--idle-exit-ms', '300ms'], { store });
    assert.equal(idle.stdout, '');
    await expectExit(0, ['work', 'import', '--exec', 'cat', '--result-stdout', '--idle-exit-ms', '300ms'], {
      store,
    });

    const client = await connect(store, { maintenance: false });
    try {
      const seen = new Promise<unknown[]>((resolve) => {
        const worker = client.worker('notify', async (job) => {
          const children = await job.children();
          resolve(children.map((child) => [child.queue, child.id, child.outcome]));
          void worker.stop();
          return { status: 'success' };
        });
      });
      assert.deepEqual(await seen, [['import', 'imp1', 'success']]);
    } finally {
      await client.close();
    }
  });

  it('refuses a flow whose id exists or whose dependency cannot be taken: exit 3, the reason, nothing written', async () => {
    const store = newStore();
    await expectExit(0, ['enqueue', 'jobs', 'x', '--id', 'taken'], { store });
    await expectExit(0, ['enqueue', 'jobs', 'x', '--id', 'dep'], { store });
    await expectExit(0, ['flow', 'add', '-'], {
      store,
      input: JSON.stringify({ queue: 'jobs', id: 'owner', payload: 1, dependsOn: [{ queue: 'jobs', id: 'dep' }] }),
    });
    const cases: [tree: object, reason: RegExp][] = [
      [
        { queue: 'jobs', id: 'new1', payload: 1, children: [{ queue: 'jobs', id: 'taken', payload: 2 }] },
        /^kvmq: flow not written: message 'taken' of queue 'jobs' exists \(queued\)\n$/,
      ],
      [
        { queue: 'jobs', id: 'new2', payload: 1, dependsOn: [{ queue: 'jobs', id: 'ghost' }] },
        /^kvmq: flow not written: message 'ghost' of queue 'jobs' is named in dependsOn but does not exist \(none\)\n$/,
      ],
      [
        { queue: 'jobs', id: 'new3', payload: 1, dependsOn: [{ queue: 'jobs', id: 'dep' }] },
        /^kvmq: flow not written: message 'dep' of queue 'jobs' is named in dependsOn but already has a parent/,
      ],
    ];
    for (const [tree, reason] of cases) {
      const run = await expectExit(3, ['flow', 'add'], { store, input: JSON.stringify(tree) });
      assert.equal(run.stdout, '');
      assert.match(run.stderr, reason);
    }
    for (const id of ['new1', 'new2', 'new3']) {
      assert.match((await expectExit(1, ['status', 'jobs', '--id', id], { store })).stderr, /not found/);
    }
  });

  it('refuses each mistake in the input with one line, exit 2, and writes nothing', async () => {
    const store = newStore();
    const node = (id: string, extra: object = {}): object => ({ queue: 'jobs', id, payload: id, ...extra });
    const tooMany = { ...node('big'), children: Array.from({ length: FLOW_MAX_NODES }, (_, i) => node(`c${i}`)) };
    const trees: [tree: unknown, message: RegExp][] = [
      [
        node('r', { children: [node('a', { prio: 1 })] }),
        /^kvmq: flow node children\[0\]: unknown option 'prio'; known options are /,
      ],
      [node('r', { lifo: true }), /^kvmq: flow node the root: unknown option 'lifo'/],
      [
        node('r', { priority: 'high' }),
        /^kvmq: flow node the root: priority must be a whole number from 0 .* got high$/m,
      ],
      [
        node('r', { children: [node('a'), node('b', { timeoutMs: '30s' })] }),
        /^kvmq: flow node children\[1\]: timeoutMs must be a whole number of milliseconds/,
      ],
      [node('r', { children: {} }), /^kvmq: flow node the root: children must be an array of flow nodes$/m],
      [node('r', { runAt: 'tomorrow' }), /^kvmq: flow node the root: runAt must be an ISO 8601 time/],
      [node('r', { onChildFailure: 'ignore' }), /^kvmq: flow node the root: onChildFailure is a child's option/],
      [
        node('r', { children: [node('a'), { queue: 'jobs' }] }),
        /^kvmq: flow node children\[1\] has no payload: give a JSON value, or \{"base64": "..."\} for bytes$/m,
      ],
      [node('r', { payload: { base64: 'not base64!' } }), /^kvmq: flow node the root: payload.base64 must be a string/],
      [
        node('r', { children: [node('a'), node('a')] }),
        /^kvmq: a flow names one message \(queue and id\) twice: the node jobs\/a$/m,
      ],
      [
        node('r', { children: [node('a', { dependsOn: [{ queue: 'jobs', id: 'r' }] })] }),
        /^kvmq: a flow names one message \(queue and id\) twice: the dependency jobs\/r$/m,
      ],
      [tooMany, new RegExp(`^kvmq: a flow has at most ${FLOW_MAX_NODES} nodes`)],
      [{ queue: 'no queue', payload: 1 }, /^kvmq: flow node the root: queue name "no queue" is invalid/],
    ];
    const runs: [args: string[], input: string, message: RegExp][] = trees.map(([tree, message]) => [
      ['flow', 'add'],
      JSON.stringify(tree),
      message,
    ]);
    const badJson = await fileWith('{\n  "queue": "jobs",\n  "payload": 1\n  "id": "x"\n}\n');
    runs.push(
      [
        ['flow', 'add', badJson],
        '',
        /^kvmq: .*flow-\d+\.json is not valid JSON: Expected ',' or '}' after property value at line 4 column 3$/m,
      ],
      [
        ['flow', 'add', '-'],
        '{"queue": "jobs", "payload": }',
        /^kvmq: stdin is not valid JSON: Unexpected token '}' at line 1 column 30$/m,
      ],
      [['flow', 'add'], '', /^kvmq: stdin is not valid JSON: Unexpected end of JSON input at line 1 column 1$/m],
      [['flow', 'add', join(cliDir(), 'missing.json')], '', /^kvmq: cannot read .*missing\.json: no such file$/m],
      [['flow', 'add', 'a.json', 'b.json'], '', /^kvmq: unexpected argument 'b.json' \(expected \[file\]\)$/m],
      [['flow'], '', /^kvmq: missing subcommand: add or show$/m],
    );
    for (const [args, input, message] of runs) {
      const run = await expectExit(2, args, { store, input });
      assert.equal(run.stdout, '');
      assert.match(run.stderr, message);
      // The mistake in one line, then the pointer to the help.
      assert.match(run.stderr, /^kvmq: [^\n]+\nTry 'kvmq flow --help' for usage\.\n$/);
    }
    assert.match((await expectExit(1, ['status', 'jobs'], { store })).stderr, /unknown queue 'jobs'/);
  });

  it('refuses a filter the queue does not declare as kvmq enqueue does (exit 1), and takes one it does', async () => {
    const store = newStore();
    const tree = { queue: 'jobs', id: 'r', payload: 1, filters: { size: 'big' } };
    const refused = await expectExit(1, ['flow', 'add'], { store, input: JSON.stringify(tree) });
    assert.match(refused.stderr, /^kvmq: queue 'jobs' has no filter 'size'/);
    assert.equal(
      (await expectExit(1, ['enqueue', 'jobs', 'x', '--filter', 'size=big'], { store })).stderr,
      refused.stderr,
    );
    await expectExit(0, ['config', 'jobs', 'filter.size=small,big'], { store });
    assert.equal((await expectExit(0, ['flow', 'add'], { store, input: JSON.stringify(tree) })).stdout, 'jobs/r\n');
  });
});
