/** The conformance suite on the embedded SQLite store: a fresh file in a fresh temp dir per test. */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { conformance } from './conformance/index.js';

const dirs: string[] = [];

after(async () => {
  await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
});

conformance({
  name: 'sqlite',
  async url() {
    const dir = await mkdtemp(join(tmpdir(), 'kvmq-conformance-'));
    dirs.push(dir);
    return `sqlite:${join(dir, 'kvmq.db')}`;
  },
  capabilities: {
    maxPayloadBytes: 1024 * 1024,
    wakeups: true,
    instantRelease: false,
    deadLetterQueue: true,
    overlapClaims: false,
    groupRateLimit: true,
    flows: true,
  },
});
