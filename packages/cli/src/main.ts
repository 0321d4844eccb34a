import { HostplaneApiError, HostplaneError } from '@hostplane/client';
import { CommanderError } from 'commander';
import type { Env } from './credentials.js';
import { CliError, EXIT, exitCodeOf } from './exit-codes.js';
import type { Io } from './output.js';
import { buildProgram } from './program.js';

/** Runs one command line (argv without node and the script); resolves with the exit code. */
export async function run(
  argv: string[],
  env: Env,
  io: Io,
  readStdin: () => Promise<string> = async () => '',
): Promise<number> {
  const program = buildProgram({ env, io, readStdin });
  try {
    await program.parseAsync(argv, { from: 'user' });
    return EXIT.ok;
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version end here too (exit 0); any parse error is a usage error.
      return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    io.stderr.write(`${BIN_PREFIX}${describe(error)}\n`);
    return exitCodeOf(error);
  }
}

const BIN_PREFIX = 'hostplane-cli: ';

function describe(error: unknown): string {
  if (error instanceof HostplaneApiError) {
    const fields = error.fieldErrors.map((f) => `\n  ${f.field}: ${f.message}`).join('');
    return `${error.status} ${error.message}${fields}`;
  }
  if (error instanceof HostplaneError || error instanceof CliError) return error.message;
  return error instanceof Error ? (error.stack ?? error.message) : String(error);
}

async function stdinText(): Promise<string> {
  if (process.stdin.isTTY) return '';
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** The bin's entry: the real process. */
export async function main(): Promise<void> {
  process.exitCode = await run(process.argv.slice(2), process.env, process, stdinText);
}
