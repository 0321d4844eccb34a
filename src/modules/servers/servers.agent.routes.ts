import type { Readable } from 'node:stream';
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { Errors } from '../../errors.js';
import { connected } from '../../http/auth.js';
import { errorResponses } from '../../http/schemas.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';
import type { SshLogin } from '../ssh-access/ssh-access.service.js';
import {
  ArchiveCompleteBody,
  ArchivePartQuery,
  ArchivePartSchema,
  ArchiveSchema,
  CallList,
  CallParams,
  CredentialSchema,
  EnrolBody,
  FetchBody,
  HeartbeatBody,
  HeartbeatSchema,
  ReportBody,
  ReportSchema,
  RotatedSchema,
  SshDecideBody,
  SshDecisionSchema,
  SshLoginsBody,
  SshLoginsSchema,
} from './servers.agent.schemas.js';
import { ARCHIVE_PART_BYTES } from './servers.archives.service.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Issue 30: the server whose agent credential authenticated the request (`/agent/v1`). */
    agentServer?: { serverId: string; credentialHash: string };
  }
}

const tags = ['Agent'];
const security = [{ agentCredential: [] }];

/** The server of an authenticated agent request (the guard set it), else 401. */
function agentOf(request: FastifyRequest) {
  const agent = request.agentServer;
  if (!agent) throw new Error('agent route without the agent guard');
  return agent;
}

/** Issue 30: enrolment (no credential yet: the one-time token is the secret). */
export function agentEnrolRoutes({ services }: RouteContext): RoutesPlugin {
  return async (app) => {
    app.post(
      '/enrol',
      {
        schema: {
          operationId: 'agentEnrol',
          tags,
          security: [],
          summary: "Exchange a one-time enrolment token for the server's credential (shown once)",
          body: EnrolBody,
          response: { 201: CredentialSchema, ...errorResponses(400, 413, 415) },
        },
      },
      async (request, reply) => reply.status(201).send(await services.servers.enrol(request.body.token)),
    );
  };
}

