/** The time source of the service; injected so tests and the manual clock can move it. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };
