// Preloaded into every API test file's process by test/support/run-files.ts: at exit, the CPU time
// the process used (user + system, in seconds) and that of the child processes it started and
// waited for, with the local driver's tools and their spawner (the servers, workers, CLIs, PHP and
// browsers a file starts; not the daemons that left it, like nginx and PHP-FPM masters, nor
// PostgreSQL's and MariaDB's servers), as "<own> <children>", go to the file named by
// TEST_FILE_USAGE, for the slowest-files list of scripts/test.sh.
import fs from 'node:fs';

/** The fields of /proc/<pid>/stat after the command name (which may hold spaces, in parentheses). */
function statFields(pid: number | 'self'): string[] {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** Seconds of CPU the process's waited-for children used (cutime + cstime of /proc/self/stat). */
function childrenSeconds(): number {
  try {
    // From the 3rd field on: cutime and cstime are the 16th and 17th.
    const fields = statFields('self');
    return (Number(fields[13]) + Number(fields[14])) / 100;
  } catch {
    return Number.NaN;
  }
}

/**
 * Seconds of CPU of the children still running at exit, with the children they reaped (utime, stime,
 * cutime, cstime): not in cutime yet. The local driver's tool spawner is one (decision 250): the
 * tools it ran are its children, not this process's.
 */
function liveChildrenSeconds(): number {
  let seconds = 0;
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const fields = statFields(Number(name));
      if (Number(fields[1]) !== process.pid) continue;
      seconds += fields.slice(11, 15).reduce((sum, n) => sum + Number(n), 0) / 100;
    } catch {
      // Gone meanwhile.
    }
  }
  return seconds;
}

const target = process.env.TEST_FILE_USAGE;
if (target)
  process.on('exit', () => {
    const { userCPUTime, systemCPUTime } = process.resourceUsage();
    fs.writeFileSync(
      target,
      `${(userCPUTime + systemCPUTime) / 1e6} ${childrenSeconds() + liveChildrenSeconds()}`,
    );
  });
