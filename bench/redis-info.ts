/** What the benches read of a Redis server's INFO. */
import type { Redis } from 'ioredis';

/** µs of CPU the server has used so far (user + system): unlike its scripts' timings, not inflated by waits. */
export async function serverCpuUs(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const field = (name: string): number => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? NaN);
  return (field('used_cpu_user') + field('used_cpu_sys')) * 1e6;
}
