import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import type { SecretBox } from '../../secrets.js';
import type { DriverOperation } from '../driver.js';
import type { MariaDb } from './database.js';
import type { Once } from './tasks.js';
import type { WebTier } from './web.js';

/** What every part of the local driver works with (built once by createLocalDriver). */
export interface LocalContext {
  db: Db;
  clock: Clock;
  secretBox: SecretBox;
  mariadb: MariaDb;
  /** HOSTING_ROOT: installs/, backups/ and staging/ live under it. */
  hostingRoot: string;
  /** The fault point half-way through a backup, restore or copy (LocalDriverDeps.midway). */
  midway: (operation: DriverOperation, signal: AbortSignal) => Promise<void>;
  /** The fault point between a restore's or copy's two swaps (LocalDriverDeps.betweenSwaps). */
  betweenSwaps: (operation: 'restore' | 'copy', signal: AbortSignal) => Promise<void>;
  /** LOCAL_WEB=on (issue 21): nginx, PHP-FPM and WordPress serve the installs; null: files only. */
  web: WebTier | null;
  /** Runs a keyed call's work once (tasks.ts). */
  once: Once;
}
