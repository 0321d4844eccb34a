// The machine's speed, measured at the start of a full `npm test` (scripts/test.sh) and printed with
// its phase table: the same run's times can then be read against the machine they ran on. The same
// code took 9.5 minutes on one machine of this kind and 20 on another (session 17, bench/README.md):
// a run's minutes alone do not say whether the suite or the machine grew.
//
// Two fixed workloads that do not depend on Hostplane's code, in CPU seconds (user + system):
// - compute: SHA-256 over 1 GiB in this process (user time: the CPU itself);
// - spawn: 100 runs of /bin/true from a process holding 200 MB (the fork and exec every tool a test
//   or the local driver starts pays: system time, what a loaded virtual machine makes dear).
// Prints one line, e.g. "compute 0.68 CPU-s, spawn 1.90 CPU-s" (session 17's machine, which ran the
// suite in 20 minutes).
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

function cpuSeconds(work) {
  const before = process.cpuUsage();
  const children = childSeconds();
  work();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1e6 + (childSeconds() - children);
}

/** CPU seconds of the waited-for children (cutime + cstime of /proc/self/stat), 0 where there is none. */
function childSeconds() {
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[13]) + Number(fields[14])) / 100;
  } catch {
    return 0;
  }
}

const compute = cpuSeconds(() => {
  const hash = createHash('sha256');
  const block = Buffer.alloc(1 << 20, 7);
  for (let i = 0; i < 1024; i++) hash.update(block);
  hash.digest();
});
// A heap of about the size of a test process's, so that each fork copies page tables like theirs.
const ballast = Array.from({ length: 200 }, () => Buffer.alloc(1 << 20, 1));
const spawn = cpuSeconds(() => {
  for (let i = 0; i < 100; i++) spawnSync('/bin/true');
});
ballast.length = 0;
console.log(`compute ${compute.toFixed(2)} CPU-s, spawn ${spawn.toFixed(2)} CPU-s`);
