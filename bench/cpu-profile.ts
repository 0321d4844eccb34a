/**
 * Summarises a V8 CPU profile written by a bench server (BENCH_CPU_PROF=dir npm run bench):
 * self time by area (package, our src/ folder, Node internals, GC, idle) and the top functions.
 *
 *   node --import tsx bench/cpu-profile.ts dir/CPU.xxx.cpuprofile [top=25]
 */
import fs from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** `pg`, `drizzle-orm`, `src/modules/sites`, `node:internal`, `(garbage collector)`… */
function areaOf({ functionName, url }: ProfileNode['callFrame']): string {
  if (!url) return functionName.startsWith('(') ? functionName : '(native)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1];
  if (pkg) return pkg;
  const own = /\/((?:src|bench)\/[^/]+(?:\/[^/]+)?)\//.exec(url)?.[1] ?? /\/((?:src|bench))\//.exec(url)?.[1];
  if (own) return own;
  if (url.startsWith('node:')) return url.startsWith('node:internal') ? 'node:internal' : url;
  return url;
}

function add(map: Map<string, number>, key: string, us: number) {
  map.set(key, (map.get(key) ?? 0) + us);
}

function table(title: string, map: Map<string, number>, total: number, top: number) {
  console.log(`\n${title}`);
  for (const [key, us] of [...map].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(
      `${((100 * us) / total).toFixed(1).padStart(6)} %  ${(us / 1000).toFixed(0).padStart(7)} ms  ${key}`,
    );
  }
}

function main() {
  const [file, topArg] = process.argv.slice(2);
  if (!file) throw new Error('usage: bench/cpu-profile.ts FILE.cpuprofile [top]');
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const areas = new Map<string, number>();
  const functions = new Map<string, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const node = byId.get(id);
    const us = profile.timeDeltas[i] ?? 0;
    if (!node) return;
    total += us;
    const frame = node.callFrame;
    add(areas, areaOf(frame), us);
    const where = frame.url
      ? ` ${frame.url.replace(/^.*?(node_modules|src|bench)\//, '$1/')}:${frame.lineNumber + 1}`
      : '';
    add(functions, `${frame.functionName || '(anonymous)'}${where}`, us);
  });
  const busy = total - (areas.get('(idle)') ?? 0);
  console.log(`${file}: ${(total / 1e6).toFixed(1)} s sampled, ${(busy / 1e6).toFixed(1)} s not idle`);
  table('self time by area (% of all samples)', areas, total, 20);
  table('top functions by self time', functions, total, Number(topArg ?? 25));
}

main();
