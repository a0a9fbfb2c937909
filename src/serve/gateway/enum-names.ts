/**
 * Enum value names as etcd spells them. The vendored .proto files (from the etcd3 npm package) write them
 * in PascalCase (NotEqual, Readwrite); etcd's own definitions, and so its JSON, use NOT_EQUAL, READWRITE.
 */
export function etcdEnumName(protoName: string): string {
  return protoName.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase();
}
