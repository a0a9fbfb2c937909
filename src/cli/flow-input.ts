/**
 * `kvmq flow add`'s input: client.flow's tree as JSON. A payload is a JSON value, stored as JSON as client.flow
 * stores it (a string reaches `kvmq work` as its bytes), or `{"base64": "..."}` for bytes: the form `--json`
 * output prints bytes in (jsonOf). JSON has no Date: `runAt` may be ISO 8601 text, as `--run-at` takes it.
 * Everything else of the tree is checked by client.flow itself.
 */
import { flowNodePath, type FlowTree } from '../model/flow.js';
import { UsageError } from './errors.js';
import { parseRunAt } from './scheduling-args.js';

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** The tree with `{"base64": ...}` payloads as bytes and runAt text as ms; a node without a payload is refused. */
export function flowTreeOf(document: unknown): FlowTree {
  // A stack, not recursion: a deep tree is client.flow's to refuse, not a stack overflow here.
  const stack: { node: unknown; path: string }[] = [{ node: document, path: flowNodePath(null, 0) }];
  while (stack.length > 0) {
    const { node, path } = stack.pop() as { node: unknown; path: string };
    if (!isObject(node)) continue;
    if (!Object.hasOwn(node, 'payload')) {
      throw new UsageError(`flow node ${path} has no payload: give a JSON value, or {"base64": "..."} for bytes`);
    }
    node.payload = payloadOf(node.payload, path);
    if (typeof node.runAt === 'string') node.runAt = parseRunAt(node.runAt, `flow node ${path}: runAt`);
    const children = node.children;
    if (!Array.isArray(children)) continue;
    children.forEach((child: unknown, i) => {
      stack.push({ node: child, path: flowNodePath(path, i) });
    });
  }
  return document as FlowTree;
}

/** `{"base64": "..."}` (that one key) as bytes; any other value as it is, a JSON payload. */
function payloadOf(value: unknown, path: string): unknown {
  if (!isObject(value) || Object.keys(value).length !== 1 || !Object.hasOwn(value, 'base64')) return value;
  const text = value.base64;
  if (typeof text !== 'string' || !BASE64.test(text)) {
    throw new UsageError(`flow node ${path}: payload.base64 must be a string of base64, got ${JSON.stringify(text)}`);
  }
  return Buffer.from(text, 'base64');
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
