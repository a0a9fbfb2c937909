/**
 * Flows: a tree of messages written at once, each parent waiting (`waiting-children`) until every child of it has
 * ended. The shapes callers give and get back, and the walk that checks a tree and lays it out parents first.
 */
import { checkKnownKeys, checkPlainObject, checkQueueName } from './validate.js';
import type { BatchItem, MessageStatus } from './types.js';

/**
 * What a child's final failure does to its parent: `fail` (the parent fails, its error naming the child),
 * `ignore` (the parent runs once its other children end), `remove` (the parent's children still waiting are
 * removed and the parent fails).
 */
export type ChildFailurePolicy = 'fail' | 'ignore' | 'remove';

export const CHILD_FAILURE_POLICIES: readonly ChildFailurePolicy[] = ['fail', 'ignore', 'remove'];

/** Nodes a flow may have at most: one transaction writes them all. */
export const FLOW_MAX_NODES = 10_000;

/** One node of `client.flow`: a message of `queue` (its payload and enqueue options) and its children. */
export interface FlowTree extends Omit<BatchItem, 'debounce' | 'allowRequeue' | 'replacePayload' | 'lifo'> {
  readonly queue: string;
  /** What this node's final failure does to its parent. @defaultValue 'fail' */
  readonly onChildFailure?: ChildFailurePolicy;
  /** Messages that must all end before this one is queued; they may be in other queues of the store. */
  readonly children?: readonly FlowTree[];
}

/** The ids a flow was written with, in the tree's shape. */
export interface FlowIds {
  readonly queue: string;
  readonly id: string;
  readonly children: readonly FlowIds[];
}

/** A flow's node as `getFlow` returns it: the message's status, and its children's nodes. */
export interface FlowNode extends MessageStatus {
  readonly children: readonly FlowNode[];
}

/** A child's outcome, as its parent's handler reads it (`job.children()`): its status, `result` included. */
export type ChildStatus = MessageStatus;

/** The options a flow node takes besides the message's own (checked by the client as an enqueue's). */
export const FLOW_NODE_KEYS = ['queue', 'payload', 'onChildFailure', 'children'] as const;

/** The message options a flow node takes: an enqueue's, but not those that need an existing message. */
export const FLOW_MESSAGE_KEYS = [
  'id',
  'filters',
  'metadata',
  'initialBackoffMs',
  'attempts',
  'backoff',
  'timeoutMs',
  'priority',
  'runAt',
  'group',
  'expireAfterMs',
] as const;

/** A checked node, in parents-first order: `parent` is its parent's index in that order (null for the root). */
export interface FlowStep {
  readonly tree: FlowTree;
  readonly queue: string;
  readonly parent: number | null;
  readonly children: number;
  readonly onChildFailure: ChildFailurePolicy;
}

/** Checks a flow's shape (not its messages' options) and lays it out parents first, depth first. */
export function flowSteps(root: unknown): FlowStep[] {
  const steps: FlowStep[] = [];
  const stack: { node: unknown; parent: number | null }[] = [{ node: root, parent: null }];
  while (stack.length > 0) {
    const { node, parent } = stack.pop() as { node: unknown; parent: number | null };
    const tree = checkPlainObject('a flow node', node) as unknown as FlowTree;
    checkKnownKeys('flow', tree, [...FLOW_NODE_KEYS, ...FLOW_MESSAGE_KEYS]);
    const children: unknown = tree.children ?? [];
    if (!Array.isArray(children)) throw new TypeError("a flow node's children must be an array of flow nodes");
    const policy: unknown = tree.onChildFailure ?? 'fail';
    if (!CHILD_FAILURE_POLICIES.includes(policy as ChildFailurePolicy)) {
      throw new TypeError(`onChildFailure must be one of ${CHILD_FAILURE_POLICIES.join(', ')}`);
    }
    if (parent === null && tree.onChildFailure !== undefined) {
      throw new TypeError("onChildFailure is a child's option: the flow's root has no parent");
    }
    steps.push({
      tree,
      queue: checkQueueName(tree.queue),
      parent,
      children: children.length,
      onChildFailure: policy as ChildFailurePolicy,
    });
    if (steps.length + stack.length + children.length > FLOW_MAX_NODES) {
      throw new TypeError(`a flow has at most ${FLOW_MAX_NODES} nodes`);
    }
    const index = steps.length - 1;
    for (let i = children.length - 1; i >= 0; i--) stack.push({ node: children[i], parent: index });
  }
  return steps;
}

/** The written ids in the tree's shape, from the steps and each step's id. */
export function flowIds(steps: readonly FlowStep[], ids: readonly string[]): FlowIds {
  const nodes = steps.map((step, i) => ({ queue: step.queue, id: ids[i] ?? '', children: [] as FlowIds[] }));
  for (const [i, step] of steps.entries()) {
    if (step.parent !== null) nodes[step.parent]?.children.push(nodes[i] as FlowIds);
  }
  return nodes[0] as FlowIds;
}
