/**
 * A protobuf message as etcd's gateway prints it (Go's jsonpb with the .proto names): fields in declaration
 * order, those at their default left out, 64-bit integers as decimal strings, enums by name, bytes in
 * base64, and strings escaped as Go escapes them.
 */
import Long from 'long';
import protobuf from 'protobufjs/light.js';
import { etcdEnumName } from './enum-names.js';

/** Go's encoding/json escapes these too, so a response can sit inside HTML. */
function goString(text: string): string {
  return JSON.stringify(text).replace(/[<>&\u2028\u2029]/g, (char) => {
    return `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`;
  });
}

const UNSIGNED = new Set(['uint64', 'fixed64']);

/** The JSON text of one value, or null when it is the field's default (and so left out). */
function scalar(value: unknown, field: protobuf.Field): string | null {
  const resolved = field.resolvedType;
  if (resolved instanceof protobuf.Enum) {
    const number = Number(value);
    if (number === 0) return null;
    const name = resolved.valuesById[number];
    return name === undefined ? String(number) : goString(etcdEnumName(name));
  }
  switch (field.type) {
    case 'string':
      return typeof value === 'string' && value !== '' ? goString(value) : null;
    case 'bool':
      return value === true ? 'true' : null;
    case 'bytes': {
      const bytes = value instanceof Uint8Array ? Buffer.from(value.buffer, value.byteOffset, value.length) : null;
      return bytes === null || bytes.length === 0 ? null : goString(bytes.toString('base64'));
    }
    default: {
      if (value === null || value === undefined) return null;
      if (Long.isLong(value)) {
        const long = Long.fromValue(value).toUnsigned();
        const text = (UNSIGNED.has(field.type) ? long : long.toSigned()).toString();
        return text === '0' ? null : `"${text}"`;
      }
      const number = Number(value);
      if (number === 0) return null;
      // 64-bit integers are strings in JSON (JavaScript numbers cannot hold them); 32-bit ones are numbers.
      return field.type.endsWith('64') ? `"${String(number)}"` : String(number);
    }
  }
}

function single(value: unknown, field: protobuf.Field): string | null {
  if (field.resolvedType instanceof protobuf.Type) {
    return value === null || value === undefined ? null : messageJson(value, field.resolvedType);
  }
  return scalar(value, field);
}

function repeatedItem(value: unknown, field: protobuf.Field): string {
  // In a list every item is printed, defaults too.
  const text = single(value, field);
  if (text !== null) return text;
  if (field.resolvedType instanceof protobuf.Type) return '{}';
  if (field.resolvedType instanceof protobuf.Enum) {
    return goString(etcdEnumName(field.resolvedType.valuesById[0] ?? '0'));
  }
  if (field.type === 'string' || field.type === 'bytes') return '""';
  if (field.type === 'bool') return 'false';
  return field.type.endsWith('64') ? '"0"' : '0';
}

/** The JSON text of a decoded message. */
export function messageJson(message: object, type: protobuf.Type): string {
  const parts: string[] = [];
  const fields = message as unknown as Record<string, unknown>;
  for (const field of type.fieldsArray) {
    // A decoded message has its own property only for what was on the wire.
    if (!Object.prototype.hasOwnProperty.call(fields, field.name)) continue;
    const value = fields[field.name];
    let text: string | null;
    if (field.repeated) {
      const items = Array.isArray(value) ? (value as unknown[]) : [];
      text = items.length === 0 ? null : `[${items.map((item) => repeatedItem(item, field)).join(',')}]`;
    } else {
      text = single(value, field);
    }
    if (text !== null) parts.push(`${goString(field.name)}:${text}`);
  }
  return `{${parts.join(',')}}`;
}

/** Decodes `type`'s protobuf bytes to etcd's JSON. */
export function decodeToJson(bytes: Uint8Array, type: protobuf.Type): string {
  return messageJson(type.decode(bytes), type);
}
