import { Type } from 'typebox';
import { callerOf } from '../../http/auth.js';
import { envelope, PageQuery, pageOf } from '../../http/pagination.js';
import { errorResponses } from '../../http/schemas.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';
import { AccountParams } from '../accounts/accounts.schemas.js';
import {
  CreateWebhookEndpointBody,
  UpdateWebhookEndpointBody,
  WebhookDeliveryList,
  WebhookDeliveryParams,
  WebhookDeliverySchema,
  WebhookEndpointList,
  WebhookEndpointParams,
  WebhookEndpointSchema,
  WebhookEndpointWithSecret,
} from './webhooks.schemas.js';
import type { AttemptRow, DeliveryWithAttempts, EndpointRow } from './webhooks.service.js';

const iso = (d: Date | null) => d?.toISOString() ?? null;

function toEndpoint(row: EndpointRow, now: Date) {
  const overlap = row.previous_secret_expires_at;
  return {
    id: row.id,
    account_id: row.account_id,
    url: row.url,
    description: row.description,
    event_types: row.event_types,
    enabled: row.enabled,
    disabled_reason: row.disabled_reason,
    failing_since: iso(row.failing_since),
    secret_rotation_ends_at: row.previous_secret && overlap && overlap > now ? overlap.toISOString() : null,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

function toAttempt(row: AttemptRow) {
  return {
    attempt: row.attempt,
    started_at: row.started_at.toISOString(),
    status_code: row.status_code,
    error_kind: row.error_kind,
    error: row.error,
    latency_ms: row.latency_ms,
    response_excerpt: row.response_excerpt,
  };
}

function toDelivery(row: DeliveryWithAttempts) {
  return {
    id: row.id,
    event_id: row.event_id,
    event_type: row.event_type,
    status: row.status,
    attempts: row.attempts,
    next_attempt_at: iso(row.next_attempt_at),
    last_attempt_at: iso(row.last_attempt_at),
    last_status_code: row.last_status_code,
    last_latency_ms: row.last_latency_ms,
    last_error: row.last_error,
    response_excerpt: row.last_response,
    delivered_at: iso(row.delivered_at),
    created_at: row.created_at.toISOString(),
    attempt_log: row.attempt_log.map(toAttempt),
  };
}

/** Issue 22: webhook endpoints of an account (owners only), their deliveries, rotation and ping. */
export function webhooksRoutes({ config, services }: RouteContext): RoutesPlugin {
  return async (app) => {
    const tags = ['Webhook'];
    const resource = 'webhook_endpoint';
    const base = '/accounts/:account_id/webhook_endpoints';
    const one = `${base}/:webhook_endpoint_id`;
    const now = () => services.clock.now();
    const hooks = services.webhooks;

    app.get(
      base,
      {
        schema: {
          operationId: 'listWebhookEndpoints',
          tags,
          summary: "The account's webhook endpoints (owners)",
          params: AccountParams,
          querystring: PageQuery,
          response: { 200: WebhookEndpointList, ...errorResponses(400, 403, 404) },
        },
        config: { resource },
      },
      async (request) => {
        const page = pageOf(request.query);
        const { count, rows } = await hooks.list(callerOf(request), request.params.account_id, page);
        const t = now();
        return envelope(
          request,
          config.publicUrl,
          page,
          count,
          rows.map((r) => toEndpoint(r, t)),
        );
      },
    );

    app.post(
      base,
      {
        schema: {
          operationId: 'createWebhookEndpoint',
          tags,
          summary: 'Add a webhook endpoint; its signing secret is in this response only',
          params: AccountParams,
          body: CreateWebhookEndpointBody,
          response: { 201: WebhookEndpointWithSecret, ...errorResponses(400, 403, 404, 413, 415) },
        },
        config: { resource },
      },
      async (request, reply) => {
        const { row, secret } = await hooks.create(
          callerOf(request),
          request.params.account_id,
          request.body,
        );
        return reply.status(201).send({ ...toEndpoint(row, now()), secret });
      },
    );

    app.get(
      one,
      {
        schema: {
          operationId: 'getWebhookEndpoint',
          tags,
          summary: 'A webhook endpoint',
          params: WebhookEndpointParams,
          response: { 200: WebhookEndpointSchema, ...errorResponses(400, 403, 404) },
        },
        config: { resource },
      },
      async (request) =>
        toEndpoint(
          await hooks.get(callerOf(request), request.params.account_id, request.params.webhook_endpoint_id),
          now(),
        ),
    );

    app.patch(
      one,
      {
        schema: {
          operationId: 'updateWebhookEndpoint',
          tags,
          summary: 'Change a webhook endpoint (enabled: true resumes a disabled one)',
          params: WebhookEndpointParams,
          body: UpdateWebhookEndpointBody,
          response: { 200: WebhookEndpointSchema, ...errorResponses(400, 403, 404, 413, 415) },
        },
        config: { resource },
      },
      async (request) =>
        toEndpoint(
          await hooks.update(
            callerOf(request),
            request.params.account_id,
            request.params.webhook_endpoint_id,
            request.body,
          ),
          now(),
        ),
    );

    app.delete(
      one,
      {
        schema: {
          operationId: 'deleteWebhookEndpoint',
          tags,
          summary: 'Delete a webhook endpoint (its pending deliveries are dropped)',
          params: WebhookEndpointParams,
          response: { 204: Type.Null({ description: 'Deleted' }), ...errorResponses(400, 403, 404) },
        },
        config: { resource },
      },
      async (request, reply) => {
        await hooks.remove(callerOf(request), request.params.account_id, request.params.webhook_endpoint_id);
        return reply.status(204).send(null);
      },
    );

    app.post(
      `${one}/rotate_secret`,
      {
        schema: {
          operationId: 'rotateWebhookEndpointSecret',
          tags,
          summary: 'A new signing secret (shown once); the old one also signs for 24 hours',
          params: WebhookEndpointParams,
          response: { 200: WebhookEndpointWithSecret, ...errorResponses(400, 403, 404) },
        },
        config: { resource },
      },
      async (request) => {
        const { row, secret } = await hooks.rotate(
          callerOf(request),
          request.params.account_id,
          request.params.webhook_endpoint_id,
        );
        return { ...toEndpoint(row, now()), secret };
      },
    );

    app.post(
      `${one}/ping`,
      {
        schema: {
          operationId: 'pingWebhookEndpoint',
          tags,
          summary: 'Send a signed webhook.ping to the endpoint (see its deliveries for the outcome)',
          params: WebhookEndpointParams,
          response: { 202: WebhookDeliverySchema, ...errorResponses(400, 403, 404) },
        },
        config: { resource },
      },
      async (request, reply) =>
        reply
          .status(202)
          .send(
            toDelivery(
              await hooks.ping(
                callerOf(request),
                request.params.account_id,
                request.params.webhook_endpoint_id,
              ),
            ),
          ),
    );

    app.get(
      `${one}/deliveries`,
      {
        schema: {
          operationId: 'listWebhookDeliveries',
          tags,
          summary: 'The delivery log: attempts, last status code, latency and response excerpt',
          params: WebhookEndpointParams,
          querystring: PageQuery,
          response: { 200: WebhookDeliveryList, ...errorResponses(400, 403, 404) },
        },
        config: { resource },
      },
      async (request) => {
        const page = pageOf(request.query);
        const { count, rows } = await hooks.deliveries(
          callerOf(request),
          request.params.account_id,
          request.params.webhook_endpoint_id,
          page,
        );
        return envelope(request, config.publicUrl, page, count, rows.map(toDelivery));
      },
    );

    app.get(
      `${one}/deliveries/:delivery_id`,
      {
        schema: {
          operationId: 'getWebhookDelivery',
          tags,
          summary: 'One delivery of the log, with its latest attempts',
          params: WebhookDeliveryParams,
          response: { 200: WebhookDeliverySchema, ...errorResponses(400, 403, 404) },
        },
        config: { resource },
      },
      async (request) => {
        const { account_id, webhook_endpoint_id, delivery_id } = request.params;
        return toDelivery(
          await hooks.delivery(callerOf(request), account_id, webhook_endpoint_id, delivery_id),
        );
      },
    );

    app.post(
      `${one}/deliveries/:delivery_id/redeliver`,
      {
        schema: {
          operationId: 'redeliverWebhookDelivery',
          tags,
          summary: 'Send a delivery again (same webhook-id), now',
          params: WebhookDeliveryParams,
          response: { 202: WebhookDeliverySchema, ...errorResponses(400, 403, 404) },
        },
        config: { resource },
      },
      async (request, reply) => {
        const { account_id, webhook_endpoint_id, delivery_id } = request.params;
        const row = await hooks.redeliver(callerOf(request), account_id, webhook_endpoint_id, delivery_id);
        return reply.status(202).send(toDelivery(row));
      },
    );
  };
}
