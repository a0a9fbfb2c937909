/**
 * The conformance suite on etcd (started by scripts/servers.mjs): each test gets its own key prefix
 * (`etcd://host:port/t-<random>`), so its queues' protocol keys never meet another test's.
 */
import { randomBytes } from 'node:crypto';
import { conformance } from './conformance/index.js';
import { ETCD_CAPABILITIES, ETCD_FLOW_NODES, etcdTestUrl } from './fixtures/etcd-support.js';

const base = etcdTestUrl();

conformance({
  name: 'etcd',
  overNetwork: true,
  shortSession: { option: 'leaseTtlMs=3000', ms: 3000 },
  url() {
    return Promise.resolve(`${base}/t-${randomBytes(6).toString('hex')}`);
  },
  capabilities: ETCD_CAPABILITIES,
  flowNodes: ETCD_FLOW_NODES,
});
