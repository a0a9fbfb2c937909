/**
 * `zookeeper://[user:password@]host:port[,host:port...]/dir[?sessionTimeoutMs=N]`
 *
 * `/dir` is a ZooKeeper chroot that must exist: kvmq keeps every queue under
 * it and never writes outside it. user:password authenticates with the digest
 * scheme; the nodes kvmq creates are then readable and writable only by that
 * user (ZooKeeper's CREATOR_ALL ACL).
 */
import { parseUrlOptions, redactUrl, urlRefusal } from '../contract/url-options.js';
import { SECOND } from '../../model/time.js';

export const ZOOKEEPER_URL_FORM =
  'zookeeper://[user:password@]host:2181[,host2:2181...]/dir[?sessionTimeoutMs=6000], where dir is a ZooKeeper ' +
  'chroot that exists';

export interface ZookeeperUrl {
  /** host:port,host:port as the client takes it. */
  readonly hosts: string;
  /** The chroot, '/a/b'. */
  readonly chroot: string;
  readonly auth: string | null;
  readonly sessionTimeoutMs: number;
  /** The URL with the password hidden, for messages. */
  readonly display: string;
}

const DEFAULT_SESSION_TIMEOUT_MS = 6 * SECOND;
const HOST_PORT = /^(?:\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(?::\d{1,5})?$/;
// Path segments become znode names: keep them plain.
const SEGMENT = /^[A-Za-z0-9_.-]+$/;

export function parseZookeeperUrl(url: string): ZookeeperUrl {
  const fail = (why: string): never => {
    throw urlRefusal(url, why, `the form is ${ZOOKEEPER_URL_FORM}`);
  };
  const match = /^zookeeper:\/\/([^/?#]*)([^?#]*)(?:\?([^#]*))?$/i.exec(url);
  if (match === null) return fail('not a zookeeper:// URL');
  const [, authority = '', path = '', query = ''] = match;
  const at = authority.lastIndexOf('@');
  const userInfo = at < 0 ? null : authority.slice(0, at);
  const hostList = at < 0 ? authority : authority.slice(at + 1);
  let auth: string | null = null;
  if (userInfo !== null) {
    const colon = userInfo.indexOf(':');
    if (colon <= 0 || colon === userInfo.length - 1) return fail('credentials must be user:password');
    auth = `${decodeURIComponent(userInfo.slice(0, colon))}:${decodeURIComponent(userInfo.slice(colon + 1))}`;
  }
  const hosts = hostList.split(',').map((h) => h.trim());
  if (hosts.length === 0 || hosts.some((h) => h === '' || !HOST_PORT.test(h))) {
    return fail('list servers as host:port, separated by commas');
  }
  const withPorts = hosts.map((h) => (/:\d+$/.test(h) && !h.endsWith(']') ? h : `${h}:2181`));
  const segments = path.split('/').filter((s) => s !== '');
  if (segments.length === 0) {
    return fail('name the dir (a ZooKeeper chroot) kvmq may use, e.g. zookeeper://localhost:2181/kvmq');
  }
  if (segments.some((s) => !SEGMENT.test(s) || s === '.' || s === '..' || s === 'zookeeper')) {
    return fail(`the dir ${JSON.stringify(path)} must be plain names (letters, digits, '_', '.', '-')`);
  }
  const options = parseUrlOptions(url, query, ['sessionTimeoutMs']);
  const timeout = options.get('sessionTimeoutMs');
  const sessionTimeoutMs = timeout === undefined ? DEFAULT_SESSION_TIMEOUT_MS : Number(timeout);
  if (!Number.isInteger(sessionTimeoutMs) || sessionTimeoutMs < 1000 || sessionTimeoutMs > 600_000) {
    return fail('sessionTimeoutMs must be a whole number of milliseconds from 1000 to 600000');
  }
  return {
    hosts: withPorts.join(','),
    chroot: `/${segments.join('/')}`,
    auth,
    sessionTimeoutMs,
    display: redactUrl(url),
  };
}
