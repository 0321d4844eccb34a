import { prepareTemplate, TEST_DB } from './databases.js';

// Run once by scripts/test.sh before the API tests of one database kind.
await prepareTemplate();
console.log(`test template ready (${TEST_DB})`);
