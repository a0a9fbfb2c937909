/**
 * kvmq serve's HTTP/JSON gateway against a real etcd 3.4's: the same requests to both, the answers compared
 * byte for byte (status, content type, body) after replacing only the cluster id, member id and raft term,
 * which are each server's own. Both start empty and get the same writes, so revisions agree; lease ids are
 * given explicitly, since each server picks its own.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect as connectHttp2 } from 'node:http2';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { startEtcd, type ServerHandle } from './fixtures/serve-support.js';
import { SERVE_DEFAULTS } from '../src/serve/server.js';
import { startGatewayServe, type GatewayServe } from './fixtures/gateway-support.js';
import { b64, normalise, openStream, post, type Reply } from './fixtures/gateway-http.js';
import { waitFor } from './support/wait.js';

let etcd: ServerHandle;
let kvmq: GatewayServe;
let etcdUrl: string;

before(async () => {
  [etcd, kvmq] = await Promise.all([startEtcd(), startGatewayServe({ dispatch: false })]);
  etcdUrl = `http://${etcd.endpoint}`;
});

after(async () => {
  await Promise.allSettled([etcd.stop(), kvmq.stop()]);
});

function comparable(reply: Reply): Reply {
  return { ...reply, text: normalise(reply.text) };
}

/** The same request to etcd and to kvmq. */
function both(path: string, body: unknown, options: { method?: string } = {}): Promise<[Reply, Reply]> {
  return Promise.all([post(etcdUrl, path, body, options), post(kvmq.url, path, body, options)]);
}

type Headers = [Record<string, string>?, Record<string, string>?];

/**
 * Sends one request to both and asserts the same answer, etcd's with HTTP `status` (so two equal refusals
 * cannot pass for a success, nor the other way round); returns kvmq's body.
 */
async function answeredAlike(status: number, path: string, body: unknown, headers: Headers = []): Promise<string> {
  const [fromEtcd, fromKvmq] = await Promise.all([
    post(etcdUrl, path, body, { headers: headers[0] }),
    post(kvmq.url, path, body, { headers: headers[1] ?? headers[0] }),
  ]);
  const what = `${path} ${JSON.stringify(body)}`;
  assert.equal(fromEtcd.status, status, `etcd's status for ${what}`);
  assert.deepEqual(comparable(fromKvmq), comparable(fromEtcd), what);
  return fromKvmq.text;
}

/** A request etcd accepts (200), answered alike. */
function accepted(path: string, body: unknown, headers: Headers = []): Promise<string> {
  return answeredAlike(200, path, body, headers);
}

/** A request etcd refuses with `status`, refused alike. */
function refused(status: number, path: string, body: unknown, headers: Headers = []): Promise<string> {
  return answeredAlike(status, path, body, headers);
}

