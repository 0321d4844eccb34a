// test-db: postgres (the subject is the OpenAPI document the routes generate, not the control plane's database: docs/decisions.md #237)
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compileErrors, validate } from '@readme/openapi-parser';
import { buildTestApp, type Json } from '../support/harness.js';

const t = await buildTestApp();
const res = await t.anonymous.get('/v1/swagger');
const doc: Json = res.body;
const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;

function operations(): { method: string; path: string; op: Json }[] {
  return Object.entries(doc.paths as Record<string, Json>).flatMap(([path, item]) =>
    METHODS.filter((m) => item[m]).map((method) => ({ method, path, op: item[method] })),
  );
}

describe('GET /v1/swagger', () => {
  it('is served without auth as an OpenAPI 3.1 document', () => {
    assert.equal(res.status, 200);
    assert.equal(doc.openapi, '3.1.0');
    assert.deepEqual(doc.components.securitySchemes.basicAuth, { type: 'http', scheme: 'basic' });
  });

  it('passes the OpenAPI validator (@readme/openapi-parser)', async () => {
    const result = await validate(structuredClone(doc));
    assert.ok(result.valid, result.valid ? '' : compileErrors(result));
  });

  it('every operation has a unique operationId and tags', () => {
    const ids = operations().map(({ op }) => op.operationId);
    assert.ok(ids.every((id) => typeof id === 'string' && id.length > 0));
    assert.equal(new Set(ids).size, ids.length);
    for (const { op } of operations()) assert.ok(op.tags?.length > 0, op.operationId);
  });

  it('every path parameter is declared', () => {
    for (const { path, op } of operations()) {
      const declared = (op.parameters ?? []).filter((p: Json) => p.in === 'path').map((p: Json) => p.name);
      const inPath = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      assert.deepEqual(declared.sort(), inPath.sort(), `${op.operationId} ${path}`);
    }
  });

  it('every authenticated operation documents 401, 429, 500 and 503, and every body route 400', () => {
    for (const { op } of operations()) {
      const statuses = Object.keys(op.responses);
      assert.ok(
        statuses.some((s) => s.startsWith('2')),
        `${op.operationId} has no success response`,
      );
      const isPublic = Array.isArray(op.security) && op.security.length === 0;
      if (!isPublic) {
        for (const s of ['401', '429', '500', '503'])
          assert.ok(statuses.includes(s), `${op.operationId} lacks ${s}`);
      }
      if (op.requestBody) assert.ok(statuses.includes('400'), `${op.operationId} lacks 400`);
    }
  });

  it('names the spec operations with the platform operationIds', () => {
    const ids = new Set(operations().map(({ op }) => op.operationId));
    for (const id of [
      'listAccounts',
      'getAccount',
      'getCurrentUser',
      'listSites',
      'createSite',
      'getSite',
      'updateSite',
      'deleteSite',
      'listInstalls',
      'createInstall',
      'getInstall',
      'updateInstall',
      'deleteInstall',
      'status',
      'swagger',
    ]) {
      assert.ok(ids.has(id), id);
    }
  });

  it('the human docs page is served at /docs', async () => {
    const page = await t.anonymous.get('/docs/');
    assert.equal(page.status, 200);
    assert.match(String(page.raw.headers['content-type']), /text\/html/);
  });
});
