/**
 * At most `limit` tasks at once (LOCAL_MAX_HEAVY_OPERATIONS); the others wait in order, and a
 * finishing task hands its slot straight to the first one waiting. A waiting task whose signal
 * aborts leaves the line.
 */
export function createLimiter(limit: number) {
  let running = 0;
  const waiting: (() => void)[] = [];

  function acquire(signal: AbortSignal): Promise<void> {
    if (running < limit) {
      running++;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const give = () => {
        const at = waiting.indexOf(go);
        if (at >= 0) waiting.splice(at, 1);
        reject(new Error('gave up waiting for a free slot (the job ran out of time)'));
      };
      const go = () => {
        signal.removeEventListener('abort', give);
        resolve();
      };
      if (signal.aborted) return give();
      signal.addEventListener('abort', give, { once: true });
      waiting.push(go);
    });
  }

  function release() {
    const next = waiting.shift();
    if (next) next();
    else running--;
  }

  return async function limited<T>(signal: AbortSignal, task: () => Promise<T>): Promise<T> {
    await acquire(signal);
    try {
      return await task();
    } finally {
      release();
    }
  };
}
