/**
 * Bad requests get etcd's errors, compared with a real etcd 3.4: malformed
 * bytes, empty keys, conflicting flags, too many Txn operations, oversized
 * requests, lease errors and requests without (or with a bad) token while
 * auth is on. After all of it the server still answers.
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { after, before, describe, test } from 'node:test';
import type * as Grpc from '@grpc/grpc-js';
import { b64, etcdBesideServe, RawClient, type Outcome } from './fixtures/serve-support.js';

const grpc = createRequire(import.meta.url)('@grpc/grpc-js') as typeof Grpc;

/** Sends raw bytes to a method, as a broken client would. */
function rawCall(endpoint: string, path: string, body: Buffer): Promise<{ code: number; details: string } | null> {
  const identity = (b: Buffer): Buffer => b;
  const Client = grpc.makeGenericClientConstructor(
    {
      call: {
        path,
        requestStream: false,
        responseStream: false,
        requestSerialize: identity,
        requestDeserialize: identity,
        responseSerialize: identity,
        responseDeserialize: identity,
      },
    },
    'Raw',
  );
  const client = new Client(endpoint, grpc.credentials.createInsecure());
  return new Promise((resolve) => {
    (client as unknown as { call: (b: Buffer, cb: (e: Grpc.ServiceError | null) => void) => void }).call(
      body,
      (error) => {
        client.close();
        resolve(error === null ? null : { code: error.code, details: error.details });
      },
    );
  });
}

function errorOf(outcome: Outcome): { code: number; details: string } | null {
  return 'error' in outcome ? outcome.error : null;
}

