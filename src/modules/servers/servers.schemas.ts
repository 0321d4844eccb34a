import { Type } from 'typebox';
import { Paginated } from '../../http/pagination.js';
import { DateTime, DryRunAnswer, Nullable, Uuid } from '../../http/schemas.js';

/** Issue 30: hosting servers in the admin API (docs/architecture.md, Fleet). */
export const SERVER_STATES = ['active', 'cordoned', 'draining'] as const;
/** `new`: no heartbeat yet; `live`; `silent`: the last heartbeat is older than FLEET_SILENT_SECONDS. */
export const SERVER_STATUSES = ['new', 'live', 'silent'] as const;

const ServerName = Type.String({ minLength: 1, maxLength: 63, pattern: '^[a-z0-9]([a-z0-9-]*[a-z0-9])?$' });
/** Label keys: lower-case words (`region`, `plan`, `disk.type`); values: up to 100 printable characters. */
const Labels = Type.Record(
  Type.String({ pattern: '^[a-z][a-z0-9_.-]{0,62}$' }),
  Type.String({ minLength: 1, maxLength: 100, pattern: '^[\\x21-\\x7e]([\\x20-\\x7e]*[\\x21-\\x7e])?$' }),
  { maxProperties: 32, description: "`region` is matched with the accounts' preferred_data_center" },
);
const Ipv4List = Type.Array(Type.String({ format: 'ipv4' }), { maxItems: 16, uniqueItems: true });
const Ipv6List = Type.Array(Type.String({ format: 'ipv6', maxLength: 45 }), {
  maxItems: 16,
  uniqueItems: true,
});
const Capacity = Type.Object(
  { installs: Type.Integer({ minimum: 0, maximum: 100_000, description: 'Installs the server may hold' }) },
  { additionalProperties: false },
);

export const ServerParams = Type.Object({ server_id: Uuid() });

export const CreateServerBody = Type.Object(
  {
    name: ServerName,
    labels: Type.Optional(Labels),
    ipv4: Type.Optional(Ipv4List),
    ipv6: Type.Optional(Ipv6List),
    capacity: Capacity,
  },
  { additionalProperties: false },
);

export const PatchServerBody = Type.Object(
  {
    labels: Type.Optional(Labels),
    state: Type.Optional(Type.String({ enum: [...SERVER_STATES] })),
    capacity: Type.Optional(Capacity),
    ipv4: Type.Optional(Ipv4List),
    ipv6: Type.Optional(Ipv6List),
  },
  { additionalProperties: false, minProperties: 1 },
);

/** What the agent reported with its last heartbeat. */
export const ServerReport = Type.Object({
  disk_total_bytes: Type.Integer({ minimum: 0 }),
  disk_free_bytes: Type.Integer({ minimum: 0 }),
  memory_total_bytes: Type.Integer({ minimum: 0 }),
  memory_free_bytes: Type.Integer({ minimum: 0 }),
  load1: Type.Number({ minimum: 0, maximum: 1_000_000 }),
  installs: Type.Integer({ minimum: 0, maximum: 1_000_000 }),
  drift: Type.Optional(
    Type.Array(Type.String({ maxLength: 300 }), {
      maxItems: 100,
      description:
        "Issue 30: what the agent's last reconcile found missing on the server (e.g. an install's server block), one line each",
    }),
  ),
  routing_missing: Type.Optional(
    Type.Array(Type.String({ format: 'uuid' }), {
      maxItems: 100,
      description:
        'Issue 30: installs whose server block the agent found missing: the control plane applies their routing again',
    }),
  ),
  protocol: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: 1000,
      description:
        'The agent protocol of its last heartbeat (set by the control plane; a move needs 2 on both servers)',
    }),
  ),
});

