/**
 * What the dashboard's pages say, over HTTP: a payload as text whichever way it was enqueued (JSON, or the
 * bytes `kvmq enqueue`, curl through the JSON gateway or etcdctl put store), a hex dump only for bytes that
 * are not text, and every count with a noun agreeing with it.
 */
import assert from 'node:assert/strict';
import type { Payload } from '../src/index.js';
import { fetchPage, serveDashboard } from './fixtures/browser.js';
import { tempSqlite } from './fixtures/sqlite-temp.js';
import { storeTest, type Harness } from './support/harness.js';
import { etcdFixture } from './support/stores.js';
import { waitFor } from './support/wait.js';

const sqlite = tempSqlite('dashboard-pages');

function unescape(html: string): string {
  return html
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, '&');
}

/** The message page's payload: what its heading says it is, and the text shown. */
async function shownPayload(h: Harness, base: string, payload: Payload): Promise<{ kind: string; text: string }> {
  const queue = h.queue('payloads');
  const added = await h.client.enqueue(queue, payload);
  const body = await fetchPage(base, `queues/${queue}/messages/${added.id}`);
  const kind = /<h2>Payload <span class="muted">\(([^)]*)\)<\/span><\/h2>/.exec(body)?.[1];
  const text = /<pre class="code payload">([\s\S]*?)<\/pre>/.exec(body)?.[1];
  assert.ok(kind !== undefined && text !== undefined, 'the page shows a payload');
  return { kind, text: unescape(text) };
}

storeTest(sqlite, 'a payload of text bytes shows as text, as a plain etcd put stores it', async (h) => {
  const base = await serveDashboard(h);
  // What etcd's producer path stores for `etcdctl put /queue/q/producer/x 'résumé ready'`: the value's bytes,
  // encoding bytes. `kvmq enqueue` and the JSON gateway's base64 value arrive the same way.
  assert.deepEqual(await shownPayload(h, base, Buffer.from('résumé ready\tfor <review>\n', 'utf8')), {
    kind: '28 bytes, text', // UTF-8: each é is two bytes
    text: 'résumé ready\tfor <review>\n',
  });
  assert.deepEqual(await shownPayload(h, base, 'a JSON string shows without its quotes'), {
    kind: 'text',
    text: 'a JSON string shows without its quotes',
  });
});

storeTest(sqlite, 'JSON is laid out wherever it parses, each number as written', async (h) => {
  const base = await serveDashboard(h);
  const sent = '{"order":12345678901234567890,"price":1.50,"tags":["a","b"],"note":"x\\"y, z: {}","empty":{}}';
  assert.deepEqual(await shownPayload(h, base, Buffer.from(sent)), {
    kind: `${Buffer.byteLength(sent)} bytes, JSON`,
    text: [
      '{',
      '  "order": 12345678901234567890,',
      '  "price": 1.50,',
      '  "tags": [',
      '    "a",',
      '    "b"',
      '  ],',
      '  "note": "x\\"y, z: {}",',
      '  "empty": {}',
      '}',
    ].join('\n'),
  });
  assert.deepEqual(await shownPayload(h, base, { a: [1, { b: null }] }), {
    kind: 'JSON',
    text: '{\n  "a": [\n    1,\n    {\n      "b": null\n    }\n  ]\n}',
  });
  assert.equal((await shownPayload(h, base, '[1, 2]')).text, '[\n  1,\n  2\n]');
});

storeTest(sqlite, 'bytes that are not UTF-8 text, or hold control characters, show as a hex dump', async (h) => {
  const base = await serveDashboard(h);
  assert.deepEqual(await shownPayload(h, base, Buffer.from([0x25, 0x50, 0x44, 0x46, 0xff, 0xfe])), {
    kind: '6 bytes, binary',
    text: `00000000  25 50 44 46 ff fe${' '.repeat(30)}  %PDF..`,
  });
  assert.equal((await shownPayload(h, base, Buffer.from('ok\u001b[31m', 'utf8'))).kind, '7 bytes, binary');
  assert.equal((await shownPayload(h, base, Buffer.from([0]))).kind, '1 byte, binary');
  // A JSON string with a control character is shown escaped, as JSON.
  assert.deepEqual(await shownPayload(h, base, 'bell\u0007'), { kind: 'JSON', text: '"bell\\u0007"' });
});