describe('kvmq serve JSON gateway, compared with etcd 3.4', () => {
  test('put, range with options and deleterange answer as etcd’s gateway does', async () => {
    for (const [key, value] of [
      ['k/1', 'one'],
      ['k/2', 'two'],
      ['k/3', '<three & more>'],
      ['k/1', 'uno'],
    ]) {
      await accepted('/v3/kv/put', { key: b64(key ?? ''), value: b64(value ?? ''), prev_kv: true });
    }
    await accepted('/v3/kv/put', { key: b64('k/2'), value: b64('dos'), prevKv: true });
    await refused(400, '/v3/kv/put', { key: b64('k/4'), ignore_value: true });
    await accepted('/v3/kv/range', { key: b64('k/'), range_end: b64('k0') });
    await accepted('/v3/kv/range', {
      key: b64('k/'),
      range_end: b64('k0'),
      sort_order: 'DESCEND',
      sort_target: 'MOD',
      limit: 2,
    });
    await accepted('/v3/kv/range', { key: b64('k/'), rangeEnd: b64('k0'), sortOrder: 1, sortTarget: 4, limit: '1' });
    await accepted('/v3/kv/range', { key: b64('k/'), range_end: b64('k0'), keys_only: true, revision: '3' });
    await accepted('/v3/kv/range', { key: b64('k/'), range_end: b64('k0'), count_only: true });
    await accepted('/v3/kv/range', {
      key: b64('k/'),
      range_end: b64('k0'),
      min_mod_revision: 3,
      max_create_revision: 3,
    });
    await accepted('/v3/kv/range', { key: b64('missing') });
    await accepted('/v3/kv/range', '{"key":"' + b64('k/1') + '"} anything after the first value is not read');
    await accepted('/v3/kv/deleterange', { key: b64('k/3'), prev_kv: true });
    await accepted('/v3/kv/deleterange', { key: b64('k/'), range_end: b64('k0') });
    await accepted('/v3beta/kv/range', { key: b64('k/1') });
  });

  test('a txn with compares and nested ops answers as etcd’s gateway does', async () => {
    await accepted('/v3/kv/put', { key: b64('t/a'), value: b64('1') });
    await accepted('/v3/kv/txn', {
      compare: [
        { target: 'VALUE', key: b64('t/a'), value: b64('1'), result: 'EQUAL' },
        { target: 'CREATE', key: b64('t/b'), create_revision: '0' },
        { target: 'MOD', key: b64('t/a'), result: 'GREATER', mod_revision: 1 },
      ],
      success: [
        { request_range: { key: b64('t/a') } },
        { request_put: { key: b64('t/b'), value: b64('2'), prev_kv: true } },
        { request_txn: { success: [{ request_delete_range: { key: b64('t/c'), prev_kv: true } }] } },
      ],
      failure: [{ request_range: { key: b64('t/') } }],
    });
    await accepted('/v3/kv/txn', {
      compare: [{ target: 'VERSION', key: b64('t/a'), result: 'NOT_EQUAL', version: 1 }],
      failure: [{ requestRange: { key: b64('t/'), rangeEnd: b64('t0') } }, { requestDeleteRange: { key: b64('t/b') } }],
    });
    await refused(400, '/v3/kv/txn', {
      success: [{ request_put: { key: b64('t/x') } }, { request_put: { key: b64('t/x') } }],
    });
    await refused(400, '/v3/kv/txn', { compare: [{ target: 'NOPE', key: b64('t/a') }] });
  });

  test('compaction, then a compacted and a future revision are refused alike', async () => {
    await accepted('/v3/kv/put', { key: b64('c/1'), value: b64('x') });
    await accepted('/v3/kv/compaction', { revision: 3 });
    await refused(400, '/v3/kv/compaction', { revision: 3, physical: true });
    await refused(400, '/v3/kv/range', { key: b64('c/1'), revision: 2 });
    await refused(400, '/v3/kv/range', { key: b64('c/1'), revision: 999 });
  });

  test('watch: created, events from puts, cancel; one JSON object a line', async () => {
    // etcd 3.4's gateway reads a stream's whole request body before it sends the first message, so the
    // requests go in one body; the answer stays open after it, as the watch does.
    const body = [
      { create_request: { key: b64('w/'), range_end: b64('w0'), prev_kv: true } },
      { create_request: { key: b64('x/'), watch_id: 7 } },
      { cancel_request: { watch_id: '7' } },
    ]
      .map((request) => JSON.stringify(request))
      .join('');
    const streams = [openStream(etcdUrl, '/v3/watch'), openStream(kvmq.url, '/v3/watch')];
    for (const stream of streams) stream.send(body);
    for (const stream of streams) stream.end();
    await Promise.all(streams.map((s) => s.waitLines(3)));
    await accepted('/v3/kv/put', { key: b64('w/1'), value: b64('a') });
    await accepted('/v3/kv/put', { key: b64('w/1'), value: b64('b') });
    await accepted('/v3/kv/put', { key: b64('x/1'), value: b64('not watched any more') });
    await accepted('/v3/kv/deleterange', { key: b64('w/1') });
    await Promise.all(streams.map((s) => s.waitLines(6)));
    const [fromEtcd = [], fromKvmq] = streams.map((s) => s.lines.map(normalise));
    // Equal streams could both be refusals: etcd's must carry the three changes of w/.
    assert.equal(fromEtcd.filter((line) => line.includes('"events"')).length, 3, fromEtcd.join('\n'));
    assert.deepEqual(fromKvmq, fromEtcd);
    for (const response of await Promise.all(streams.map((s) => s.response))) {
      assert.equal(response.headers['content-type'], 'application/json');
    }
    for (const stream of streams) stream.destroy();
  });

  test('a watch or keepalive whose first message is not JSON; a later one ends the reading', async () => {
    await refused(500, '/v3/watch', '{bad');
    await refused(500, '/v3/lease/keepalive', '{"ID":"x"}');
    await refused(500, '/v3/lease/keepalive', { ID: 'x1' });
    await accepted('/v3/lease/keepalive', '{"ID":4243} {"ID":"x1"} {"ID":4244}');
    await accepted('/v3/lease/keepalive', '{"ID":4243} {"ID": {"ID":4244}');
  });

  test('leases: grant, keepalive, timetolive, leases, revoke, every path etcd gives them', async () => {
    await accepted('/v3/lease/grant', { TTL: 60, ID: 1001 });
    await accepted('/v3/lease/grant', { TTL: '30', ID: '1002' });
    await refused(412, '/v3/lease/grant', { TTL: 60, ID: 1001 });
    await accepted('/v3/kv/put', { key: b64('l/1'), value: b64('v'), lease: 1001 });
    // One body, two keepalives: the answer ends with the body.
    await accepted('/v3/lease/keepalive', '{"ID":1001}\n{"ID":"1002"}');
    await accepted('/v3/lease/keepalive', { ID: 4242 });
    await accepted('/v3/lease/timetolive', { ID: 4242 });
    for (const path of ['/v3/lease/timetolive', '/v3/kv/lease/timetolive']) {
      const [fromEtcd, fromKvmq] = await both(path, { ID: 1001, keys: true });
      // The remaining TTL may be a second apart; all else is the same.
      const strip = (r: Reply): string => normalise(r.text).replace(/"TTL":"\d+"/, '"TTL":"T"');
      assert.equal(strip(fromKvmq), strip(fromEtcd));
    }
    await accepted('/v3/lease/leases', {});
    await accepted('/v3/kv/lease/leases', '');
    await accepted('/v3/lease/revoke', { ID: 1001 });
    await accepted('/v3/kv/lease/revoke', { ID: '1002' });
    await refused(404, '/v3/lease/revoke', { ID: 1001 });
    await accepted('/v3/kv/range', { key: b64('l/1') });
  });

  test('bad input: JSON, types, base64, enums, empty key, unknown paths, methods', async () => {
    const malformed: unknown[] = [
      '{bad',
      '{"key":',
      '{"key" "x"}',
      '{"key":"YQ==",}',
      '{"key":tru}',
      '[]',
      'null',
      '"text"',
      { key: 123 },
      { key: 'YQ' },
      { key: '!!!' },
      { key: 'YQ-_' },
      { key: b64('a'), limit: 1.5 },
      { key: b64('a'), limit: 'abc' },
      { key: b64('a'), limit: '' },
      { key: b64('a'), limit: '99999999999999999999' },
      { key: b64('a'), count_only: 'true' },
      { key: b64('a'), sort_order: 'NOPE' },
      { key: null },
      { KEY: b64('a') },
      {},
    ];
    for (const body of malformed) await refused(400, '/v3/kv/range', body);
    // What etcd's gateway lets pass: an array for bytes (empty), an unknown field.
    await accepted('/v3/kv/range', { key: b64('a'), range_end: [] });
    await accepted('/v3/kv/range', { key: b64('a'), unknown_field: { nested: [1, 2] } });
    await refused(400, '/v3/kv/put', { key: '', value: b64('v') });
    await refused(400, '/v3/kv/txn', { compare: {} });
    await refused(400, '/v3/kv/txn', { success: [{ request_put: 'x' }] });
    for (const path of ['/v3/kv/nope', '/v3alpha/kv/range', '/', '/v3/auth/status', '/v3/maintenance/downgrade']) {
      await refused(404, path, {});
    }
    for (const method of ['GET', 'PUT', 'DELETE']) {
      const [fromEtcd, fromKvmq] = await both('/v3/kv/range', '', { method });
      assert.deepEqual(comparable(fromKvmq), comparable(fromEtcd));
    }
    const preflight = await post(kvmq.url, '/v3/kv/put', '', { method: 'OPTIONS' });
    assert.equal(preflight.status, 200);
  });

  test('maintenance status, hash, alarm, member list: the same fields', async () => {
    const shape = (value: unknown): unknown =>
      Array.isArray(value)
        ? value.map(shape)
        : value !== null && typeof value === 'object'
          ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, shape(v)]))
          : typeof value;
    for (const path of ['/v3/maintenance/status', '/v3/maintenance/hash', '/v3/maintenance/alarm']) {
      const [fromEtcd, fromKvmq] = await both(path, {});
      assert.equal(fromKvmq.status, 200);
      assert.deepEqual(shape(JSON.parse(fromKvmq.text)), shape(JSON.parse(fromEtcd.text)), path);
    }
    const members = await post(kvmq.url, '/v3/cluster/member/list', {});
    const list = JSON.parse(members.text) as { members: { name: string; clientURLs: string[] }[] };
    assert.deepEqual(
      list.members.map((m) => [m.name, m.clientURLs]),
      [['kvmq', [kvmq.server.url]]],
    );
  });

  test('auth: users, roles, enable, authenticate, a token-protected request, no token', async () => {
    await accepted('/v3/auth/user/add', { name: 'root', password: 'pw' });
    await refused(412, '/v3/auth/user/add', { name: 'root', password: 'pw' });
    await accepted('/v3/auth/user/add', { name: 'app', password: 'apppw' });
    await accepted('/v3/auth/user/grant', { user: 'root', role: 'root' });
    await accepted('/v3/auth/role/add', { name: 'queue' });
    await accepted('/v3/auth/role/grant', {
      name: 'queue',
      perm: { permType: 'READWRITE', key: b64('/queue/'), range_end: b64('/queue0') },
    });
    await accepted('/v3/auth/user/grant', { user: 'app', role: 'queue' });
    await accepted('/v3/auth/role/get', { role: 'queue' });
    await accepted('/v3/auth/user/get', { name: 'app' });
    await accepted('/v3/auth/user/list', {});
    await accepted('/v3/auth/role/list', {});
    await refused(412, '/v3/auth/user/get', { name: 'nobody' });
    await accepted('/v3/auth/enable', {});
    await refused(400, '/v3/kv/put', { key: b64('/queue/q/producer/1'), value: b64('m') });
    await refused(400, '/v3/auth/authenticate', { name: 'app', password: 'wrong' });
    const tokens = await Promise.all(
      [etcdUrl, kvmq.url].map(async (base) => {
        const reply = await post(base, '/v3/auth/authenticate', { name: 'app', password: 'apppw' });
        assert.equal(reply.status, 200, reply.text);
        return (JSON.parse(reply.text) as { token: string }).token;
      }),
    );
    const as = (i: number): Record<string, string> => ({ Authorization: tokens[i] ?? '' });
    await accepted('/v3/kv/put', { key: b64('/queue/q/producer/1'), value: b64('m') }, [as(0), as(1)]);
    await accepted('/v3/kv/range', { key: b64('/queue/q/producer/1') }, [as(0), as(1)]);
    await refused(403, '/v3/kv/put', { key: b64('/other'), value: b64('m') }, [as(0), as(1)]);
    await refused(401, '/v3/kv/range', { key: b64('/queue/') }, [{ Authorization: 'Bearer x' }]);
    // gRPC metadata passed as Grpc-Metadata-* headers, which etcd's gateway forwards.
    await accepted('/v3/kv/range', { key: b64('/queue/q/producer/1') }, [
      { 'Grpc-Metadata-Token': tokens[0] ?? '' },
      { 'Grpc-Metadata-Token': tokens[1] ?? '' },
    ]);
    await refused(403, '/v3/auth/user/changepw', { name: 'app', password: 'new' }, [as(0), as(1)]);
    const roots = await Promise.all(
      [etcdUrl, kvmq.url].map(async (base) => {
        const reply = await post(base, '/v3/auth/authenticate', { name: 'root', password: 'pw' });
        return (JSON.parse(reply.text) as { token: string }).token;
      }),
    );
    const root = (i: number): Record<string, string> => ({ Authorization: roots[i] ?? '' });
    await accepted('/v3/auth/user/revoke', { name: 'app', role: 'queue' }, [root(0), root(1)]);
    await accepted('/v3/auth/role/revoke', { role: 'queue', key: b64('/queue/'), range_end: b64('/queue0') }, [
      root(0),
      root(1),
    ]);
    await accepted('/v3/auth/role/delete', { role: 'queue' }, [root(0), root(1)]);
    await accepted('/v3/auth/user/delete', { name: 'app' }, [root(0), root(1)]);
    await accepted('/v3/auth/disable', {}, [root(0), root(1)]);
    await accepted('/v3/kv/range', { key: b64('/queue/q/producer/1') });
  });
});

