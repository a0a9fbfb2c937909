/** Helpers for the messages that go through proto-loader as plain objects. */
import type { Engine } from '../engine.js';

export interface HeaderObject {
  cluster_id: string;
  member_id: string;
  revision: string;
  raft_term: string;
}

/** A full response header at the current revision (or the one given). */
export function headerObject(engine: Engine, revision = engine.currentRev): HeaderObject {
  const { clusterId, memberId, raftTerm } = engine.identity;
  return {
    cluster_id: clusterId.toString(),
    member_id: memberId.toString(),
    revision: String(revision),
    raft_term: String(raftTerm),
  };
}

export function str(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

export function buf(value: unknown): Buffer {
  return Buffer.isBuffer(value) ? value : Buffer.alloc(0);
}

export function num(value: unknown): number {
  if (typeof value === 'number') return value;
  if (typeof value === 'string' && value !== '') return Number(value);
  return 0;
}

export function big(value: unknown): bigint {
  if (typeof value === 'string' && value !== '') return BigInt(value);
  if (typeof value === 'number') return BigInt(value);
  return 0n;
}

export function obj(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : {};
}