export const ServerSchema = Type.Object({
  id: Uuid(),
  name: Type.String(),
  labels: Type.Record(Type.String(), Type.String()),
  ipv4: Type.Array(Type.String()),
  ipv6: Type.Array(Type.String()),
  capacity: Type.Object({ installs: Type.Integer() }),
  state: Type.String({ enum: [...SERVER_STATES] }),
  status: Type.String({ enum: [...SERVER_STATUSES], description: "From the agent's heartbeats" }),
  installs: Type.Integer({ description: 'Installs placed on the server' }),
  enrolled: Type.Boolean({ description: 'An agent holds a valid credential of the server' }),
  last_heartbeat_at: Nullable(DateTime()),
  agent_version: Nullable(Type.String()),
  reported: Nullable(ServerReport),
  drain: Nullable(
    Type.Object(
      {
        drain_id: Uuid(),
        moved: Type.Integer({ minimum: 0 }),
        moving: Type.Integer({ minimum: 0 }),
        failed: Type.Integer({ minimum: 0 }),
      },
      {
        description: "The latest drain's moves (the installs remaining are `installs`); null: never drained",
      },
    ),
  ),
  created_at: DateTime(),
});

export const EnrolmentSchema = Type.Object({
  token: Type.String({ description: 'Shown once: give it to the agent (AGENT_ENROLMENT_TOKEN)' }),
  expires_at: DateTime(),
});

export const CreatedServerSchema = Type.Object({ server: ServerSchema, enrolment: EnrolmentSchema });

export const ServerList = Paginated(ServerSchema, 'Hosting servers, oldest first');

export const PlacementSchema = Type.Object({
  install_id: Uuid(),
  generation: Type.Integer({ minimum: 1 }),
  placed_at: DateTime(),
});
export const PlacementList = Paginated(PlacementSchema, "The server's installs, oldest placement first");

// Issue 30: moves and drains.

export const InstallParams = Type.Object({ install_id: Uuid() });

export const MoveBody = Type.Object(
  {
    server_id: Type.Optional(
      Nullable(Uuid({ description: 'The target server; absent or null: placement picks one' })),
    ),
  },
  { additionalProperties: false },
);

export const MoveDryRun = DryRunAnswer(
  {
    operation: Type.Literal('move_install'),
    install_id: Uuid(),
    source_server_id: Uuid(),
    target_server_id: Uuid(),
    expected_seconds: Type.Integer({ minimum: 0 }),
  },
  {
    description: 'the server the install would move to',
    example: {
      operation: 'move_install',
      install_id: '7b1d5f3e-2a44-4b1f-9b7e-0c2f4a9d8e11',
      source_server_id: '0d6f2c1a-5b3e-4c7d-8e9f-1a2b3c4d5e6f',
      target_server_id: '9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b',
      expected_seconds: 1560,
    },
  },
);

export const MOVE_STATUSES = ['unplaced', 'placed', 'moving', 'move_failed'] as const;

export const MoveViewSchema = Type.Object({
  install_id: Uuid(),
  status: Type.String({
    enum: [...MOVE_STATUSES],
    description:
      '`moving`: a move is open (the source serves until its switch); `move_failed`: the latest move failed and the install stays where it was',
  }),
  server: Nullable(
    Type.Object({ id: Uuid(), name: Type.String(), generation: Type.Integer({ minimum: 1 }) }),
  ),
  move: Nullable(
    Type.Object({
      operation_id: Uuid(),
      status: Type.String(),
      phase: Nullable(Type.String({ enum: ['copying', 'syncing', 'verifying', 'switched', 'rolling_back'] })),
      source_server_id: Nullable(Uuid()),
      target_server_id: Nullable(Uuid()),
      cancel_requested: Type.Boolean(),
      forward_until: Nullable(
        Type.String({
          format: 'date-time',
          description:
            "After the switch: until when the old server passes the install's requests to the new one (visitors with its address cached), then it is cleaned",
        }),
      ),
      error: Nullable(Type.String()),
      created_at: DateTime(),
      completed_at: Nullable(DateTime()),
    }),
  ),
});

export const DrainSchema = Type.Object({
  drain_id: Uuid(),
  started: Type.Array(Uuid(), { description: 'Installs whose move started' }),
  skipped: Type.Array(Type.Object({ install_id: Uuid(), reason: Type.String() }), {
    description: 'Installs whose move could not start (drain again once the reason is gone)',
  }),
});

export const UndrainSchema = Type.Object({
  server: ServerSchema,
  cancelled: Type.Integer({ minimum: 0, description: "The drain's moves that roll back" }),
});
