import { Type } from 'typebox';
import { WEBHOOK_ATTEMPT_ERROR_KINDS } from '../../db/schema.js';
import { Paginated } from '../../http/pagination.js';
import { DateTime, Nullable, Uuid } from '../../http/schemas.js';
import { EventType } from './events.schemas.js';

const EXAMPLE_ENDPOINT = {
  id: '3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f',
  account_id: '5f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f',
  url: 'https://hooks.example.com/hostplane',
  description: 'CI pipeline',
  event_types: ['backup.completed', 'backup.failed'],
  enabled: true,
  disabled_reason: null,
  failing_since: null,
  secret_rotation_ends_at: null,
  created_at: '2026-11-26T01:00:00.000Z',
  updated_at: '2026-11-26T01:00:00.000Z',
};

const endpointFields = {
  id: Uuid(),
  account_id: Uuid(),
  url: Type.String({ format: 'uri' }),
  description: Type.String(),
  event_types: Type.Array(Type.String(), { description: 'Event types delivered; empty: every type' }),
  enabled: Type.Boolean(),
  disabled_reason: Nullable(
    Type.String({ description: 'Why the platform disabled it (3 days of failures)' }),
  ),
  failing_since: Nullable(DateTime()),
  secret_rotation_ends_at: Nullable(
    Type.String({
      format: 'date-time',
      description: 'Until then deliveries carry the previous secret’s signature too',
    }),
  ),
  created_at: DateTime(),
  updated_at: DateTime(),
};

export const WebhookEndpointSchema = Type.Object(endpointFields, { examples: [EXAMPLE_ENDPOINT] });

export const WebhookEndpointWithSecret = Type.Object(
  {
    ...endpointFields,
    secret: Type.String({ description: 'The signing secret (whsec_...), shown only in this response' }),
  },
  { examples: [{ ...EXAMPLE_ENDPOINT, secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' }] },
);

export const WebhookEndpointList = Paginated(WebhookEndpointSchema, 'A page of webhook endpoints');

const url = Type.String({
  minLength: 8,
  maxLength: 2048,
  description: 'http(s) URL; refused when it resolves to a loopback, private, link-local or metadata address',
});
const description = Type.String({ maxLength: 500 });
const eventTypes = Type.Array(EventType, {
  maxItems: 50,
  description: 'Event types to deliver; empty or absent: every type',
});

export const CreateWebhookEndpointBody = Type.Object(
  {
    url,
    description: Type.Optional(description),
    event_types: Type.Optional(eventTypes),
    enabled: Type.Optional(Type.Boolean({ default: true })),
  },
  {
    examples: [
      {
        url: 'https://hooks.example.com/hostplane',
        description: 'CI pipeline',
        event_types: ['backup.completed'],
      },
    ],
  },
);

export const UpdateWebhookEndpointBody = Type.Object(
  {
    url: Type.Optional(url),
    description: Type.Optional(description),
    event_types: Type.Optional(eventTypes),
    enabled: Type.Optional(Type.Boolean({ description: 'true again after a disable clears the failure' })),
  },
  { minProperties: 1, examples: [{ enabled: true }] },
);

export const WebhookEndpointParams = Type.Object({ account_id: Uuid(), webhook_endpoint_id: Uuid() });
export const WebhookDeliveryParams = Type.Object({
  account_id: Uuid(),
  webhook_endpoint_id: Uuid(),
  delivery_id: Uuid(),
});

const EXAMPLE_ATTEMPTS = [
  {
    attempt: 1,
    started_at: '2026-11-26T01:00:00.000Z',
    status_code: 500,
    error_kind: 'http_status',
    error: 'HTTP 500',
    latency_ms: 35,
    response_excerpt: 'Internal Server Error',
  },
  {
    attempt: 2,
    started_at: '2026-11-26T01:00:05.000Z',
    status_code: null,
    error_kind: 'timeout',
    error: 'timed out after 10000 ms',
    latency_ms: 10000,
    response_excerpt: null,
  },
  {
    attempt: 3,
    started_at: '2026-11-26T01:00:50.000Z',
    status_code: 200,
    error_kind: null,
    error: null,
    latency_ms: 42,
    response_excerpt: 'ok',
  },
];

export const WebhookAttemptSchema = Type.Object(
  {
    attempt: Type.Integer({ minimum: 1, description: 'The attempt number (counts on across redeliveries)' }),
    started_at: DateTime(),
    status_code: Nullable(
      Type.Integer({ description: 'The HTTP status answered; null: no response (refused, DNS, timeout)' }),
    ),
    error_kind: Nullable(
      Type.String({
        enum: [...WEBHOOK_ATTEMPT_ERROR_KINDS],
        description:
          'null: delivered (2xx). refused: the URL resolves to a refused address; dns: it does not resolve; ' +
          'connection: the connection failed; timeout: no answer within WEBHOOK_TIMEOUT_MS; http_status: ' +
          'a status other than 2xx (redirects are not followed)',
      }),
    ),
    error: Nullable(Type.String({ maxLength: 500 })),
    latency_ms: Type.Integer({ minimum: 0 }),
    response_excerpt: Nullable(Type.String({ description: 'At most 1 KB of the response body' })),
  },
  { examples: [EXAMPLE_ATTEMPTS[0]] },
);

const EXAMPLE_DELIVERY = {
  id: '4d5e6f7a-8b9c-4d0e-8f1a-2b3c4d5e6f7a',
  event_id: '0b9b3f1e-4a0c-4f57-9d0e-6c7a1f2d3e4f',
  event_type: 'backup.completed',
  status: 'delivered',
  attempts: 3,
  next_attempt_at: null,
  last_attempt_at: '2026-11-26T01:00:50.000Z',
  last_status_code: 200,
  last_latency_ms: 42,
  last_error: null,
  response_excerpt: 'ok',
  delivered_at: '2026-11-26T01:00:50.000Z',
  created_at: '2026-11-26T01:00:00.000Z',
  attempt_log: EXAMPLE_ATTEMPTS,
};

export const WebhookDeliverySchema = Type.Object(
  {
    id: Uuid(),
    event_id: Uuid({ description: 'The `webhook-id` header: the same on every attempt' }),
    event_type: Type.String(),
    status: Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('failed')]),
    attempts: Type.Integer({ minimum: 0 }),
    next_attempt_at: Nullable(DateTime()),
    last_attempt_at: Nullable(DateTime()),
    last_status_code: Nullable(Type.Integer({ description: 'null: no response (refused, DNS, timeout)' })),
    last_latency_ms: Nullable(Type.Integer()),
    last_error: Nullable(Type.String()),
    response_excerpt: Nullable(Type.String({ description: 'At most 1 KB of the last response body' })),
    delivered_at: Nullable(DateTime()),
    created_at: DateTime(),
    attempt_log: Type.Array(WebhookAttemptSchema, {
      maxItems: 20,
      description:
        'The delivery log: its latest 20 attempts, oldest first (`attempts` counts them all). Kept with the delivery for 30 days',
    }),
  },
  { examples: [EXAMPLE_DELIVERY] },
);

export const WebhookDeliveryList = Paginated(WebhookDeliverySchema, 'A page of deliveries, newest first');
