/**
 * `kvmq flow`: `show` prints a flow's tree, from its root, each node with its state, from any node of it; `add`
 * writes a flow from its tree as JSON, all of it or nothing.
 */
import { FlowsUnavailable } from '../../client/flows.js';
import { FlowRefusedError } from '../../model/errors.js';
import type { Client, FlowIds, FlowNode, FlowTree } from '../../index.js';
import { expectPositionals, parseCommandLine } from '../args.js';
import type { Command } from '../command.js';
import { EXIT_OK, EXIT_REFUSED, isValidationError, UsageError } from '../errors.js';
import { flowTreeOf } from '../flow-input.js';
import { commandUsage } from '../help.js';
import { parseJsonText, readJsonInput } from '../json-input.js';
import { printOneMessage } from '../one-message.js';
import { note, printJson, printLine } from '../output.js';
import { withClient } from '../store.js';
import { jsonOf } from '../values.js';

export const flow: Command = {
  name: 'flow',
  summary: "write a flow (a tree of messages, parents after their children) or show one's tree and states",
  usage: commandUsage(
    'flow add [file]\n       kvmq flow show <queue> <id>',
    "add writes a flow, every message or none: the tree client.flow takes, as JSON, from [file] ('-' or none:\n" +
      'stdin). Each node: "queue", "payload" (a JSON value; {"base64": "..."} for bytes), "children" (nodes),\n' +
      '"dependsOn" ([{"queue", "id", "onChildFailure"}]: messages already enqueued), "onChildFailure" (fail,\n' +
      'ignore, remove) and the options id, priority, runAt, initialBackoffMs, filters, group, metadata,\n' +
      'attempts, backoff, timeoutMs, expireAfterMs. Prints <queue>/<id> of each message written, parents\n' +
      'first (--json: the ids as a tree). A mistake in the tree exits 2; a flow refused (an id that exists, a\n' +
      'dependency missing or with a parent) exits 3 with the reason, nothing written.\n\n' +
      'show prints the tree of the flow the message belongs to, from its root: one line per message, indented\n' +
      "under its parent, '<queue>/<id> <state>' and the outcome's error for a failed one. A message in no flow\n" +
      'is a tree of one. Exit 1 when it is not found.\n\n' +
      'On etcd and kvmq serve a flow past one Txn (about 40 messages) is staged and takes no dependsOn.',
    [],
  ),

  async run(argv) {
    const [sub, ...rest] = argv;
    if (sub === 'add') return addFlow(rest);
    if (sub === 'show') return showFlow(rest);
    throw new UsageError(
      sub === undefined ? 'missing subcommand: add or show' : `unknown subcommand '${sub}': use add or show`,
    );
  },
};

async function addFlow(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(argv, {});
  expectPositionals(positionals, 0, 1, '[file]');
  const { source, text } = await readJsonInput(positionals[0], 'the flow');
  const tree = flowTreeOf(parseJsonText(source, text));
  return withClient(values.store, async (client) => {
    const ids = await writeFlow(client, tree);
    // Refused with the reason, as other commands refuse a message in a state that does not take the action.
    if (ids instanceof FlowRefusedError) {
      note(ids.message);
      return EXIT_REFUSED;
    }
    if (values.json === true) printJson(ids);
    else printLine(idLines(ids).join('\n'));
    return EXIT_OK;
  });
}

/**
 * client.flow: its checks of the tree said as usage mistakes, its refusal returned; a store without flows thrown
 * as it is.
 */
async function writeFlow(client: Client, tree: FlowTree): Promise<FlowIds | FlowRefusedError> {
  try {
    return await client.flow(tree);
  } catch (error) {
    if (error instanceof FlowRefusedError) return error;
    if (isValidationError(error) && !(error instanceof FlowsUnavailable)) throw new UsageError(error.message);
    throw error;
  }
}

/** `<queue>/<id>` of each node, parents first, depth first: the order `flow show` prints. */
function idLines(node: FlowIds): string[] {
  return [`${node.queue}/${node.id}`, ...node.children.flatMap(idLines)];
}

function showFlow(argv: string[]): Promise<number> {
  return printOneMessage(argv, (client, queue, id) => client.getFlow(queue, id), {
    text: (tree) => treeLines(tree, '').join('\n'),
    json: nodeJson,
  });
}

/** Each node as JSON, bytes results as base64 at every depth. */
function nodeJson(node: FlowNode): FlowNode {
  return { ...jsonOf(node), children: node.children.map(nodeJson) };
}

function treeLines(node: FlowNode, indent: string): string[] {
  const error = node.state === 'failed' && node.lastError !== null ? `  ${node.lastError}` : '';
  return [
    `${indent}${node.queue}/${node.id} ${node.state}${error}`,
    ...node.children.flatMap((child) => treeLines(child, `${indent}  `)),
  ];
}
