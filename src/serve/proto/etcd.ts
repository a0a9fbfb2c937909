/**
 * etcd's messages as kvmq serve decodes and encodes them: the codecs generated from proto/etcd/ (npm run
 * proto), whose decoders keep an explicitly empty range_end as PRESENT_EMPTY (scripts/proto.mjs). Code in
 * src/ imports them from here, not from ./generated.
 */
export { authpb, etcdserverpb, mvccpb, PRESENT_EMPTY } from './generated/etcd.js';
