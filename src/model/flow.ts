/**
 * Flows: a tree of messages written at once, each parent waiting (`waiting-children`) until every child of it has
 * ended. The shapes callers give and get back, and the walk that checks a tree and lays it out parents first.
 */
import { checkKnownKeys, checkMessageId, checkPlainObject, checkQueueName } from './validate.js';
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
  /** Messages already enqueued that become children of this one, in the flow's write. */
  readonly dependsOn?: readonly FlowDependency[];
}

/** A message already enqueued that a flow's node waits for, as its child (`FlowTree.dependsOn`). */
export interface FlowDependency {
  readonly queue: string;
  readonly id: string;
  /** What its final failure does to the node. @defaultValue 'fail' */
  readonly onChildFailure?: ChildFailurePolicy;
}

/** A checked dependency, as a store links it: the message, and its policy. */
export interface FlowLink {
  readonly queue: string;
  readonly id: string;
  readonly onChildFailure: ChildFailurePolicy;
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
export const FLOW_NODE_KEYS = ['queue', 'payload', 'onChildFailure', 'children', 'dependsOn'] as const;

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
  /** Where it is in the tree, as errors name it (flowNodePath). */
  readonly path: string;
  readonly queue: string;
  readonly parent: number | null;
  readonly children: number;
  readonly onChildFailure: ChildFailurePolicy;
  /** The messages already enqueued it waits for too. */
  readonly dependsOn: readonly FlowLink[];
}

/** Where a node is in a flow's tree, as errors name it: `the root`, `children[1]`, `children[1].children[0]`. */
export function flowNodePath(parentPath: string | null, index: number): string {
  if (parentPath === null) return 'the root';
  return parentPath === 'the root' ? `children[${index}]` : `${parentPath}.children[${index}]`;
}

/**
 * Runs a check of the node at `path`: a TypeError or RangeError it throws is thrown again naming the node, so
 * that a mistake in a tree of thousands says where it is.
 */
export function atFlowNode<T>(path: string, check: () => T): T {
  try {
    return check();
  } catch (error) {
    if (!(error instanceof TypeError || error instanceof RangeError)) throw error;
    const Named = error instanceof RangeError ? RangeError : TypeError;
    throw new Named(`flow node ${path}: ${error.message}`, { cause: error });
  }
}

interface Pending {
  readonly node: unknown;
  readonly parent: number | null;
  readonly path: string;
}

/** Checks a flow's shape (not its messages' options) and lays it out parents first, depth first. */
export function flowSteps(root: unknown): FlowStep[] {
  const steps: FlowStep[] = [];
  const stack: Pending[] = [{ node: root, parent: null, path: flowNodePath(null, 0) }];
  // Dependencies count against the bound too: each is a message the flow's write links.
  let linked = 0;
  while (stack.length > 0) {
    const { node, parent, path } = stack.pop() as Pending;
    const step = atFlowNode(path, () => flowStep(node, parent, path));
    linked += step.dependsOn.length;
    if (steps.length + 1 + stack.length + step.children + linked > FLOW_MAX_NODES) {
      throw new TypeError(`a flow has at most ${FLOW_MAX_NODES} nodes, its dependsOn messages included`);
    }
    steps.push(step);
    const index = steps.length - 1;
    const children = step.tree.children ?? [];
    for (let i = children.length - 1; i >= 0; i--) {
      stack.push({ node: children[i], parent: index, path: flowNodePath(path, i) });
    }
  }
  return steps;
}

/** One node's own shape, checked (its children are checked as nodes of their own). */
function flowStep(node: unknown, parent: number | null, path: string): FlowStep {
  const tree = checkPlainObject('a flow node', node) as unknown as FlowTree;
  // Named by atFlowNode: `flow node children[0]: unknown option ...`.
  checkKnownKeys('', tree, [...FLOW_NODE_KEYS, ...FLOW_MESSAGE_KEYS]);
  const children: unknown = tree.children ?? [];
  if (!Array.isArray(children)) throw new TypeError('children must be an array of flow nodes');
  const policy = checkPolicy(tree.onChildFailure);
  if (parent === null && tree.onChildFailure !== undefined) {
    throw new TypeError("onChildFailure is a child's option: the flow's root has no parent");
  }
  return {
    tree,
    path,
    queue: checkQueueName(tree.queue),
    parent,
    children: children.length,
    onChildFailure: policy,
    dependsOn: flowLinks(tree.dependsOn),
  };
}

function checkPolicy(value: unknown): ChildFailurePolicy {
  const policy = value ?? 'fail';
  if (!CHILD_FAILURE_POLICIES.includes(policy as ChildFailurePolicy)) {
    throw new TypeError(`onChildFailure must be one of ${CHILD_FAILURE_POLICIES.join(', ')}`);
  }
  return policy as ChildFailurePolicy;
}

/** A node's `dependsOn`, checked: an array of `{ queue, id, onChildFailure? }`. */
function flowLinks(value: unknown): FlowLink[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw new TypeError('dependsOn must be an array of { queue, id }');
  return value.map((item: unknown) => {
    const link = checkPlainObject('a flow dependency', item);
    checkKnownKeys('dependsOn', link, ['queue', 'id', 'onChildFailure']);
    return {
      queue: checkQueueName(link.queue),
      id: checkMessageId(link.id),
      onChildFailure: checkPolicy(link.onChildFailure),
    };
  });
}

/**
 * Throws a TypeError when a flow names a message twice: a node's (queue, id) or a dependency's, each may
 * appear once (a message has one parent).
 */
export function checkFlowNames(steps: readonly FlowStep[], ids: readonly string[]): void {
  const seen = new Set<string>();
  const add = (queue: string, id: string, what: string): void => {
    const key = `${queue}\n${id}`;
    if (seen.has(key)) throw new TypeError(`a flow names one message (queue and id) twice: ${what} ${queue}/${id}`);
    seen.add(key);
  };
  for (const [i, step] of steps.entries()) add(step.queue, ids[i] ?? '', 'the node');
  for (const step of steps) for (const link of step.dependsOn) add(link.queue, link.id, 'the dependency');
}

/** The written ids in the tree's shape, from the steps and each step's id. */
export function flowIds(steps: readonly FlowStep[], ids: readonly string[]): FlowIds {
  const nodes = steps.map((step, i) => ({ queue: step.queue, id: ids[i] ?? '', children: [] as FlowIds[] }));
  for (const [i, step] of steps.entries()) {
    if (step.parent !== null) nodes[step.parent]?.children.push(nodes[i] as FlowIds);
  }
  return nodes[0] as FlowIds;
}
