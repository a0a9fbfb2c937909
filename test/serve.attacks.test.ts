/**
 * Attacks on `kvmq serve`'s HTTP/2 transport, each against a fresh server process while a well-behaved
 * client keeps putting and reading: the attacker must get an HTTP/2 or gRPC error, the server's resident
 * memory must stay under 512 MB, and every probe call must answer within 2 s. Frames are built by hand
 * (test/fixtures/h2-attack.ts) or sent with node:http2; everything stays on loopback and lasts seconds.
 */
import assert from 'node:assert/strict';
import { connect as connectHttp2 } from 'node:http2';
import { before, describe, test, type TestContext } from 'node:test';
import { createGzip } from 'node:zlib';
import {
  CANCEL,
  Flag,
  frame,
  grpcHeaders,
  grpcMessage,
  indexed,
  literal,
  PREFACE,
  PUT_PATH,
  putRequest,
  RawConnection,
  sampleRss,
  startProbe,
  Type,
  u32,
} from './fixtures/h2-attack.js';
import { b64, RawClient, startServe, type ServeProcess } from './fixtures/serve-support.js';

const MB = 1024 * 1024;
const MAX_RSS_BYTES = 512 * MB;
const MAX_PROBE_MS = 2000;

interface Measures {
  readonly server: ServeProcess;
}

/** Runs `attack` against a fresh server with the probe and the memory sampler on, then checks both. */
async function underAttack(t: TestContext, attack: (m: Measures) => Promise<void>): Promise<void> {
  const server = await startServe();
  try {
    const rss = sampleRss(server.pid);
    const probe = startProbe(server.endpoint);
    const started = performance.now();
    let attackMs = 0;
    try {
      await attack({ server });
    } finally {
      attackMs = performance.now() - started;
      const seen = await probe.stop();
      const peak = rss.stop();
      t.diagnostic(
        `peak RSS ${(peak / MB).toFixed(0)} MB; probe: ${seen.calls} calls, slowest ${seen.maxMs.toFixed(0)} ms`,
      );
      assert.ok(peak < MAX_RSS_BYTES, `peak RSS ${peak} bytes`);
      assert.ok(seen.calls > 0, 'the probe made no call');
      assert.deepEqual(seen.errors, []);
      // A server the attack blocked would answer the probe only when the attack ended: half its length
      // tells the two apart on a loaded machine too, where a long attack slows everything.
      const bound = Math.max(MAX_PROBE_MS, attackMs / 2);
      assert.ok(seen.maxMs < bound, `slowest probe call ${seen.maxMs} ms, attack ${attackMs.toFixed(0)} ms`);
    }
  } finally {
    await server.stop();
  }
}

/** One gRPC call with node:http2: its status, or how the stream ended without one. */
function http2Call(
  endpoint: string,
  headers: Record<string, string>,
  body: Buffer,
): Promise<{ status?: string; message?: string; rstCode: number }> {
  const session = connectHttp2(`http://${endpoint}`);
  session.on('error', () => undefined);
  const req = session.request({
    ':method': 'POST',
    ':path': PUT_PATH,
    'content-type': 'application/grpc',
    te: 'trailers',
    ...headers,
  });
  req.on('error', () => undefined);
  let status: string | undefined;
  let message: string | undefined;
  const take = (h: Record<string, unknown>): void => {
    if (typeof h['grpc-status'] === 'string') status = h['grpc-status'];
    if (typeof h['grpc-message'] === 'string') message = h['grpc-message'];
  };
  req.on('response', take);
  req.on('trailers', take);
  req.resume();
  req.end(body);
  return new Promise((resolve) => {
    req.on('close', () => {
      session.destroy();
      resolve({
        ...(status === undefined ? {} : { status }),
        ...(message === undefined ? {} : { message }),
        rstCode: req.rstCode,
      });
    });
  });
}

