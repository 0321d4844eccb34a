import type { TestApp } from './harness.js';
import type { Running } from './process.js';

/**
 * Issue 30: what the tests of `hostplane agent` processes against a control plane on a manual clock
 * share (fleet-moves.test.ts, fleet-moves-faults.test.ts): waiting with the agents' output on a
 * timeout, ticking the clock past the remote driver's ask-again, and an operation's id.
 */
export function agentTestTools(
  t: Pick<TestApp, 'clock' | 'runJobs' | 'jobLog'>,
  running: Set<Running>,
  pollMs = 100,
) {
  /** The probe's first truthy value; past `ms`, an error with the agents' last output and jobs. */
  async function until<T>(what: string, probe: () => Promise<T | null | undefined | false>, ms = 90_000) {
    const started = Date.now();
    for (;;) {
      const value = await probe();
      if (value) {
        const took = Date.now() - started;
        if (took > 10_000) console.log(`# ${what}: ${took} ms`);
        return value;
      }
      if (Date.now() - started > ms) {
        const outputs = [...running].map((a) => a.output().slice(-3000)).join('\n---\n');
        throw new Error(
          `timed out waiting for ${what}; agents:\n${outputs}\njobs:\n${JSON.stringify(t.jobLog.slice(-5))}`,
        );
      }
      await new Promise((r) => setTimeout(r, pollMs));
    }
  }

  /** Moves the control plane's clock past the remote driver's ask-again and runs the due jobs. */
  async function tick() {
    t.clock.advance(2500);
    await t.runJobs();
  }

  const operationIdOf = (res: { headers: Record<string, unknown> }) =>
    /operations\/([0-9a-f-]{36})/.exec(String(res.headers.location))?.[1] ?? '';

  return { until, tick, operationIdOf };
}
