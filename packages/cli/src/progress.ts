import type { Operation } from '@hostplane/client';
import type { Io } from './output.js';

/** How far along each status is, for the bar (operations report a status, not a percentage). */
const STAGE: Record<Operation['status'], number> = { queued: 0.1, in_progress: 0.5, completed: 1, failed: 1 };

/**
 * Follows an operation for people: on a TTY one bar redrawn in place on stderr; otherwise a plain line
 * whenever the status changes. Never writes to stdout (that is for the result, or --json).
 */
export function progressReporter(io: Io, now: () => number = Date.now) {
  const started = now();
  const tty = Boolean(io.stderr.isTTY);
  let last = '';
  let drawn = false;
  return {
    update(op: Operation) {
      const seconds = Math.round((now() - started) / 1000);
      if (tty) {
        const width = 30;
        // In progress creeps towards 90 % with time, so a long step still shows life.
        const stage =
          op.status === 'in_progress' ? Math.min(0.9, STAGE.in_progress + seconds / 120) : STAGE[op.status];
        const filled = Math.round(stage * width);
        io.stderr.write(
          `\r[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${op.type} ${op.status} ${seconds}s\x1b[K`,
        );
        drawn = true;
      } else if (op.status !== last) {
        io.stderr.write(`operation ${op.id} (${op.type}): ${op.status} after ${seconds}s\n`);
      }
      last = op.status;
    },
    done() {
      if (tty && drawn) io.stderr.write('\n');
    },
  };
}
