/** client.metrics() on the embedded SQLite store: a fresh file per test. */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { metricsSuite } from './metrics/suite.js';

const dirs: string[] = [];

after(async () => {
  await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
});

metricsSuite({
  name: 'sqlite',
  async url() {
    const dir = await mkdtemp(join(tmpdir(), 'kvmq-metrics-'));
    dirs.push(dir);
    return `sqlite:${join(dir, 'kvmq.db')}`;
  },
});
