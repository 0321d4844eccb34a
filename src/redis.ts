import { Redis, type RedisOptions } from 'ioredis';

/**
 * The rate limiter's Redis client (REDIS_URL). The limiter fails open (app.ts), so every command must
 * fail fast rather than wait: no offline queue while disconnected, a command timeout for a Redis that
 * stopped answering, and a socket timeout that drops a silent connection so ioredis reconnects (G11).
 */
export function createRedis(url: string, options: RedisOptions = {}): Redis {
  const redis = new Redis(url, {
    connectTimeout: 1000,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    commandTimeout: 500,
    socketTimeout: 1000,
    ...options,
  });
  redis.on('error', () => {}); // fail open (see app.ts); ioredis reconnects by itself
  return redis;
}
