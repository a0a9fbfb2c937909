/**
 * etcd's message and service definitions as protobufjs reflection, read from the vendored .proto files:
 * the gateway needs each field's type to read JSON as strictly as etcd does, and the services' HTTP
 * bindings to know its routes.
 */
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';

let root: protobuf.Root | null = null;

export function etcdSchema(): protobuf.Root {
  if (root !== null) return root;
  // The same relative place from src/serve/gateway/ and dist/serve/gateway/: the package's proto/ folder.
  const file = fileURLToPath(new URL('../../../proto/etcd/rpc.proto', import.meta.url));
  const loaded = new protobuf.Root().loadSync(file, { keepCase: true });
  loaded.resolveAll();
  root = loaded;
  return loaded;
}