describe('kvmq serve JSON gateway only', () => {
  test('a body past the limit is refused before it is all sent', async () => {
    const limit = Math.ceil(((SERVE_DEFAULTS.maxRequestBytes + 512 * 1024) * 4) / 3) + 64 * 1024;
    // A raw socket, so the answer is read while the body is still being sent.
    const url = new URL(kvmq.url);
    const reply = await new Promise<{ status: number; text: string; sent: number }>((resolve, reject) => {
      let sent = 0;
      let text = '';
      const socket = connect(Number(url.port), url.hostname);
      const chunk = Buffer.alloc(64 * 1024, 'A');
      const frame = Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]);
      let answered = false;
      const pump = (): void => {
        while (!answered && sent < limit * 4) {
          sent += chunk.length;
          if (!socket.write(frame)) {
            socket.once('drain', pump);
            return;
          }
        }
      };
      socket.setEncoding('utf8');
      socket.on('data', (data: string) => {
        answered = true;
        text += data;
      });
      // The server may reset the connection once it has answered.
      socket.on('error', () => undefined);
      socket.on('close', () => {
        const status = /^HTTP\/1\.1 (\d+)/.exec(text);
        if (status === null) reject(new Error(`no answer: ${text}`));
        else resolve({ status: Number(status[1]), text: text.slice(text.indexOf('\r\n\r\n') + 4), sent });
      });
      socket.write('POST /v3/kv/put HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n');
      socket.write('17\r\n{"key":"YQ==","value":"\r\n');
      pump();
    });
    assert.equal(reply.status, 429);
    assert.equal((JSON.parse(reply.text) as { code: number }).code, 8);
    assert.ok(reply.sent < limit * 4, `the whole body was taken (${reply.sent} bytes)`);
  });

  test('watch on kvmq: requests are taken as they arrive, without waiting for the body to end', async () => {
    const stream = openStream(kvmq.url, '/v3/watch');
    stream.send({ create_request: { key: b64('i/1') } });
    await stream.waitLines(1);
    await post(kvmq.url, '/v3/kv/put', { key: b64('i/1'), value: b64('v') });
    await stream.waitLines(2);
    stream.send('{"cancel_request":{"watch_id":"0"}}');
    await stream.waitLines(3);
    const last = JSON.parse(stream.lines[2] ?? '') as { result: { canceled?: boolean } };
    assert.equal(last.result.canceled, true);
    stream.destroy();
  });

  test('over HTTP/2 (cleartext) on the gRPC port too: a unary call, an error, and a watch', async () => {
    const session = connectHttp2(kvmq.url);
    const call = (path: string, body: string, end = true) => {
      const stream = session.request({ ':method': 'POST', ':path': path });
      let text = '';
      stream.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      const headers = once(stream, 'response').then(([h]) => h as Record<string, string | number>);
      stream.write(body);
      if (end) stream.end();
      return { stream, headers, text: () => text };
    };
    try {
      const put = call('/v3/kv/put', JSON.stringify({ key: b64('h2/1'), value: b64('over h2') }));
      assert.equal((await put.headers)[':status'], 200);
      await once(put.stream, 'end');
      assert.match(put.text(), /^\{"header":\{"cluster_id"/);
      const bad = call('/v3/kv/range', '{"key":""}');
      assert.equal((await bad.headers)[':status'], 400);
      await once(bad.stream, 'end');
      assert.match(bad.text(), /"code":3/);
      const watch = call('/v3/watch', JSON.stringify({ create_request: { key: b64('h2/2') } }), false);
      assert.equal((await watch.headers)['content-type'], 'application/json');
      await post(kvmq.url, '/v3/kv/put', { key: b64('h2/2'), value: b64('event') });
      await waitFor(() => watch.text().split('\n').length >= 3, { what: () => watch.text() });
      assert.match(watch.text().split('\n')[1] ?? '', /"events":\[\{"kv":\{"key":"aDIvMg=="/);
      watch.stream.close();
    } finally {
      session.close();
    }
  });

  test('a stream message past the limit ends the call with RESOURCE_EXHAUSTED', async () => {
    const stream = openStream(kvmq.url, '/v3/watch');
    stream.send({ create_request: { key: b64('big/') } });
    await stream.waitLines(1);
    stream.send(`{"create_request":{"key":"${'A'.repeat(4 * 1024 * 1024)}`);
    const res = await stream.response;
    await once(res, 'end');
    const last = JSON.parse(stream.lines.at(-1) ?? '') as { error: { grpc_code: number; http_code: number } };
    assert.deepEqual([last.error.grpc_code, last.error.http_code], [8, 429]);
    stream.destroy();
  });

  test('a snapshot streams the database as base64 blobs, one result a line', async () => {
    const reply = await post(kvmq.url, '/v3/maintenance/snapshot', {});
    assert.equal(reply.status, 200);
    const results = reply.text
      .trim()
      .split('\n')
      .map((line) => (JSON.parse(line) as { result: { blob?: string; remaining_bytes?: string } }).result);
    // The last message is the checksum, with nothing remaining.
    assert.equal(results.at(-1)?.remaining_bytes, undefined);
    const file = Buffer.concat(results.slice(0, -1).map((r) => Buffer.from(r.blob ?? '', 'base64')));
    assert.equal(file.subarray(0, 16).toString('latin1'), 'SQLite format 3\0');
  });

  test('a put the size of --max-request-bytes is refused as etcd refuses it', async () => {
    const value = Buffer.alloc(SERVE_DEFAULTS.maxRequestBytes, 'v').toString('base64');
    const reply = await post(kvmq.url, '/v3/kv/put', { key: b64('big'), value });
    assert.equal(reply.status, 400);
    assert.match(reply.text, /etcdserver: request is too large/);
  });

  test('a watch whose client stops reading loses nothing once it reads again', async () => {
    const stream = openStream(kvmq.url, '/v3/watch');
    stream.send({ create_request: { key: b64('slow/'), range_end: b64('slow0') } });
    await stream.waitLines(1);
    const res = await stream.response;
    res.pause();
    const value = b64('x'.repeat(256 * 1024));
    const puts = 120; // ~40 MiB of JSON, past what the server holds unsent for a stream
    for (let i = 0; i < puts; i++) {
      const reply = await post(kvmq.url, '/v3/kv/put', { key: b64(`slow/${i}`), value });
      assert.equal(reply.status, 200);
    }
    res.resume();
    await waitFor(
      () =>
        stream.lines
          .slice(1)
          .reduce(
            (n, line) => n + ((JSON.parse(line) as { result: { events?: unknown[] } }).result.events ?? []).length,
            0,
          ) >= puts,
      { timeoutMs: 60_000, what: 'every event' },
    );
    const keys = stream.lines
      .slice(1)
      .flatMap((line) => (JSON.parse(line) as { result: { events?: { kv: { key: string } }[] } }).result.events ?? [])
      .map((event) => Buffer.from(event.kv.key, 'base64').toString());
    assert.deepEqual(
      keys,
      Array.from({ length: puts }, (_, i) => `slow/${i}`),
    );
    stream.destroy();
  });

  test('a watch whose client goes away is closed with it', async () => {
    const hub = kvmq.server.engine.hub;
    // The streams of the tests before are gone too (this server runs no dispatcher, so nothing else watches).
    await waitFor(() => hub.size === 0, { what: () => `no watchers (${hub.size})` });
    const stream = openStream(kvmq.url, '/v3/watch');
    stream.send({ create_request: { key: b64('gone/') } });
    await stream.waitLines(1);
    assert.equal(hub.size, 1);
    stream.destroy();
    await waitFor(() => hub.size === 0, { what: () => `the watcher removed (${hub.size})` });
  });

  test('a keepalive stream client that goes away leaves the lease to expire as usual', async () => {
    await post(kvmq.url, '/v3/lease/grant', { TTL: 60, ID: 9090 });
    const stream = openStream(kvmq.url, '/v3/lease/keepalive');
    stream.send({ ID: 9090 });
    await stream.waitLines(1);
    stream.destroy();
    const ttl = await post(kvmq.url, '/v3/lease/timetolive', { ID: 9090 });
    assert.match(ttl.text, /"TTL":"(59|60)"/);
  });
});
