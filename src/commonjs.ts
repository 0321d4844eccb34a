/**
 * A CommonJS package's exports from a dynamic `import()`: node's namespace names each export and gives
 * them all as `default`; the server's and the tests' bundles (scripts/compile-files.mjs) give only
 * `default`. Both have `default`, so that is what is used.
 */
export function commonJsExports<T>(namespace: T): T {
  return ((namespace as { default?: T }).default ?? namespace) as T;
}
