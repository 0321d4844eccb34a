import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatStats, fuzz } from '../support/fuzz.js';
import { buildTestApp } from '../support/harness.js';

// Issue 13: generated requests over every route and role (test/support/fuzz.ts). `npm test` runs a
// short seeded run (120 requests per database); `npm run test:fuzz` the long one (FUZZ_REQUESTS,
// default 10,000 there; FUZZ_SEED picks another sequence).
const REQUESTS = Number(process.env.FUZZ_REQUESTS ?? 120);
const SEED = Number(process.env.FUZZ_SEED ?? 13);

const t = await buildTestApp();

describe('fuzz: generated requests from the OpenAPI document (issue 13)', () => {
  it(`${REQUESTS} requests (seed ${SEED}): no 5xx, no stack trace, 4xx in the error shape, rejected requests change nothing`, async () => {
    const stats = await fuzz(t, { requests: REQUESTS, seed: SEED });
    console.log(formatStats(stats, SEED));
    assert.equal(stats.requests, REQUESTS);
    assert.ok(stats.routes.size > 20, `routes covered: ${stats.routes.size}`);
  });
});
