/**
 * Flows on Redis: a tree written by one script call (flow.lua), every message or none, and each child's end
 * counted for its parent in the script of that end (lua/lib/flows.lua). The tree is read back here, a level
 * at a time: a child's `parent` link up to the root, then each parent's `children` down, each node's status
 * by the status script.
 */
import { FlowRefusedError, type FlowRefusal } from '../../model/errors.js';
import { encodeContent, list, text } from './codec.js';
import { encodeMetadata } from './enqueue.js';
import { messageStatus } from './inspect.js';
import { queueKey } from './keys.js';
import { SCRIPTS } from './scripts.generated.js';
import type { ScriptArg, Scripts } from './scripts.js';
import type { ChildFailurePolicy, FlowNode } from '../../model/flow.js';
import type { MessageStatus } from '../../model/types.js';
import type { FlowMessage } from '../contract/contract.js';

/** onChildFailure as `parent` and `owes` keep it. */
const POLICY_LETTER: Readonly<Record<ChildFailurePolicy, string>> = { fail: 'f', ignore: 'i', remove: 'r' };

/** A message of a flow: its queue and id. */
interface Ref {
  readonly queue: string;
  readonly id: string;
}

/** Writes a flow's messages (parents first) in one script call; FlowRefusedError, nothing written, for an id taken. */
export async function writeFlow(scripts: Scripts, messages: readonly FlowMessage[]): Promise<void> {
  const root = messages[0];
  if (root === undefined) return;
  const args: ScriptArg[] = [messages.length];
  for (const { queue, message: m, parent, children, onChildFailure } of messages) {
    args.push(
      queue,
      m.id,
      encodeContent(m.payload, m.encoding),
      encodeMetadata(m.metadata),
      m.filterClass,
      m.initialBackoffMs,
      m.policy ?? '',
      m.priority === 0 ? '' : m.priority,
      m.group ?? '',
      parent === null ? 0 : parent + 1,
      children,
      POLICY_LETTER[onChildFailure],
    );
  }
  for (const [i, { dependsOn }] of messages.entries()) {
    for (const link of dependsOn) args.push(i + 1, link.queue, link.id, POLICY_LETTER[link.onChildFailure]);
  }
  const reply = list(await scripts.run(SCRIPTS.flow, root.queue, args)).map((part) => text(part) ?? '');
  const [answer, queue, id, reason = 'exists'] = reply;
  if (answer === 'ok' || queue === undefined || id === undefined) return;
  // The state is read after the refusal: nothing was written, so the flow stays refused whatever it reads.
  const status = await messageStatus(scripts, queue, id);
  throw new FlowRefusedError(
    queue,
    id,
    status?.state ?? (reason === 'exists' ? 'gone' : 'none'),
    reason as FlowRefusal,
  );
}

/** Reads flow links: `parent` or `children` fields of messages in their queues, in one round trip. */
type LinkReader = (name: 'parent' | 'children', refs: readonly Ref[]) => Promise<(string | null)[]>;

/** A LinkReader on the store's connection: one pipeline of HGETs. */
export function linkReader(scripts: Scripts, prefix: string): LinkReader {
  return (name, refs) =>
    scripts.call(async (redis) => {
      const pipeline = redis.pipeline();
      for (const { queue, id } of refs) pipeline.hget(queueKey(prefix, queue, name), id);
      return ((await pipeline.exec()) ?? []).map(([error, value]) => {
        if (error !== null) throw error;
        return typeof value === 'string' ? value : null;
      });
    });
}

/** The parent a `parent` link names ('<policy> <queue> <id>'). */
function parentOf(link: string): Ref {
  const [, queue = '', id = ''] = link.split(' ');
  return { queue, id };
}

/** The children a `children` value lists (a '<queue> <id>' line each). */
function childrenOf(value: string | null): Ref[] {
  if (value === null) return [];
  return value.split('\n').map((line) => {
    const [queue = '', id = ''] = line.split(' ');
    return { queue, id };
  });
}

/** The statuses of a message's children that still exist, in the order written. */
export async function flowChildren(
  scripts: Scripts,
  links: LinkReader,
  queue: string,
  id: string,
): Promise<MessageStatus[]> {
  const [value = null] = await links('children', [{ queue, id }]);
  const statuses = await Promise.all(childrenOf(value).map((ref) => messageStatus(scripts, ref.queue, ref.id)));
  return statuses.filter((status): status is MessageStatus => status !== null);
}

/** The tree of the flow the message belongs to, from its root (a message in none: itself alone); null if gone. */
export async function flowTree(
  scripts: Scripts,
  links: LinkReader,
  queue: string,
  id: string,
): Promise<FlowNode | null> {
  let top: Ref = { queue, id };
  let status = await messageStatus(scripts, queue, id);
  if (status === null) return null;
  for (;;) {
    const [link = null] = await links('parent', [top]);
    if (link === null) break;
    const up = parentOf(link);
    const above = await messageStatus(scripts, up.queue, up.id);
    if (above === null) break; // the parent was removed: its children are the tree's top
    top = up;
    status = above;
  }
  const root: Branch = { status, children: [] };
  let level = [root];
  while (level.length > 0) {
    const values = await links(
      'children',
      level.map((node) => node.status),
    );
    const next = await Promise.all(
      level.flatMap((node, i) =>
        childrenOf(values[i] ?? null).map(async (ref) => {
          const child = await messageStatus(scripts, ref.queue, ref.id);
          if (child === null) return null;
          const branch: Branch = { status: child, children: [] };
          return { parent: node, branch };
        }),
      ),
    );
    level = [];
    for (const found of next) {
      if (found === null) continue;
      found.parent.children.push(found.branch);
      level.push(found.branch);
    }
  }
  return toNode(root);
}

/** A node of the tree being read: its status, and its children found so far. */
interface Branch {
  readonly status: MessageStatus;
  readonly children: Branch[];
}

function toNode(branch: Branch): FlowNode {
  return { ...branch.status, children: branch.children.map(toNode) };
}
