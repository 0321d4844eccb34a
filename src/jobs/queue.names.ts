/** pg-boss's own tables live in this schema, beside (not inside) the Drizzle migrations. */
export const BOSS_SCHEMA = 'pgboss';
/** NOTIFY channel: the payload is a queue name; sent inside the enqueueing transaction (delivered on commit). */
export const WAKE_CHANNEL = 'hostplane_jobs';
const EXHAUSTED = '-exhausted';
/** The dead-letter queue of a job: a job whose retries are exhausted lands here (jobs/worker.ts). */
export const exhaustedQueue = (name: string) => `${name}${EXHAUSTED}`;
/** The job a queue serves, and whether it is that job's dead-letter queue. */
export const jobOfQueue = (queue: string) =>
  queue.endsWith(EXHAUSTED)
    ? { name: queue.slice(0, -EXHAUSTED.length), exhausted: true }
    : { name: queue, exhausted: false };