/** A 2 MB gzip stream that inflates to 1.9 GiB of zeros, made a chunk at a time. */
async function gzipBomb(): Promise<Buffer> {
  const gzip = createGzip({ level: 9 });
  const out: Buffer[] = [];
  gzip.on('data', (chunk: Buffer) => out.push(chunk));
  const zeros = Buffer.alloc(MB);
  for (let i = 0; i < 1900; i++) {
    if (!gzip.write(zeros)) await new Promise((resolve) => gzip.once('drain', resolve));
  }
  await new Promise((resolve) => gzip.end(resolve));
  return Buffer.concat(out);
}

/** Keys under `prefix`, counted by a fresh client. */
async function countKeys(endpoint: string, prefix: string): Promise<number> {
  const client = new RawClient(endpoint);
  try {
    const end = Buffer.from(prefix);
    end[end.length - 1] = (end[end.length - 1] ?? 0) + 1;
    const outcome = await client.call('KV', 'Range', {
      key: b64(prefix),
      range_end: end.toString('base64'),
      count_only: true,
    });
    assert.ok('ok' in outcome, JSON.stringify(outcome));
    return Number(outcome.ok.count);
  } finally {
    client.close();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

describe('HTTP/2 attacks on kvmq serve', () => {
  let bomb: Buffer;

  before(async () => {
    bomb = await gzipBomb();
  });

  test('a) a gzip bomb is refused before it is inflated', { timeout: 60_000 }, async (t) => {
    await underAttack(t, async ({ server }) => {
      const message = grpcMessage(bomb, 1);
      const named = await http2Call(server.endpoint, { 'grpc-encoding': 'gzip' }, message);
      assert.equal(named.status, '12');
      assert.equal(named.message, 'grpc: Decompressor is not installed for grpc-encoding "gzip"');
      const unnamed = await http2Call(server.endpoint, {}, message);
      assert.equal(unnamed.status, '13');
      assert.equal(unnamed.message, 'grpc: compressed flag set with identity or empty encoding');
      t.diagnostic(`bomb of ${bomb.length} bytes refused twice`);
    });
  });

  test('b) a 1 MiB put in 1-byte DATA frames is answered in linear time', { timeout: 60_000 }, async (t) => {
    await underAttack(t, async ({ server }) => {
      const conn = await new RawConnection(server.endpoint).start();
      const body = grpcMessage(putRequest('onebyte', Buffer.alloc(MB, 1)));
      conn.write(frame(Type.HEADERS, Flag.END_HEADERS, 1, grpcHeaders(PUT_PATH)));
      const started = performance.now();
      let sent = 0;
      while (sent < body.length && !conn.closed) {
        const room = Math.min(
          conn.connectionWindow - sent,
          conn.initialStreamWindow + (conn.streamCredit.get(1) ?? 0) - sent,
          body.length - sent,
          8192,
        );
        if (room <= 0) {
          await conn.until(() => false, 20);
          continue;
        }
        const frames: Buffer[] = [];
        for (let i = 0; i < room; i++) {
          const last = sent + i === body.length - 1;
          frames.push(frame(Type.DATA, last ? Flag.END_STREAM : 0, 1, body.subarray(sent + i, sent + i + 1)));
        }
        sent += room;
        if (!conn.write(Buffer.concat(frames))) await conn.drained(5000);
        // The probe runs in this process: making a million frames in one go would stall it here, not the server.
        else await new Promise((resolve) => setImmediate(resolve));
      }
      const answered = await conn.until(
        () => conn.frames.some((f) => f.type === Type.HEADERS && f.stream === 1 && (f.flags & Flag.END_STREAM) !== 0),
        20_000,
      );
      const ms = performance.now() - started;
      conn.destroy();
      t.diagnostic(`${sent} one-byte frames answered after ${ms.toFixed(0)} ms`);
      assert.ok(answered, 'no answer to the put');
      assert.equal(await countKeys(server.endpoint, 'onebyte'), 1);
    });
  });

  test('c) rapid reset: puts reset in the read that carried them are not applied', { timeout: 60_000 }, async (t) => {
    await underAttack(t, async ({ server }) => {
      const deadline = Date.now() + 6000;
      let attempted = 0;
      let connections = 0;
      let goaways = 0;
      while (Date.now() < deadline) {
        const conn = await new RawConnection(server.endpoint).start();
        connections++;
        let dataSent = 0;
        let id = 1;
        while (!conn.closed && Date.now() < deadline && id < 2 ** 30) {
          const batch: Buffer[] = [];
          for (let i = 0; i < 100; i++, id += 2) {
            const data = grpcMessage(putRequest(`rr/${connections}/${id}`, Buffer.from('v')));
            dataSent += data.length;
            batch.push(
              Buffer.concat([
                frame(Type.HEADERS, Flag.END_HEADERS, id, grpcHeaders(PUT_PATH)),
                frame(Type.DATA, Flag.END_STREAM, id, data),
                frame(Type.RST_STREAM, 0, id, u32(CANCEL)),
              ]),
            );
            attempted++;
          }
          // Each triple in one write, so the reset comes in the same read as the request.
          for (const triple of batch) conn.write(triple);
          if (conn.connectionWindow - dataSent < 64 * 1024)
            await conn.until(() => conn.connectionWindow - dataSent > 64 * 1024, 1000);
          if (!(await conn.drained(1000))) break;
          await sleep(0);
        }
        if (conn.goaway() !== null) goaways++;
        conn.destroy();
      }
      await sleep(500);
      const applied = await countKeys(server.endpoint, 'rr/');
      t.diagnostic(
        `${attempted} reset puts on ${connections} connections (${goaways} ended by GOAWAY); ${applied} applied`,
      );
      // A put runs only if its stream is still open on the turn after its END_STREAM was read, so its reset
      // is always seen first when it comes in the same socket read. One write of the test can still reach
      // the server in two reads far apart (its send buffer was full), which lets that put through: 1 to 3
      // in 120,000 here.
      assert.ok(applied * 1000 <= attempted, `${applied} of ${attempted} reset puts applied`);
    });
  });

  test('d) a CONTINUATION flood closes the connection', { timeout: 60_000 }, async (t) => {
    await underAttack(t, async ({ server }) => {
      const conn = await new RawConnection(server.endpoint).start();
      const block = grpcHeaders(PUT_PATH);
      conn.write(frame(Type.HEADERS, 0, 1, block.subarray(0, 4)));
      const empty = frame(Type.CONTINUATION, 0, 1);
      const batch = Buffer.concat(Array.from({ length: 5000 }, () => empty));
      let sent = 0;
      const deadline = Date.now() + 5000;
      while (!conn.closed && conn.goaway() === null && Date.now() < deadline) {
        conn.write(batch);
        sent += 5000;
        await conn.drained(200);
      }
      const closed = await conn.until(() => conn.goaway() !== null, 2000);
      t.diagnostic(`${sent} CONTINUATION frames sent; GOAWAY ${JSON.stringify(conn.goaway())}`);
      conn.destroy();
      assert.ok(closed || conn.closed, 'the connection is still open');
    });
  });

  for (const [name, flood] of [
    ['PING', frame(Type.PING, 0, 0, Buffer.alloc(8))],
    ['SETTINGS', frame(Type.SETTINGS, 0, 0, Buffer.from([0, 2, 0, 0, 0, 0]))],
  ] as const) {
    test(`e) a ${name} flood from a client that never reads is cut or held back`, { timeout: 60_000 }, async (t) => {
      await underAttack(t, async ({ server }) => {
        const conn = await new RawConnection(server.endpoint).start();
        conn.stopReading();
        const batch = Buffer.concat(Array.from({ length: 2000 }, () => flood));
        let sent = 0;
        let stalled = false;
        const deadline = Date.now() + 5000;
        while (!conn.closed && Date.now() < deadline) {
          conn.write(batch);
          sent += 2000;
          if (!(await conn.drained(1000))) {
            stalled = !conn.closed;
            break;
          }
        }
        t.diagnostic(`${sent} ${name} frames written; closed ${conn.closed}, server stopped reading ${stalled}`);
        conn.destroy();
        assert.ok(conn.closed || stalled, 'the server kept taking the flood');
      });
    });
  }

  test(
    'f) DATA past the flow-control window, and a unary call fed messages forever',
    { timeout: 60_000 },
    async (t) => {
      await underAttack(t, async ({ server }) => {
        for (const [what, headers] of [
          ['gRPC put', grpcHeaders(PUT_PATH)],
          [
            'non-gRPC POST',
            Buffer.concat([indexed(3), indexed(6), literal(':path', '/x'), literal(':authority', 'l')]),
          ],
        ] as const) {
          const conn = await new RawConnection(server.endpoint).start();
          await conn.until(() => conn.initialStreamWindow !== 65535, 2000);
          conn.write(frame(Type.HEADERS, Flag.END_HEADERS, 1, headers));
          const chunk = Buffer.alloc(16_384, 1);
          chunk.writeUInt32BE(2 * MB, 1);
          chunk[0] = 0;
          // Ten times the stream's window, at once.
          const burst = Buffer.concat(Array.from({ length: 320 }, () => frame(Type.DATA, 0, 1, chunk)));
          conn.write(burst);
          const ended = await conn.until(() => conn.resets().length > 0 || conn.goaway() !== null, 5000);
          t.diagnostic(`${what}: resets ${JSON.stringify(conn.resets())}, GOAWAY ${JSON.stringify(conn.goaway())}`);
          conn.destroy();
          assert.ok(ended || conn.closed, `${what}: the stream went on`);
        }

        // A unary stream fed small messages without end: ended after the first.
        const session = connectHttp2(`http://${server.endpoint}`);
        session.on('error', () => undefined);
        const req = session.request({ ':method': 'POST', ':path': PUT_PATH, 'content-type': 'application/grpc' });
        req.on('error', () => undefined);
        let status: unknown;
        const take = (h: Record<string, unknown>): void => {
          status ??= h['grpc-status'];
        };
        req.on('response', take);
        req.on('trailers', take);
        req.resume();
        const message = grpcMessage(putRequest('fed', Buffer.alloc(1024)));
        let written = 0;
        const closed = new Promise<void>((resolve) => req.on('close', resolve));
        const deadline = Date.now() + 5000;
        while (!req.closed && Date.now() < deadline) {
          if (!req.write(message)) await Promise.race([new Promise((r) => req.once('drain', r)), closed, sleep(200)]);
          written += message.length;
        }
        await Promise.race([closed, sleep(2000)]);
        session.destroy();
        t.diagnostic(`unary fed ${written} bytes before it ended: status ${String(status)}, reset ${req.rstCode}`);
        assert.ok(req.closed, 'the unary stream is still open');
        assert.equal(status, '13');
        assert.ok(written < 16 * MB);
      });
    },
  );

  test('g) invalid frames close the connection at once', { timeout: 60_000 }, async (t) => {
    await underAttack(t, async ({ server }) => {
      const cases: [string, Buffer][] = [
        ['garbage after the preface', Buffer.alloc(4096, 0xfe)],
        ['a frame larger than the maximum frame size', frame(Type.HEADERS, Flag.END_HEADERS, 1, Buffer.alloc(20_000))],
        ['SETTINGS on a stream', frame(Type.SETTINGS, 0, 1)],
        ['SETTINGS of a bad length', frame(Type.SETTINGS, 0, 0, Buffer.alloc(5))],
        ['PING on a stream', frame(Type.PING, 0, 1, Buffer.alloc(8))],
        ['PING of a bad length', frame(Type.PING, 0, 0, Buffer.alloc(7))],
        ['DATA on stream 0', frame(Type.DATA, 0, 0, Buffer.alloc(10))],
        ['HEADERS on stream 0', frame(Type.HEADERS, Flag.END_HEADERS, 0, grpcHeaders(PUT_PATH))],
        ['WINDOW_UPDATE of 0 on the connection', frame(Type.WINDOW_UPDATE, 0, 0, u32(0))],
        ['GOAWAY on a stream', frame(Type.GOAWAY, 0, 1, Buffer.alloc(8))],
        ['an even stream ID', frame(Type.HEADERS, Flag.END_HEADERS, 2, grpcHeaders(PUT_PATH))],
        ['CONTINUATION without HEADERS', frame(Type.CONTINUATION, Flag.END_HEADERS, 1, Buffer.alloc(4))],
        ['a bad HPACK index', frame(Type.HEADERS, Flag.END_HEADERS, 1, indexed(1000))],
      ];
      for (const [what, bad] of cases) {
        const conn = await new RawConnection(server.endpoint).start();
        conn.write(bad);
        const started = performance.now();
        const cut = await conn.until(() => conn.goaway() !== null, 2000);
        t.diagnostic(
          `${what}: GOAWAY ${JSON.stringify(conn.goaway())} after ${(performance.now() - started).toFixed(0)} ms`,
        );
        conn.destroy();
        assert.ok(cut || conn.closed, `${what}: the connection stayed open`);
      }
      // Not HTTP/2 at all after a partial preface: closed too.
      const conn = new RawConnection(server.endpoint);
      await conn.opened;
      conn.write(Buffer.concat([PREFACE.subarray(0, 10), Buffer.alloc(100, 0)]));
      assert.ok((await conn.until(() => false, 2000)) || conn.closed, 'a broken preface was kept');
      conn.destroy();
    });
  });

  test('i) a client that asks for large answers and never reads is held back', { timeout: 60_000 }, async (t) => {
    await underAttack(t, async ({ server }) => {
      const client = new RawClient(server.endpoint);
      await client.call('KV', 'Put', { key: b64('big'), value: Buffer.alloc(MB, 7).toString('base64') });
      client.close();
      const conn = await new RawConnection(server.endpoint).start();
      conn.stopReading();
      const range = grpcMessage(Buffer.concat([Buffer.from([0x0a, 3]), Buffer.from('big')]));
      let streams = 0;
      for (let id = 1; id < 1000; id += 2) {
        conn.write(frame(Type.HEADERS, Flag.END_HEADERS, id, grpcHeaders('/etcdserverpb.KV/Range')));
        conn.write(frame(Type.DATA, Flag.END_STREAM, id, range));
        streams++;
        if (id % 50 === 1) await sleep(50);
      }
      await sleep(1000);
      conn.startReading();
      await conn.until(() => conn.closed, 2000);
      const refused = conn.resets().filter((r) => r.code === 0x7).length;
      t.diagnostic(
        `${streams} requests for 1 MiB each, unread: ${refused} refused (REFUSED_STREAM), GOAWAY ${JSON.stringify(conn.goaway())}, closed ${conn.closed}`,
      );
      conn.destroy();
      assert.ok(refused > 0 || conn.goaway() !== null || conn.closed, 'every request was taken');
    });
  });

  test('h) an HPACK bomb is refused', { timeout: 60_000 }, async (t) => {
    await underAttack(t, async ({ server }) => {
      const conn = await new RawConnection(server.endpoint).start();
      // One 4000-byte header in the dynamic table, then referenced 12,000 times: a 48 MB header list.
      const block = Buffer.concat([
        grpcHeaders(PUT_PATH),
        literal('x-bomb', 'a'.repeat(4000), true),
        Buffer.concat(Array.from({ length: 12_000 }, () => indexed(62))),
      ]);
      let streams = 0;
      for (let id = 1; id < 400 && !conn.closed; id += 2) {
        const first = block.subarray(0, 16_000);
        conn.write(frame(Type.HEADERS, Flag.END_STREAM, id, first));
        conn.write(frame(Type.CONTINUATION, Flag.END_HEADERS, id, block.subarray(16_000)));
        streams++;
        if (!(await conn.drained(1000))) break;
      }
      await conn.until(() => conn.resets().length >= streams || conn.goaway() !== null, 3000);
      const resets = conn.resets();
      t.diagnostic(
        `${streams} bombs sent; ${resets.length} reset (codes ${[...new Set(resets.map((r) => r.code))].join(',')}); GOAWAY ${JSON.stringify(conn.goaway())}`,
      );
      const answered = conn.frames.filter((f) => f.type === Type.HEADERS).length;
      conn.destroy();
      assert.ok(resets.length > 0 || conn.goaway() !== null || conn.closed, 'the bombs were taken');
      assert.equal(answered, 0, 'a bomb was answered as a request');
    });
  });
});
