import { dropTemplate, prepareTemplate, TEST_DB } from './databases.js';

// Run by scripts/test.sh around the API tests of one database kind: `prepare.ts` or `prepare.ts drop`.
if (process.argv[2] === 'drop') {
  await dropTemplate();
} else {
  await prepareTemplate();
  console.log(`test template ready (${TEST_DB})`);
}
