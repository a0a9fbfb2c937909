/**
 * Flows through a client: writing a tree of messages at once (each parent `waiting-children` until its children
 * have ended), and reading a message's flow back.
 */
import {
  atFlowNode,
  checkFlowNames,
  flowIds,
  flowSteps,
  type FlowIds,
  type FlowNode,
  type FlowTree,
} from '../model/flow.js';
import type { Payload, QueueConfig } from '../model/types.js';
import type { EnqueueOptions } from '../model/types.js';
import type { NewMessage, Store } from '../stores/contract/contract.js';

/** How a flow's messages are made: the queue's configuration (for filters), then the checked message. */
export interface FlowMessages {
  config(queue: string): Promise<QueueConfig>;
  prepare(queue: string, payload: Payload, options: EnqueueOptions, config: QueueConfig | null): NewMessage;
}

/** Writes the flow's messages, every one or none; resolves with their ids. */
export async function writeFlow(store: Store, tree: FlowTree, make: FlowMessages): Promise<FlowIds> {
  const steps = flowSteps(tree);
  if (!store.capabilities.flows || store.flow === undefined) throw noFlows(store);
  const configs = new Map<string, QueueConfig>();
  for (const { queue, tree: node } of steps) {
    if (node.filters !== undefined && !configs.has(queue)) configs.set(queue, await make.config(queue));
  }
  const messages = steps.map((step) => ({
    queue: step.queue,
    message: atFlowNode(step.path, () =>
      make.prepare(step.queue, step.tree.payload, step.tree, configs.get(step.queue) ?? null),
    ),
    parent: step.parent,
    children: step.children,
    onChildFailure: step.onChildFailure,
    dependsOn: step.dependsOn,
  }));
  checkFlowNames(
    steps,
    messages.map(({ message }) => message.id),
  );
  await store.flow(messages);
  return flowIds(
    steps,
    messages.map(({ message }) => message.id),
  );
}

/** The tree of the message's flow from its root (queue and id already checked); null once it is gone. */
export function readFlow(store: Store, queue: string, id: string): Promise<FlowNode | null> {
  if (store.flowTree === undefined) throw noFlows(store);
  return store.flowTree(queue, id);
}

/**
 * A store without flows refusing one: a TypeError, as the API documents, of its own class so that the CLI tells
 * it apart from a mistake in the tree.
 */
export class FlowsUnavailable extends TypeError {}

function noFlows(store: Store): TypeError {
  return new FlowsUnavailable(
    `flows are not available on this ${store.kind} store yet; use SQLite, PostgreSQL, Redis (not a cluster), ZooKeeper or etcd`,
  );
}
