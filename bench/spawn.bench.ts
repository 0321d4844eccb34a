// Decision 250: what a tool costs the process that asks for it, started directly (node's spawn, a
// fork of this process) against through the spawner (src/drivers/local/spawner.ts), in one run,
// rounds interleaved. The asking process holds a heap of --heap MB and writes a page of it in every
// 4 KiB between tools, as a worker's or a test process's collections do; each tool is /bin/true.
//
//   npm run bench:spawn -- [--heap 200] [--tools 50] [--rounds 3]
//
// Prints, per mode: this process's CPU seconds (user, system), the machine's busy CPU seconds over
// the round (/proc/stat: every process, the spawner's and the tools' included) and the wall time,
// then the ratios direct / spawner.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { spawnTool } from '../src/drivers/local/spawner.js';

const { values } = parseArgs({
  options: {
    heap: { type: 'string', default: '200' },
    tools: { type: 'string', default: '50' },
    rounds: { type: 'string', default: '3' },
  },
});
const heapMb = Number(values.heap);
const tools = Number(values.tools);
const rounds = Number(values.rounds);

const heap: Buffer[] = [];
for (let i = 0; i < heapMb; i++) heap.push(Buffer.alloc(1 << 20, 1));
function touch() {
  for (const block of heap) for (let at = 0; at < block.length; at += 4096) block[at] = (block[at] ?? 0) + 1;
}

function machineBusy(): number {
  const [, ...ticks] = (fs.readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/);
  const [user, nice, system, , , irq, softirq] = ticks.map(Number);
  return ((user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0)) / 100;
}

function direct(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('/bin/true', [], { stdio: 'pipe', env: {} });
    child.on('error', reject);
    child.on('close', () => resolve());
  });
}

function viaSpawner(): Promise<void> {
  return new Promise((resolve, reject) => {
    const tool = spawnTool('/bin/true', [], { env: {}, stdio: ['pipe', 'pipe', 'pipe'] });
    tool.on('error', reject);
    tool.on('close', () => resolve());
  });
}

interface Round {
  user: number;
  system: number;
  busy: number;
  wall: number;
}

async function round(start: () => Promise<void>): Promise<Round> {
  const cpu = process.cpuUsage();
  const busy = machineBusy();
  const wall = performance.now();
  for (let i = 0; i < tools; i++) {
    await start();
    touch();
  }
  const used = process.cpuUsage(cpu);
  return {
    user: used.user / 1e6,
    system: used.system / 1e6,
    busy: machineBusy() - busy,
    wall: (performance.now() - wall) / 1000,
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;

await viaSpawner(); // the spawner started before the first round
touch();
const results: Record<'direct' | 'spawner', Round[]> = { direct: [], spawner: [] };
for (let r = 0; r < rounds; r++) {
  results.direct.push(await round(direct));
  results.spawner.push(await round(viaSpawner));
}
console.log(`heap ${heapMb} MB written between tools, ${tools} tools a round, ${rounds} rounds (medians)`);
console.log('mode      this process user / system CPU-s   machine busy CPU-s   wall s');
const med = (mode: 'direct' | 'spawner', key: keyof Round) => median(results[mode].map((x) => x[key]));
for (const mode of ['direct', 'spawner'] as const)
  console.log(
    `${mode.padEnd(9)} ${med(mode, 'user').toFixed(2).padStart(12)} / ${med(mode, 'system').toFixed(2).padEnd(18)} ${med(mode, 'busy').toFixed(2).padStart(10)} ${med(mode, 'wall').toFixed(2).padStart(16)}`,
  );
const ratio = (key: keyof Round) => (med('direct', key) / med('spawner', key)).toFixed(1);
console.log(
  `direct / spawner: this process's CPU ${(
    (med('direct', 'user') + med('direct', 'system')) / (med('spawner', 'user') + med('spawner', 'system'))
  ).toFixed(1)}x, machine busy ${ratio('busy')}x, wall ${ratio('wall')}x`,
);