describe('errors match etcd and the server keeps serving', () => {
  const servers = etcdBesideServe();
  let a: RawClient;
  let b: RawClient;

  before(() => {
    a = new RawClient(servers.etcd.endpoint);
    b = new RawClient(servers.kvmq.endpoint);
  });

  after(() => {
    a.close();
    b.close();
  });

  /** Sends the request to both; etcd must answer as `expected` says, and kvmq exactly as etcd (code and message). */
  async function same(
    expected: 'refused' | 'accepted',
    service: string,
    method: string,
    request: Record<string, unknown>,
  ): Promise<void> {
    const [x, y] = await Promise.all([a.call(service, method, request), b.call(service, method, request)]);
    const what = `${method} ${JSON.stringify(request).slice(0, 200)}`;
    assert.equal(errorOf(x) === null ? 'accepted' : 'refused', expected, `etcd: ${what}`);
    assert.deepEqual(errorOf(y), errorOf(x), what);
  }

  const refused = (service: string, method: string, request: Record<string, unknown>): Promise<void> =>
    same('refused', service, method, request);
  const accepted = (service: string, method: string, request: Record<string, unknown>): Promise<void> =>
    same('accepted', service, method, request);

  test('empty keys, conflicting flags, oversized Txns, future revisions and lease errors: etcd’s error', async () => {
    await refused('KV', 'Range', { key: '' });
    await refused('KV', 'Put', { key: '', value: b64('v') });
    await refused('KV', 'Put', { key: b64('k'), value: b64('v'), ignore_value: true });
    await refused('KV', 'Put', { key: b64('k'), lease: '5', ignore_lease: true });
    await refused('KV', 'Put', { key: b64('missing'), ignore_value: true });
    await refused('KV', 'Put', { key: b64('k'), value: b64('v'), lease: '5' });
    await refused('KV', 'DeleteRange', { key: '' });
    const many = Array.from({ length: 129 }, (_, i) => ({ request_put: { key: b64(`k${i}`), value: '' } }));
    await refused('KV', 'Txn', { compare: [], success: many, failure: [] });
    await refused('KV', 'Txn', { compare: [{ key: '' }], success: [], failure: [] });
    await refused('KV', 'Txn', { compare: [], success: [{}], failure: [] });
    await refused('KV', 'Txn', {
      compare: [],
      success: [{ request_put: { key: b64('d') } }, { request_delete_range: { key: b64('d') } }],
      failure: [],
    });
    await refused('KV', 'Compact', { revision: '100000' });
    await refused('Lease', 'LeaseGrant', { ID: '11', TTL: '9000000001' });
    await accepted('Lease', 'LeaseGrant', { ID: '11', TTL: '60' });
    await refused('Lease', 'LeaseGrant', { ID: '11', TTL: '60' });
    await refused('Lease', 'LeaseRevoke', { ID: '12' });
    await refused('Maintenance', 'HashKV', { revision: '100000' });
  });

  test('a request over etcd’s 1.5 MiB limit is refused with its error; one under it is accepted', async () => {
    await refused('KV', 'Put', { key: b64('big'), value: Buffer.alloc(1600 * 1024, 1).toString('base64') });
    await refused('KV', 'Put', { key: b64('huge'), value: Buffer.alloc(2600 * 1024, 1).toString('base64') });
    await accepted('KV', 'Put', { key: b64('fits'), value: Buffer.alloc(1400 * 1024, 1).toString('base64') });
  });

  test('malformed request bytes and unknown methods get etcd’s gRPC status', async () => {
    for (const body of [Buffer.from([0xff, 0xff, 0xff]), Buffer.from([0x0a, 0x10, 0x01]), Buffer.from([0x0b])]) {
      const [x, y] = await Promise.all([
        rawCall(servers.etcd.endpoint, '/etcdserverpb.KV/Range', body),
        rawCall(servers.kvmq.endpoint, '/etcdserverpb.KV/Range', body),
      ]);
      assert.ok(x !== null, `etcd refuses ${body.toString('hex')}`);
      assert.equal(y?.code, x.code, `code for ${body.toString('hex')}`);
      assert.match(y.details, /^grpc: error unmarshalling request: /);
    }
    const [x, y] = await Promise.all([
      rawCall(servers.etcd.endpoint, '/etcdserverpb.KV/Nope', Buffer.alloc(0)),
      rawCall(servers.kvmq.endpoint, '/etcdserverpb.KV/Nope', Buffer.alloc(0)),
    ]);
    assert.equal(x?.code, grpc.status.UNIMPLEMENTED, 'etcd: an unknown method');
    assert.equal(y?.code, x.code);
  });

  test('with auth on: no token, a bad token or a role without the permission gets etcd’s error', async () => {
    for (const c of [a, b]) {
      await c.call('Auth', 'UserAdd', { name: 'root', password: 'pw' });
      await c.call('Auth', 'UserGrantRole', { user: 'root', role: 'root' });
      await c.call('Auth', 'RoleAdd', { name: 'limited' });
      await c.call('Auth', 'RoleGrantPermission', {
        name: 'limited',
        perm: { permType: 2, key: b64('own/'), range_end: b64('own0') },
      });
      await c.call('Auth', 'UserAdd', { name: 'user', password: 'upw' });
      await c.call('Auth', 'UserGrantRole', { user: 'user', role: 'limited' });
      const enabled = await c.call('Auth', 'AuthEnable', {});
      assert.ok('ok' in enabled, JSON.stringify(enabled));
    }
    await refused('KV', 'Range', { key: b64('k') });
    await refused('KV', 'Put', { key: b64('k'), value: b64('v') });
    await refused('Auth', 'Authenticate', { name: 'root', password: 'wrong' });
    await refused('Auth', 'Authenticate', { name: 'nobody', password: 'x' });
    for (const c of [a, b]) c.token = 'notAToken.1';
    await refused('KV', 'Range', { key: b64('k') });
    await refused('Lease', 'LeaseGrant', { ID: '77', TTL: '60' });
    await refused('Auth', 'Authenticate', { name: 'user', password: 'upw' });
    for (const c of [a, b]) {
      c.token = undefined;
      const auth = await c.call('Auth', 'Authenticate', { name: 'user', password: 'upw' });
      assert.ok('ok' in auth);
      c.token = String(auth.ok.token);
    }
    await accepted('KV', 'Put', { key: b64('own/x'), value: b64('v') });
    await refused('KV', 'Put', { key: b64('other'), value: b64('v') });
    await accepted('KV', 'Range', { key: b64('own/'), range_end: b64('own0') });
    await refused('KV', 'Range', { key: b64('own/'), range_end: Buffer.from([0]).toString('base64') });
    await accepted('KV', 'DeleteRange', { key: b64('own/x') });
    await refused('Auth', 'UserList', {});
    await accepted('Auth', 'UserGet', { name: 'user' });
    await refused('Auth', 'UserGet', { name: 'root' });
    await accepted('Auth', 'RoleGet', { role: 'limited' });
    await refused('Maintenance', 'HashKV', {});
    await refused('Maintenance', 'Defragment', {});
    await accepted('Maintenance', 'Alarm', { action: 0 });
    await refused('Auth', 'AuthDisable', {});
    const snapshots = await Promise.all([a, b].map((c) => c.serverStream('Maintenance', 'Snapshot', {})));
    assert.deepEqual(snapshots[1]?.error, snapshots[0]?.error);
    const watches = [a, b].map((c) => c.stream('Watch', 'Watch'));
    for (const w of watches) w.send({ create_request: { key: b64('other') } });
    for (const c of [a, b]) {
      c.token = undefined;
      const auth = await c.call('Auth', 'Authenticate', { name: 'root', password: 'pw' });
      assert.ok('ok' in auth);
      c.token = String(auth.ok.token);
      const disabled = await c.call('Auth', 'AuthDisable', {});
      assert.ok('ok' in disabled, JSON.stringify(disabled));
      c.token = undefined;
    }
    const [wa, wb] = watches;
    assert.ok(wa !== undefined && wb !== undefined);
    const reason = (w: typeof wa): unknown => w.responses[0]?.cancel_reason;
    assert.equal(reason(wb), reason(wa));
    for (const w of watches) w.close();
  });

  test('after every refused request the server still serves a put and a range', async () => {
    const put = await b.call('KV', 'Put', { key: b64('after'), value: b64('fine') });
    assert.ok('ok' in put, JSON.stringify(put));
    const got = await b.call('KV', 'Range', { key: b64('after') });
    assert.ok('ok' in got);
    assert.equal((got.ok.kvs as { value: string }[])[0]?.value, b64('fine'));
  });
});
