/** CPU time of other processes on this machine, from /proc: what a server spent while a bench ran its clients. */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

const CLOCK_TICK_MS = 1000 / Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim() || 100);

/** A process's name (`comm`) and user plus system CPU time so far, in ms; null once it has exited. */
function readStat(pid: number | string): { readonly name: string; readonly ms: number } | null {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return {
    name: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')),
    ms: (Number(fields[11]) + Number(fields[12])) * CLOCK_TICK_MS,
  };
}

/** User plus system CPU time of a process so far, in ms. */
export function cpuMs(pid: number): number {
  const stat = readStat(pid);
  if (stat === null) throw new Error(`no process ${pid}`);
  return stat.ms;
}

/**
 * CPU time so far of every live process named `name`, in ms, by pid. A server that forks per connection (a
 * PostgreSQL backend per client) is read this way; take the difference per pid (`cpuSince`), so processes that
 * started or ended between two readings count only their time in between.
 */
export function cpuByName(name: string): Map<number, number> {
  const found = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readStat(entry);
    if (stat?.name === name) found.set(Number(entry), stat.ms);
  }
  return found;
}

/** The CPU time, in ms, processes named `name` spent since `before` (a `cpuByName` reading). */
export function cpuSince(name: string, before: ReadonlyMap<number, number>): number {
  let ms = 0;
  for (const [pid, now] of cpuByName(name)) ms += now - (before.get(pid) ?? 0);
  return ms;
}
