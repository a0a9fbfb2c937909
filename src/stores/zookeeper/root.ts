/**
 * Opening a store checks the chroot before writing anything: it must exist,
 * this user must be allowed to read it, and it must be kvmq's (the `_kvmq`
 * marker) or empty, in which case kvmq marks it as its own. Its queues are
 * the children that carry the queue marker.
 */
import { StoreAuthError, StoreLayoutError, StoreUrlError } from '../../model/errors.js';
import { isZkError, ZkCode, type ZkSession } from './client.js';
import { QUEUE_MARKER, ROOT_MARKER, ROOT_MARKER_NAME } from './layout.js';
import type { ZookeeperUrl } from './url.js';

export async function checkRoot(zk: ZkSession, url: ZookeeperUrl): Promise<void> {
  const where = `${url.chroot} on ${url.hosts}`;
  if ((await zk.exists('/')) === null) {
    throw new StoreUrlError(
      `the dir ${where} does not exist; create it first (e.g. zkCli.sh -server ${url.hosts.split(',')[0] ?? ''} ` +
        `create ${url.chroot}), or fix the path in ${url.display}`,
    );
  }
  let children: string[];
  try {
    children = (await zk.children('/')).children;
  } catch (error) {
    throw refused(error, where, url);
  }
  if (children.includes(ROOT_MARKER_NAME)) {
    let marker: string;
    try {
      marker = (await zk.get(`/${ROOT_MARKER_NAME}`)).data.toString('utf8');
    } catch (error) {
      throw refused(error, where, url);
    }
    if (marker !== ROOT_MARKER) {
      throw new StoreLayoutError(
        `${where} holds a ${ROOT_MARKER_NAME} node kvmq did not write: ${marker.slice(0, 100)}`,
      );
    }
    return;
  }
  if (children.length > 0) {
    throw new StoreLayoutError(
      `${where} already holds nodes that are not kvmq's (${children.slice(0, 5).join(', ')}${children.length > 5 ? ', ...' : ''}); ` +
        'give kvmq a dir of its own (an empty chroot)',
    );
  }
  try {
    await zk.create(`/${ROOT_MARKER_NAME}`, Buffer.from(ROOT_MARKER));
  } catch (error) {
    if (isZkError(error, ZkCode.NodeExists)) return;
    throw refused(error, where, url);
  }
}

function refused(error: unknown, where: string, url: ZookeeperUrl): unknown {
  if (isZkError(error, ZkCode.NoAuth) || isZkError(error, ZkCode.AuthFailed)) {
    // The digest user may not read or write the dir: a wrong password, or a dir of another user.
    return new StoreAuthError(
      `ZooKeeper refused access to ${where}: ` +
        (url.auth === null
          ? 'it is protected by an ACL; put user:password in the URL (zookeeper://user:password@host:2181/dir)'
          : 'wrong user or password in the URL, or the dir belongs to another user'),
    );
  }
  return error;
}

/** The queues under the chroot, by name: its children that carry kvmq's queue marker (one read each, together). */
export async function listQueues(zk: ZkSession): Promise<string[]> {
  const names = (await zk.children('/')).children.filter((name) => name !== ROOT_MARKER_NAME);
  const reads = await zk.getMany(names.map((name) => `/${name}`));
  return names.filter((_, k) => reads[k]?.data.toString('utf8') === QUEUE_MARKER).sort();
}