storeTest(sqlite, 'every count with a noun agrees with it: 1 message, 2 messages, 1 consumer', async (h) => {
  const base = await serveDashboard(h);
  const queue = h.queue('counts');
  await h.client.enqueue(queue, 'only', { id: 'only' });
  await h.client.configure(queue, { paused: true });
  h.worker(queue, () => undefined);
  await waitFor(async () => (await h.client.queueStatus(queue)).consumers.length === 1, { what: 'consumer' });
  const singular = /1 message<[\s\S]*1 consumer</;
  assert.match(await fetchPage(base, ''), singular);
  assert.match(await fetchPage(base, `queues/${queue}`), />1 message</);
  assert.match(await fetchPage(base, `queues/${queue}/clear`), /Remove 1 message\s*</);
  assert.match(await fetchPage(base, `queues/${queue}?done=retried-failed&n=1`), /Queued 1 failed message again\./);
  await h.client.enqueue(queue, 'another');
  assert.match(await fetchPage(base, ''), />2 messages</);
  assert.match(await fetchPage(base, `queues/${queue}/clear`), /Remove 2 messages\s*</);
  assert.match(await fetchPage(base, `queues/${queue}?done=retried-failed&n=0`), /Queued 0 failed messages again\./);
  // The live updates rewrite number and noun together, from the nouns the page gives.
  assert.match(await fetchPage(base, ''), /data-total="[^"]+" data-one="message" data-many="messages"/);
});

storeTest(sqlite, "a message's progress shows on its page and in its queue's list; its log on its page", async (h) => {
  const base = await serveDashboard(h);
  const queue = h.queue('reports');
  h.worker(queue, (job) => {
    job.progress({ done: 7, of: 9 });
    job.log('fetched <rows>');
    job.log('second line');
  });
  await h.client.enqueue(queue, 'x', { id: 'm' });
  await waitFor(async () => (await h.client.status(queue, 'm'))?.state === 'done-awaiting-gc');
  const message = unescape(await fetchPage(base, `queues/${queue}/messages/m`));
  assert.match(message, /<th>Progress<\/th>\s*<td><span class="mono">\{"done":7,"of":9\}<\/span><\/td>/);
  assert.match(message, /<pre class="code log">fetched <rows>\nsecond line<\/pre>/);
  const list = unescape(await fetchPage(base, `queues/${queue}`));
  assert.match(list, /<td class="mono">\s*\{"done":7,"of":9\}\s*<\/td>/);
});

storeTest(
  sqlite,
  "the message page shows the handler's result beside the payload, and no panel for none",
  async (h) => {
    const base = await serveDashboard(h);
    const queue = h.queue('results');
    h.worker(queue, ({ id }) => (id === 'none' ? undefined : { status: 'success', result: { total: 42, ok: true } }));
    for (const id of ['with', 'none']) await h.client.enqueue(queue, id, { id });
    await waitFor(async () => (await h.client.queueStatus(queue)).counts['done-awaiting-gc'] === 2);
    const body = await fetchPage(base, `queues/${queue}/messages/with`);
    assert.match(body, /<h2>Result <span class="muted">\(JSON\)<\/span><\/h2>/);
    const text = /<pre class="code result">([\s\S]*?)<\/pre>/.exec(body)?.[1];
    assert.equal(unescape(text ?? ''), '{\n  "total": 42,\n  "ok": true\n}');
    assert.doesNotMatch(await fetchPage(base, `queues/${queue}/messages/none`), /<h2>Result/);
  },
);

for (const fixture of [sqlite, etcdFixture()]) {
  storeTest(fixture, "a flow's message page shows its tree, each node linked with its state", async (h) => {
    const base = await serveDashboard(h);
    const queue = h.queue('flow');
    const other = h.queue('flow-other');
    await h.client.flow({
      queue,
      payload: 'p',
      id: 'p',
      children: [
        { queue, payload: 'a', id: 'a' },
        { queue: other, payload: 'b', id: 'b' },
      ],
    });
    const body = await fetchPage(base, `queues/${other}/messages/b`);
    const panel = /<h2>Flow<\/h2>([\s\S]*?)<\/section>/.exec(body)?.[1] ?? '';
    assert.match(panel, new RegExp(`href="[^"]*queues/${queue}/messages/p"`));
    assert.match(panel, new RegExp(`href="[^"]*queues/${queue}/messages/a"`));
    assert.match(panel, new RegExp(`<strong><span class="mono">${other}/b</span></strong>`));
    assert.match(panel, /title="waiting-children"/);
    assert.equal(panel.match(/title="queued"/g)?.length, 2);
    // A message in no flow has no such panel.
    await h.client.enqueue(queue, 'plain', { id: 'plain' });
    assert.doesNotMatch(await fetchPage(base, `queues/${queue}/messages/plain`), /<h2>Flow<\/h2>/);
  });
}
