/**
 * JSON to a protobuf message, as leniently and as strictly as etcd's gateway (Go's jsonpb): a field by its
 * .proto name or its lowerCamelCase JSON name, unknown fields ignored, null as unset, 64-bit integers as
 * numbers or decimal strings, enums by name or number, bytes in padded base64. What it refuses gets Go's
 * error text, which etcd sends back.
 */
import Long from 'long';
import protobuf from 'protobufjs/light.js';
import { etcdEnumName } from './enum-names.js';
import { decodeGoBase64 } from './go-base64.js';
import { JsonSyntaxError, parseJson, type JsonNode } from './go-json.js';

/** A JSON request that does not fit its message (etcd answers it with INVALID_ARGUMENT). */
export class JsonFieldError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'JsonFieldError';
  }
}

const INT_RANGES: Record<string, readonly [bigint, bigint]> = {
  int64: [-(2n ** 63n), 2n ** 63n - 1n],
  sint64: [-(2n ** 63n), 2n ** 63n - 1n],
  sfixed64: [-(2n ** 63n), 2n ** 63n - 1n],
  uint64: [0n, 2n ** 64n - 1n],
  fixed64: [0n, 2n ** 64n - 1n],
  int32: [-(2n ** 31n), 2n ** 31n - 1n],
  sint32: [-(2n ** 31n), 2n ** 31n - 1n],
  sfixed32: [-(2n ** 31n), 2n ** 31n - 1n],
  uint32: [0n, 2n ** 32n - 1n],
  fixed32: [0n, 2n ** 32n - 1n],
};

/** Go's name of a field's type, as its errors print it. */
function goTypeName(type: string): string {
  if (type === 'bytes') return '[]uint8';
  if (type === 'sint64' || type === 'sfixed64') return 'int64';
  if (type === 'fixed64') return 'uint64';
  if (type === 'sint32' || type === 'sfixed32') return 'int32';
  if (type === 'fixed32') return 'uint32';
  return type;
}

/** Go's name of a generated enum type: etcdserverpb.RangeRequest_SortOrder. */
function goEnumName(type: protobuf.Enum): string {
  const [pkg, ...names] = type.fullName.replace(/^\./, '').split('.');
  return `${pkg ?? ''}.${names.join('_')}`;
}

function kindName(node: JsonNode): string {
  return node.kind;
}

function typeError(node: JsonNode, goType: string, literal?: string): JsonFieldError {
  const value = literal === undefined ? kindName(node) : `number ${literal}`;
  return new JsonFieldError(`json: cannot unmarshal ${value} into Go value of type ${goType}`);
}

function integer(node: JsonNode, type: string): Long | number {
  let literalNode = node;
  if (node.kind === 'string') {
    // jsonpb takes a quoted number by its text, as if the quotes were not there.
    try {
      literalNode = parseJson(node.value);
    } catch (error) {
      if (error instanceof JsonSyntaxError) throw new JsonFieldError(error.message);
      throw error;
    }
  }
  if (literalNode.kind !== 'number') throw typeError(literalNode, goTypeName(type));
  const literal = literalNode.literal;
  const range = INT_RANGES[type];
  if (range === undefined) throw new JsonFieldError(`json: unsupported type ${type}`);
  if (!/^-?\d+$/.test(literal)) throw typeError(literalNode, goTypeName(type), literal);
  const value = BigInt(literal);
  if (value < range[0] || value > range[1]) throw typeError(literalNode, goTypeName(type), literal);
  if (type.endsWith('64')) return Long.fromString(literal, type === 'uint64' || type === 'fixed64');
  return Number(value);
}

function byteItem(node: JsonNode): number {
  if (node.kind !== 'number') throw typeError(node, 'uint8');
  if (!/^\d+$/.test(node.literal) || Number(node.literal) > 255) throw typeError(node, 'uint8', node.literal);
  return Number(node.literal);
}

function scalar(node: JsonNode, type: string): unknown {
  switch (type) {
    case 'string':
      if (node.kind !== 'string') throw typeError(node, 'string');
      return node.value;
    case 'bool':
      if (node.kind !== 'bool') throw typeError(node, 'bool');
      return node.value;
    case 'bytes':
      // Go also takes bytes as a list of numbers.
      if (node.kind === 'array') return Buffer.from(node.items.map(byteItem));
      if (node.kind !== 'string') throw typeError(node, '[]uint8');
      try {
        return decodeGoBase64(node.value);
      } catch (error) {
        throw new JsonFieldError((error as Error).message);
      }
    case 'double':
    case 'float':
      if (node.kind !== 'number') throw typeError(node, type === 'double' ? 'float64' : 'float32');
      return Number(node.literal);
    default:
      return integer(node, type);
  }
}

function enumValue(node: JsonNode, type: protobuf.Enum): number {
  if (node.kind === 'string') {
    const value = Object.entries(type.values).find(([name]) => etcdEnumName(name) === node.value)?.[1];
    if (value === undefined) {
      throw new JsonFieldError(`unknown value ${JSON.stringify(node.value)} for enum ${goEnumName(type)}`);
    }
    return value;
  }
  return integer(node, 'int32') as number;
}

function single(node: JsonNode, field: protobuf.Field): unknown {
  const resolved = field.resolvedType;
  if (resolved instanceof protobuf.Type) return message(node, resolved);
  if (resolved instanceof protobuf.Enum) return enumValue(node, resolved);
  return scalar(node, field.type);
}

/** protobuf's JSON name: the .proto name in lowerCamelCase ("prev_kv" is "prevKv", "TTL" stays). */
function jsonName(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_, char: string) => char.toUpperCase());
}

/** A message from its JSON object (null is the empty message). */
export function message(node: JsonNode, type: protobuf.Type): protobuf.Message {
  const out: Record<string, unknown> = {};
  if (node.kind === 'null') return type.create(out);
  if (node.kind !== 'object') throw typeError(node, 'map[string]json.RawMessage');
  for (const field of type.fieldsArray) {
    const value = node.fields.get(field.name) ?? node.fields.get(jsonName(field.name));
    if (value === undefined || value.kind === 'null') continue;
    if (field.repeated) {
      if (value.kind !== 'array') throw typeError(value, '[]json.RawMessage');
      out[field.name] = value.items.map((item) => single(item, field));
    } else {
      out[field.name] = single(value, field);
    }
  }
  return type.create(out);
}

/** Encodes the JSON request `node` as `type`'s protobuf bytes. */
export function encodeJsonRequest(node: JsonNode, type: protobuf.Type): Buffer {
  return Buffer.from(type.encode(message(node, type)).finish());
}
