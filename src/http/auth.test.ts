import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { FastifyRequest } from 'fastify';
import { connectionCredentials } from './auth.js';

const basic = (pair: string) => `Basic ${Buffer.from(pair, 'utf8').toString('base64')}`;
const requestOn = (socket: object, authorization?: string) =>
  ({
    headers: authorization === undefined ? {} : { authorization },
    raw: { socket },
  }) as unknown as FastifyRequest;

describe('Basic credentials per connection (issue 29, decision 218)', () => {
  it('issue 29: a connection that repeats its header is not decoded or hashed again; another header on it is', () => {
    const keys: string[] = [];
    const credentialOf = connectionCredentials({
      keyOf: (username, password) => {
        keys.push(`${username}:${password}`);
        return `key(${username}:${password})`;
      },
    });
    const socket = {};
    const first = credentialOf(requestOn(socket, basic('alice:pw-1')));
    assert.deepEqual(first, { username: 'alice', password: 'pw-1', key: 'key(alice:pw-1)' });
    assert.equal(credentialOf(requestOn(socket, basic('alice:pw-1'))), first);
    assert.deepEqual(keys, ['alice:pw-1']);
    // Another credential on the same keep-alive connection is its own (a wrong password included).
    assert.equal(credentialOf(requestOn(socket, basic('alice:wrong')))?.key, 'key(alice:wrong)');
    assert.equal(credentialOf(requestOn(socket, basic('bob:pw-2')))?.username, 'bob');
    // A malformed or missing header names nobody, and leaves the connection's last credential alone.
    assert.equal(credentialOf(requestOn(socket, 'Basic !!!')), null);
    assert.equal(credentialOf(requestOn(socket, basic('no-colon'))), null);
    assert.equal(credentialOf(requestOn(socket)), null);
    assert.equal(credentialOf(requestOn(socket, basic('bob:pw-2')))?.key, 'key(bob:pw-2)');
    assert.deepEqual(keys, ['alice:pw-1', 'alice:wrong', 'bob:pw-2']);
    // Another connection with the same header derives its own (nothing is shared between sockets).
    assert.equal(credentialOf(requestOn({}, basic('alice:pw-1')))?.key, 'key(alice:pw-1)');
    assert.deepEqual(keys, ['alice:pw-1', 'alice:wrong', 'bob:pw-2', 'alice:pw-1']);
  });
});
