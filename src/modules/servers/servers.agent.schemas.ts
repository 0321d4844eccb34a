import { Type } from 'typebox';
import { DateTime, Nullable, Uuid } from '../../http/schemas.js';
import { ServerReport } from './servers.schemas.js';

/** Issue 30: the agent protocol (`/agent/v1`), spoken by `hostplane agent` (src/fleet/agent.ts). */

export const EnrolBody = Type.Object(
  { token: Type.String({ minLength: 1, maxLength: 200, description: 'The one-time enrolment token' }) },
  { additionalProperties: false },
);
export const CredentialSchema = Type.Object({
  server_id: Uuid(),
  credential: Type.String({ description: 'Shown once: the agent keeps it in a 0600 file' }),
});
export const RotatedSchema = Type.Object({
  credential: Type.String({ description: 'Shown once' }),
  previous_valid_until: DateTime(),
});

export const HeartbeatBody = Type.Object(
  {
    protocol: Type.Integer({ minimum: 1, maximum: 1000, description: 'The agent protocol it speaks' }),
    agent_version: Type.String({ minLength: 1, maxLength: 64, pattern: '^[\\x21-\\x7e]+$' }),
    report: ServerReport,
  },
  { additionalProperties: false },
);
export const HeartbeatSchema = Type.Object({
  server_id: Uuid(),
  name: Type.String(),
  state: Type.String(),
});

export const FetchBody = Type.Object(
  {
    session: Type.String({
      minLength: 8,
      maxLength: 64,
      pattern: '^[A-Za-z0-9_-]+$',
      description: 'The agent process: a new one gives back the calls the previous one held',
    }),
    max: Type.Optional(Type.Integer({ minimum: 1, maximum: 20, default: 5 })),
    wait_seconds: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 60,
        default: 20,
        description: 'Long poll (bounded by the server)',
      }),
    ),
  },
  { additionalProperties: false },
);
export const CallSchema = Type.Object({
  id: Uuid(),
  job_id: Uuid(),
  method: Type.String(),
  key: Type.String(),
  input: Type.Unknown(),
  envelope: Type.Object({
    server_id: Uuid(),
    install_id: Uuid(),
    generation: Type.Integer({ minimum: 1 }),
  }),
});
export const CallList = Type.Object({ calls: Type.Array(CallSchema) });

export const CallParams = Type.Object({ call_id: Uuid() });
/** One object (not a union: Fastify's validator strips properties of a union's failed branches). */
export const ReportBody = Type.Object(
  {
    job_id: Uuid(),
    status: Type.String({ enum: ['done', 'pending', 'failed'] }),
    result: Type.Optional(Type.Unknown({ description: "done: the driver call's value" })),
    check_at: Type.Optional(DateTime()),
    error: Type.Optional(Type.String({ minLength: 1, maxLength: 10_000, description: 'failed' })),
    final: Type.Optional(Type.Boolean({ description: 'failed: a retry cannot change it' })),
  },
  { additionalProperties: false },
);
export const ReportSchema = Type.Object({ state: Type.String({ enum: ['queued', 'done', 'failed'] }) });

/** Issue 31 with several servers (decision 200): a key lookup of the server's sshd, through its agent. */
export const SshDecideBody = Type.Object(
  {
    login: Type.String({ minLength: 1, maxLength: 32, pattern: '^[a-z][a-z0-9]{1,31}$' }),
    fingerprint: Type.Optional(
      Type.String({ maxLength: 100, pattern: '^SHA256:[A-Za-z0-9+/]+$', description: "The key's" }),
    ),
    public_key: Type.Optional(
      Type.String({
        maxLength: 9000,
        pattern: '^[a-z0-9-]+ [A-Za-z0-9+/]+={0,2}$',
        description: 'At a key lookup: `<type> <base64>`, compared with the registered key',
      }),
    ),
  },
  { additionalProperties: false },
);
export const SshDecisionSchema = Type.Object({
  allowed: Type.Boolean({ description: 'The key opens the install now' }),
  install_id: Uuid(),
  install_name: Nullable(Type.String()),
  full_access: Type.Boolean({ description: 'Owner or full user (a shell where SSH_SHELLS=on)' }),
});
export const SshLoginsBody = Type.Object(
  {
    logins: Type.Array(
      Type.Object(
        {
          result: Type.String({ enum: ['accepted', 'refused'] }),
          login: Type.String({ minLength: 0, maxLength: 64 }),
          address: Type.String({ minLength: 1, maxLength: 64, pattern: '^[0-9A-Fa-f:.]+$' }),
          fingerprint: Nullable(Type.String({ maxLength: 100, pattern: '^SHA256:[A-Za-z0-9+/]+$' })),
        },
        { additionalProperties: false },
      ),
      { maxItems: 200 },
    ),
  },
  { additionalProperties: false },
);
export const SshLoginsSchema = Type.Object({ recorded: Type.Integer({ minimum: 0 }) });
/** Issue 30: a part of a backup's archive (decision #195). */
export const ArchivePartQuery = Type.Object(
  {
    offset: Type.Integer({
      minimum: 0,
      maximum: Number.MAX_SAFE_INTEGER,
      description: 'Where the part starts',
    }),
  },
  { additionalProperties: false },
);
export const ArchivePartSchema = Type.Object({
  bytes: Type.Integer({ description: 'The bytes of the archive held so far' }),
});
export const ArchiveCompleteBody = Type.Object(
  {
    bytes: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }),
    sha256: Type.String({ pattern: '^[0-9a-f]{64}$', description: 'SHA-256 of the whole archive' }),
  },
  { additionalProperties: false },
);
export const ArchiveSchema = Type.Object({
  id: Uuid({ description: 'The backup call whose archive it is' }),
  bytes: Type.Integer(),
  sha256: Type.String(),
});