/** Issue 30: the agent protocol, behind the server's own credential (the `agent` guard). */
export function agentRoutes({ services }: RouteContext): RoutesPlugin {
  const { servers, fleetCalls, agentSsh, driftRepair } = services;
  return async (app) => {
    app.post(
      '/heartbeat',
      {
        schema: {
          operationId: 'agentHeartbeat',
          tags,
          security,
          summary: 'The agent is alive: its version and its capacity',
          body: HeartbeatBody,
          response: { 200: HeartbeatSchema, ...errorResponses(400, 409, 413, 415) },
        },
      },
      async (request) => {
        const serverId = agentOf(request).serverId;
        const beat = await servers.heartbeat(serverId, request.body);
        await driftRepair.routingMissing(serverId, request.body.report.routing_missing ?? []);
        return { server_id: beat.server_id, name: beat.name, state: beat.state };
      },
    );

    app.post(
      '/credential',
      {
        schema: {
          operationId: 'agentRotateCredential',
          tags,
          security,
          summary: 'A new credential; the one used stays valid until the new one is used, or the grace ends',
          response: { 201: RotatedSchema, ...errorResponses(409) },
        },
      },
      async (request, reply) => {
        const { serverId, credentialHash } = agentOf(request);
        const rotated = await servers.rotate(serverId, credentialHash);
        return reply.status(201).send({
          credential: rotated.credential,
          previous_valid_until: rotated.previous_valid_until.toISOString(),
        });
      },
    );

    app.post(
      '/calls/fetch',
      {
        schema: {
          operationId: 'agentFetchCalls',
          tags,
          security,
          summary: "The server's own calls (long poll, bounded by FLEET_FETCH_WAIT_SECONDS)",
          body: FetchBody,
          response: { 200: CallList, ...errorResponses(400, 413, 415) },
        },
      },
      async (request) => {
        const { serverId } = agentOf(request);
        await servers.session(serverId, request.body.session);
        const abort = new AbortController();
        const gone = () => {
          if (!connected(request)) abort.abort();
        };
        // The socket's close (the request's fires once its body is read): a dead agent's long poll
        // must stop, or it would take the calls given back for its successor (decision #173).
        const socket = request.raw.socket;
        socket?.on('close', gone);
        request.raw.on('close', gone);
        try {
          const calls = await fleetCalls.fetch(
            serverId,
            request.body.max ?? 5,
            request.body.wait_seconds ?? 20,
            abort.signal,
          );
          return { calls };
        } finally {
          request.raw.off('close', gone);
          socket?.off('close', gone);
        }
      },
    );

    app.post(
      '/calls/:call_id/report',
      {
        schema: {
          operationId: 'agentReportCall',
          tags,
          security,
          summary: "A call's outcome: done (its result), pending (ask again at check_at) or failed",
          params: CallParams,
          body: ReportBody,
          response: { 200: ReportSchema, ...errorResponses(400, 403, 404, 413, 415) },
        },
      },
      async (request) => {
        const { serverId } = agentOf(request);
        const body = request.body;
        if (body.status === 'pending' && !body.check_at)
          throw Errors.invalidValue('call', 'check_at', 'A pending report needs check_at');
        if (body.status === 'failed' && !body.error)
          throw Errors.invalidValue('call', 'error', 'A failed report needs error');
        const outcome =
          body.status === 'done'
            ? { status: 'done' as const, result: body.result ?? null }
            : body.status === 'pending'
              ? { status: 'pending' as const, check_at: body.check_at ?? '' }
              : { status: 'failed' as const, error: body.error ?? '', final: body.final ?? false };
        return fleetCalls.report(serverId, request.params.call_id, body.job_id, outcome);
      },
    );

    app.post(
      '/ssh/decide',
      {
        schema: {
          operationId: 'agentSshDecide',
          tags,
          security,
          summary:
            "Issue 31: whether a key opens an install placed on this server (its sshd's key lookup); 403 for any other install",
          body: SshDecideBody,
          response: { 200: SshDecisionSchema, ...errorResponses(400, 403, 413, 415) },
        },
      },
      async (request) =>
        agentSsh.decide(
          agentOf(request).serverId,
          request.body.login,
          request.body.fingerprint ?? null,
          request.body.public_key,
        ),
    );

    app.post(
      '/ssh/logins',
      {
        schema: {
          operationId: 'agentSshLogins',
          tags,
          security,
          summary:
            "Issue 31: the logins this server's sshd logged (audit events; another server's install is not named)",
          body: SshLoginsBody,
          response: { 200: SshLoginsSchema, ...errorResponses(400, 413, 415) },
        },
      },
      async (request) => {
        const logins: SshLogin[] = request.body.logins.map(({ result, login, address, fingerprint }) =>
          result === 'accepted' && fingerprint
            ? { kind: 'accepted', login, address, fingerprint }
            : { kind: 'refused', login, address, fingerprint: fingerprint ?? null },
        );
        await agentSsh.record(agentOf(request).serverId, logins);
        return { recorded: logins.length };
      },
    );

    // Issue 30 (decision #195): backups' archives crossing servers, in parts of at most
    // ARCHIVE_PART_BYTES (each request within the HTTP request timeout, a lost part sent again).
    app.addContentTypeParser(
      'application/octet-stream',
      { parseAs: 'buffer', bodyLimit: ARCHIVE_PART_BYTES },
      (_request, body, done) => done(null, body),
    );

    app.put(
      '/calls/:call_id/archive',
      {
        schema: {
          operationId: 'agentPutArchivePart',
          tags,
          security,
          summary: 'A part of the archive of a backup call this server runs (application/octet-stream)',
          params: CallParams,
          querystring: ArchivePartQuery,
          response: { 200: ArchivePartSchema, ...errorResponses(400, 403, 404, 409, 413, 415) },
        },
        bodyLimit: ARCHIVE_PART_BYTES,
      },
      async (request) => {
        const body = request.body;
        if (!Buffer.isBuffer(body))
          throw Errors.invalidValue('archive', 'body', 'The part is sent as application/octet-stream');
        return fleetCalls.archives.putPart(
          agentOf(request).serverId,
          request.params.call_id,
          request.query.offset,
          body,
        );
      },
    );

    app.post(
      '/calls/:call_id/archive/complete',
      {
        schema: {
          operationId: 'agentCompleteArchive',
          tags,
          security,
          summary: 'The parts sent are the whole archive of the backup call (its length and SHA-256)',
          params: CallParams,
          body: ArchiveCompleteBody,
          response: { 200: ArchiveSchema, ...errorResponses(400, 403, 404, 409, 413, 415) },
        },
      },
      async (request) =>
        fleetCalls.archives.complete(
          agentOf(request).serverId,
          request.params.call_id,
          request.body.bytes,
          request.body.sha256,
        ),
    );

    app.get(
      '/calls/:call_id/archive',
      {
        schema: {
          operationId: 'agentGetArchive',
          tags,
          security,
          summary:
            "The archive a copy or restore call this server runs is made from (another server's backup of the install copied or moved here)",
          params: CallParams,
          response: {
            200: Type.Unsafe<Readable>({
              type: 'string',
              format: 'binary',
              description: 'application/x-tar',
            }),
            ...errorResponses(403, 404, 409),
          },
        },
      },
      async (request, reply) => {
        const file = await fleetCalls.archives.open(agentOf(request).serverId, request.params.call_id);
        // A stored archive that fails its checksum ends the response short of its Content-Length.
        return reply
          .header('content-length', file.size)
          .header('content-type', 'application/x-tar')
          .header('cache-control', 'private, no-store')
          .send(file.body);
      },
    );
  };
}
