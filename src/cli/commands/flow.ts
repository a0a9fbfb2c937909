/** `kvmq flow show`: a flow's tree, from its root, each node with its state, from any node of it. */
import type { FlowNode } from '../../index.js';
import type { Command } from '../command.js';
import { UsageError } from '../errors.js';
import { commandUsage } from '../help.js';
import { printOneMessage } from '../one-message.js';
import { jsonOf } from '../values.js';

export const flow: Command = {
  name: 'flow',
  summary: "show a flow's tree (parent and children, each with its state) from any message of it",
  usage: commandUsage(
    'flow show <queue> <id>',
    'Prints the tree of the flow the message belongs to, from its root: one line per message, indented under\n' +
      "its parent, '<queue>/<id> <state>' and the outcome's error for a failed one. A message in no flow is a\n" +
      'tree of one. Exit 1 when it is not found.',
    [],
  ),

  async run(argv) {
    const [sub, ...rest] = argv;
    if (sub !== 'show') {
      throw new UsageError(sub === undefined ? 'missing subcommand: show' : `unknown subcommand '${sub}': use show`);
    }
    return printOneMessage(rest, (client, queue, id) => client.getFlow(queue, id), {
      text: (tree) => treeLines(tree, '').join('\n'),
      json: nodeJson,
    });
  },
};

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
