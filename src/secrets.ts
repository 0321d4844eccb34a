import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/**
 * A secret from the environment, or else read from (or generated once into) a 0600 file in DATA_DIR.
 * `generated` is true only the first time, so the caller can print a new admin token once.
 */
export function loadOrCreateSecret(
  configured: string | null,
  dataDir: string,
  fileName: string,
): { value: string; generated: boolean } {
  if (configured) return { value: configured, generated: false };
  const file = path.join(dataDir, fileName);
  if (fs.existsSync(file)) return { value: fs.readFileSync(file, 'utf8').trim(), generated: false };
  fs.mkdirSync(dataDir, { recursive: true });
  const value = randomBytes(32).toString('base64url');
  fs.writeFileSync(file, `${value}\n`, { mode: 0o600, flag: 'wx' });
  return { value, generated: true };
}
