import type { FastifyBaseLogger, FastifyServerOptions } from 'fastify';

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';
type Bindings = Record<string, unknown>;
type ChildOptions = Parameters<FastifyBaseLogger['child']>[1];
type LevelAware = FastifyBaseLogger & { isLevelEnabled?: (level: string) => boolean };

/**
 * A request's logger that makes pino's child only when a line is written at a level the logger
 * writes. With LOG_LEVEL above `info` (warn, error, fatal, silent) Fastify writes no line for a
 * request that goes well, yet it made a child logger for each one: pino serialises the `reqId`
 * binding through the redaction of `loggerOptions` (main.ts), ~3 % of a cached read's CPU
 * (issue 29, decision 219). A line that is written (an error, a warning) goes through the same
 * child, with the same bindings and redaction, as before.
 */
class LazyRequestLogger {
  #made: FastifyBaseLogger | null = null;
  constructor(
    private readonly parent: LevelAware,
    private readonly bindings: Bindings,
    private readonly options: ChildOptions,
  ) {}

  private made(): FastifyBaseLogger {
    this.#made ??= this.parent.child(this.bindings, this.options);
    return this.#made;
  }

  private write(level: Level, args: unknown[]) {
    if (this.#made === null && this.parent.isLevelEnabled?.(level) === false) return;
    (this.made()[level] as (...a: unknown[]) => void)(...args);
  }

  get level(): string {
    return this.#made?.level ?? this.parent.level;
  }
  set level(level: string) {
    this.made().level = level;
  }
  fatal(...args: unknown[]) {
    this.write('fatal', args);
  }
  error(...args: unknown[]) {
    this.write('error', args);
  }
  warn(...args: unknown[]) {
    this.write('warn', args);
  }
  info(...args: unknown[]) {
    this.write('info', args);
  }
  debug(...args: unknown[]) {
    this.write('debug', args);
  }
  trace(...args: unknown[]) {
    this.write('trace', args);
  }
  silent() {}
  child(bindings: Bindings, options?: ChildOptions): FastifyBaseLogger {
    return this.made().child(bindings, options);
  }
}

/**
 * Fastify's `childLoggerFactory`: pino's own child when the logger writes `info` (Fastify's request
 * lines use it at once) or a route asks for options of its own; otherwise a {@link LazyRequestLogger}.
 */
export const requestLoggerFactory: NonNullable<FastifyServerOptions['childLoggerFactory']> = (
  logger,
  bindings,
  options,
) => {
  const parent = logger as LevelAware;
  const own = options && Object.keys(options).length > 0;
  if (own || typeof parent.isLevelEnabled !== 'function' || parent.isLevelEnabled('info')) {
    return logger.child(bindings, options);
  }
  return new LazyRequestLogger(parent, bindings, options) as unknown as FastifyBaseLogger;
};
