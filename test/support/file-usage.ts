// Preloaded into every API test file's process by test/support/run-files.ts: at exit, the CPU time
// the process used (user + system, in seconds; child processes it started are not included) goes to
// the file named by TEST_FILE_USAGE, for the slowest-files list of scripts/test.sh.
import fs from 'node:fs';

const target = process.env.TEST_FILE_USAGE;
if (target)
  process.on('exit', () => {
    const { userCPUTime, systemCPUTime } = process.resourceUsage();
    fs.writeFileSync(target, String((userCPUTime + systemCPUTime) / 1e6));
  });
