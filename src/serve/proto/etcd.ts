/**
 * etcd's messages as kvmq serve decodes and encodes them: the codecs generated from proto/etcd/ (npm run
 * proto), with an explicitly empty range_end kept (range-end.ts). Code in src/ imports them from here, not
 * from ./generated, so that the wrappers are in place.
 */
import { authpb, etcdserverpb, mvccpb } from './generated/etcd.js';
import { installRangeEndPresence } from './range-end.js';

installRangeEndPresence(etcdserverpb);

export { authpb, etcdserverpb, mvccpb };
