// Preloaded into every API test file's process by test/support/run-files.ts: at exit, the CPU time
// the process used (user + system, in seconds) and that of the child processes it started and
// waited for (the servers, workers, CLIs, PHP and browsers a file starts; not the daemons that left
// it, like nginx and PHP-FPM masters, nor PostgreSQL's and MariaDB's servers), as "<own> <children>",
// go to the file named by TEST_FILE_USAGE, for the slowest-files list of scripts/test.sh.
import fs from 'node:fs';

/** Seconds of CPU the process's waited-for children used (cutime + cstime of /proc/self/stat). */
function childrenSeconds(): number {
  try {
    const stat = fs.readFileSync('/proc/self/stat', 'utf8');
    // The fields after the command name (which may hold spaces, in parentheses) start at the 3rd:
    // cutime and cstime are the 16th and 17th.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[13]) + Number(fields[14])) / 100;
  } catch {
    return Number.NaN;
  }
}

const target = process.env.TEST_FILE_USAGE;
if (target)
  process.on('exit', () => {
    const { userCPUTime, systemCPUTime } = process.resourceUsage();
    fs.writeFileSync(target, `${(userCPUTime + systemCPUTime) / 1e6} ${childrenSeconds()}`);
  });
