import { type StaticEncode, type TProperties, type TSchema, Type } from 'typebox';
import { Compile, type Validator } from 'typebox/compile';
import { DriverError, type DriverOperation } from './driver.js';

/**
 * What a finished driver task records as its result, per kind (the task's operation), as TypeBox
 * schemas. A driver stores the result of a keyed call (local_tasks, simulated_tasks) and answers it
 * again for the same key, so the stored JSON is checked against its kind's shape where it is read
 * ({@link taskResults}), as operation data is (modules/operations/operation-types.ts) and job payloads
 * are (jobs/queue.ts): a record of the wrong shape is refused, never handed on as a result.
 *
 * The shapes are the HostingDriver's answers (driver.ts): a driver's keyed calls are typed by them,
 * so a shape that drifts from the interface fails the type check. A driver that stores something else
 * for a kind declares its own shape for it (the simulated driver keeps an issued key sealed).
 */
const Version = Type.Union([Type.String(), Type.Null()]);
const Bytes = Type.Number({ minimum: 0 });
/** An answer with nothing in it: exactly `{}`. */
const Nothing = Type.Record(Type.String(), Type.Never());

export const TASK_RESULTS = {
  provision: Type.Object({ wp_version: Version, php_version: Version }),
  copy: Type.Object({ wp_version: Version, copied_tables: Type.Array(Type.String()) }),
  /** The Snapshot a backup records. */
  backup: Type.Object({
    wp_version: Version,
    file_bytes: Bytes,
    db_tables: Type.Record(Type.String(), Bytes),
    location: Type.Optional(Type.String()),
    checksums: Type.Optional(Type.Object({ files: Type.String(), database: Type.String() })),
  }),
  restore: Type.Object({ wp_version: Version }),
  measure_disk: Type.Object({ file_bytes: Bytes, database_bytes: Bytes }),
  purge_cache: Nothing,
  move_site: Nothing,
  issue_certificate: Type.Object({ chain_pem: Type.String(), key_pem: Type.String() }),
  apply_routing: Type.Object({ names: Type.Array(Type.String()) }),
  deprovision: Nothing,
} as const satisfies Record<DriverOperation, TSchema>;

/** A driver's stored result shape for each task kind. */
export type TaskShapes = Record<DriverOperation, TSchema>;

/**
 * The checked reader of one driver's stored task results: `resultOf(kind, key, stored)` answers the
 * stored value typed as its kind's result, or throws a DriverError naming the driver, the task and
 * what is wrong. Each kind's check is compiled on first use (nothing at start-up).
 */
export function taskResults<S extends TaskShapes>(driver: string, shapes: S) {
  const checks: { [K in DriverOperation]?: Validator<TProperties, S[K]> } = {};
  return function resultOf<K extends DriverOperation>(kind: K, key: string, stored: unknown) {
    const check: Validator<TProperties, S[K]> = checks[kind] ?? Compile(shapes[kind]);
    checks[kind] = check;
    if (check.Check(stored)) return stored;
    const [first] = check.Errors(stored);
    const why = first ? `${first.instancePath || '/'} ${first.message}` : 'wrong shape';
    throw new DriverError(kind, `${driver} task ${key}: its stored result is not a ${kind} result (${why})`);
  };
}

/** What `resultOf` answers for a kind: the stored value, typed by its kind's shape. */
export type TaskResult<S extends TaskShapes, K extends DriverOperation> = StaticEncode<S[K], TProperties>;
