/** The time source of the service; injected so tests and the manual clock can move it. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/** `HOSTPLANE_CLOCK=manual`: a clock that only moves when told to (admin clock endpoint, tests). */
export interface ManualClock extends Clock {
  readonly manual: true;
  advance(ms: number): void;
  set(date: Date): void;
}

/** A manual clock starting at `start` (default: the real time when it is made). */
export function createManualClock(start: Date = new Date()): ManualClock {
  let now = start.getTime();
  return {
    manual: true,
    now: () => new Date(now),
    advance: (ms) => {
      now += ms;
    },
    set: (date) => {
      now = date.getTime();
    },
  };
}

export function isManualClock(clock: Clock): clock is ManualClock {
  return (clock as Partial<ManualClock>).manual === true;
}
