import { Type } from 'typebox';
import { DateTime, Nullable, Uuid } from '../../http/schemas.js';
import { EVENT_TYPES } from './events.service.js';

const EXAMPLE_EVENT = {
  id: '0b9b3f1e-4a0c-4f57-9d0e-6c7a1f2d3e4f',
  type: 'backup.completed',
  created_at: '2026-11-26T01:00:00.000Z',
  account_id: '5f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f',
  install_id: '7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c0d',
  resource: { type: 'backup', id: '9c0d1e2f-3a4b-4c5d-8e6f-7a8b9c0d1e2f' },
  data: {
    operation_id: '1e2f3a4b-5c6d-4e7f-8a9b-0c1d2e3f4a5b',
    operation_type: 'create_backup',
    status: 'completed',
    error: null,
  },
};

export const EventType = Type.Union(
  EVENT_TYPES.map((t) => Type.Literal(t)),
  { description: 'The kind of state change' },
);

/** Issue 22: one state change of an account's resources (also the body of a webhook delivery). */
export const EventSchema = Type.Object(
  {
    id: Uuid({ description: 'The event id; `webhook-id` of its deliveries' }),
    type: Type.String({ description: 'The kind of state change (see the `type` filter)' }),
    created_at: DateTime(),
    account_id: Uuid(),
    install_id: Nullable(Uuid({ description: 'The install it is about, if any' })),
    resource: Type.Object({
      type: Type.String({ description: 'backup, install, operation, site_transfer, ...' }),
      id: Type.String(),
    }),
    data: Type.Record(Type.String(), Type.Unknown(), { description: 'Details of the change' }),
  },
  { examples: [EXAMPLE_EVENT] },
);

export const EventList = Type.Object(
  {
    results: Type.Array(EventSchema, { description: 'Newest first' }),
    has_more: Type.Boolean({
      description: 'Whether older events follow (pass the last id as starting_after)',
    }),
    next: Nullable(Type.String({ format: 'uri', description: 'Absolute URL of the next (older) page' })),
  },
  {
    description: 'A page of events, newest first',
    examples: [{ results: [EXAMPLE_EVENT], has_more: false, next: null }],
  },
);

export const EventQuery = Type.Object({
  limit: Type.Optional(
    Type.Integer({ minimum: 1, maximum: 100, default: 50, description: 'Events to return' }),
  ),
  starting_after: Type.Optional(Uuid({ description: 'An event id: the page starts after (older than) it' })),
  type: Type.Optional(
    Type.Array(EventType, { maxItems: 25, description: 'Only these types (repeat the parameter)' }),
  ),
  resource_id: Type.Optional(
    Type.String({ minLength: 1, maxLength: 64, description: 'Only events about this resource (or install)' }),
  ),
  install_id: Type.Optional(Uuid({ description: 'Only events of this install' })),
});
