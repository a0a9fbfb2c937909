/**
 * The dashboard's live streams (src/dashboard/live.ts) on a real HTTP server: closing the hub while a poll
 * of the store is under way must not write to the streams it just ended.
 */
import assert from 'node:assert/strict';
import { createServer, get, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { LiveHub, type LiveSource } from '../src/dashboard/live.js';
import { gate } from './support/wait.js';

void test('a poll that ends after the hub closed its streams writes nothing to them', async () => {
  const release = gate();
  let polls = 0;
  // The first poll waits until the streams are ended; it then answers as a store would.
  const source: LiveSource = async () => {
    polls += 1;
    await release.opened;
    return [];
  };
  const hub = new LiveHub(10, 60_000);
  const server = createServer((req, res) => hub.open(req, res, 'queues', source));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const failures: unknown[] = [];
  const onRejection = (reason: unknown): void => void failures.push(reason);
  process.on('unhandledRejection', onRejection);
  try {
    const { port } = server.address() as AddressInfo;
    const response = await new Promise<IncomingMessage>((resolve) => get(`http://127.0.0.1:${port}/`, resolve));
    assert.equal(response.statusCode, 200);
    assert.equal(polls, 1);
    const ended = new Promise<void>((resolve) => response.on('end', resolve).resume());
    // The poll answers in the same turn as the close: before the ended streams' 'close' events can come.
    hub.close();
    release.open();
    await ended;
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.deepEqual(failures, []);
  } finally {
    process.off('unhandledRejection', onRejection);
    await new Promise((resolve) => server.close(resolve));
  }
});
