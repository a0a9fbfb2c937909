/**
 * Request bytes that are not a valid message. The transports answer these as grpc-go does for a request it
 * cannot unmarshal (INTERNAL, "grpc: error unmarshalling request: ..."), and tell them from other failures
 * by isDecodeError, since the generated decoders throw plain Errors.
 */
export class DecodeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DecodeError';
  }
}

export function isDecodeError(error: unknown): error is DecodeError {
  return error instanceof DecodeError;
}

/** Decodes `buf` with a generated message type, failing with a DecodeError. */
export function decodeMessage<T>(type: { decode(buf: Uint8Array): T }, buf: Buffer): T {
  try {
    return type.decode(buf);
  } catch (error) {
    throw new DecodeError(error instanceof Error ? error.message : String(error));
  }
}
