/**
 * The conformance suite with the etcd store pointed at `kvmq serve` (etcd://
 * its address): every test gets its own key prefix, as on a real etcd.
 */
import { randomBytes } from 'node:crypto';
import { after } from 'node:test';
import { conformance } from './conformance/index.js';
import { ETCD_CAPABILITIES, ETCD_FLOW_NODES } from './fixtures/etcd-support.js';
import { startServe, type ServeProcess } from './fixtures/serve-support.js';

let server: Promise<ServeProcess> | null = null;

conformance({
  name: 'etcd on kvmq serve',
  overNetwork: true,
  shortSession: { option: 'leaseTtlMs=3000', ms: 3000 },
  async url() {
    server ??= startServe();
    const { endpoint } = await server;
    return `etcd://${endpoint}/t-${randomBytes(6).toString('hex')}`;
  },
  capabilities: ETCD_CAPABILITIES,
  flowNodes: ETCD_FLOW_NODES,
});

after(async () => {
  if (server !== null) await (await server).stop();
});
