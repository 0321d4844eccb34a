import assert from 'node:assert/strict';
import type { TestDnsServer } from './dns-server.js';
import { type Client, type Json, uniqueName } from './harness.js';

/** A fresh, valid domain name (never under the install domain). */
export const uniqueDomain = (prefix = 'd') => `${uniqueName(prefix)}.example.test`;

/** createDomain, asserting 201. */
export async function addDomain(
  client: Client,
  installId: string,
  name: string,
  extra: Record<string, unknown> = {},
): Promise<Json> {
  const res = await client.post(`/v1/installs/${installId}/domains`, { name, ...extra });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body;
}

/** D7 through the API: publishes the domain's TXT record on the test DNS server and verifies. */
export async function verifyDomain(
  dns: TestDnsServer,
  client: Client,
  installId: string,
  domain: Json,
): Promise<Json> {
  dns.answer(domain.txt_verification_key, { txt: [domain.txt_verification_value] });
  const res = await client.post(`/v1/installs/${installId}/domains/${domain.id}/verification`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(res.body.ownership_status, 'TXT_VERIFIED');
  return res.body;
}
