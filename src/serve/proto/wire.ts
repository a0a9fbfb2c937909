/** The name rpc/grpc-transport.ts knows DecodeError by; it goes with that file. */
export { DecodeError as WireError } from './decode-error.js';
