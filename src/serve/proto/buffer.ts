const EMPTY = Buffer.alloc(0);

/** A decoded bytes field: a Buffer (a subarray of the request) in Node, though declared as Uint8Array. */
export function asBuffer(value: Uint8Array | null | undefined): Buffer {
  return (value ?? EMPTY) as Buffer;
}
