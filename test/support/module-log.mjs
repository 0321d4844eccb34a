// Preloaded by tests (`NODE_OPTIONS=--import <this file>`, MODULE_LOG=<file>): every module the
// process loads through the ESM loader, its own and its packages' entry points, is appended to
// MODULE_LOG, one URL a line (test/api/startup.test.ts: what a start loads).
import { register } from 'node:module';

register(new URL('./module-log-hooks.mjs', import.meta.url), { data: { file: process.env.MODULE_LOG } });
