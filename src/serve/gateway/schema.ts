/**
 * etcd's message definitions as protobufjs reflection, built from the descriptor scripts/proto.mjs
 * generates from the vendored .proto files: the gateway needs each field's type to read JSON as strictly
 * as etcd does and to print it as etcd does.
 */
import { readFileSync } from 'node:fs';
import protobuf from 'protobufjs/light.js';

let root: protobuf.Root | null = null;

export function etcdSchema(): protobuf.Root {
  if (root !== null) return root;
  // Beside the generated codecs, in src/ and (copied by the build) in dist/.
  const descriptor = readFileSync(new URL('../proto/generated/descriptor.json', import.meta.url), 'utf8');
  const loaded = protobuf.Root.fromJSON(JSON.parse(descriptor) as protobuf.INamespace);
  loaded.resolveAll();
  root = loaded;
  return loaded;
}
