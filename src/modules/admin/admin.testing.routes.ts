import { isManualClock } from '../../clock.js';
import type { DriverOperation } from '../../drivers/driver.js';
import { AppError, Errors } from '../../errors.js';
import { envelope, pageOf } from '../../http/pagination.js';
import { errorResponses } from '../../http/schemas.js';
import type { MailRow } from '../../mail/outbox.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';
import {
  ClockSchema,
  FaultBody,
  FaultsSchema,
  MailList,
  MailQuery,
  MoveClockBody,
} from './admin.testing.schemas.js';

const toMail = (row: MailRow) => ({
  id: row.id,
  operation_id: row.operation_id,
  event: row.event,
  to: row.to_address,
  subject: row.subject,
  text: row.text_body,
  html: row.html_body,
  status: row.status,
  attempts: row.attempts,
  last_error: row.last_error,
  created_at: row.created_at.toISOString(),
  sent_at: row.sent_at?.toISOString() ?? null,
});

/**
 * The operators' test surface under /admin/v1 (design.md): the manual clock (HOSTPLANE_CLOCK=manual),
 * fault injection (HOSTPLANE_FAULTS=on, test mode) and the outbox. Off features answer 404 saying how
 * to turn them on.
 */
export function adminTestingRoutes({ config, services }: RouteContext): RoutesPlugin {
  const { clock } = services;
  return async (app) => {
    const tags = ['Admin'];
    const security = [{ adminToken: [] }];

    const describeClock = async (enqueued?: number) => ({
      mode: config.clockMode,
      now: clock.now().toISOString(),
      next_due: (await services.due.next())?.toISOString() ?? null,
      ...(enqueued !== undefined && { enqueued }),
    });

    app.get(
      '/clock',
      {
        schema: {
          operationId: 'adminGetClock',
          tags,
          security,
          response: { 200: ClockSchema, ...errorResponses() },
        },
      },
      async () => describeClock(),
    );

    app.post(
      '/clock',
      {
        schema: {
          operationId: 'adminMoveClock',
          tags,
          security,
          summary: 'Move the manual clock; due work is enqueued at once',
          body: MoveClockBody,
          response: { 200: ClockSchema, ...errorResponses(400, 404, 413, 415) },
        },
        config: { resource: 'clock' },
      },
      async (request) => {
        if (config.clockMode !== 'manual' || !isManualClock(clock)) {
          throw new AppError(
            'not_found',
            'The clock is the system clock; start with HOSTPLANE_CLOCK=manual to move it',
          );
        }
        const { advance_seconds: advance, now } = request.body;
        if ((advance === undefined) === (now === undefined)) {
          throw Errors.invalidValue(
            'clock',
            'advance_seconds',
            'Give exactly one of advance_seconds and now',
          );
        }
        if (advance !== undefined) clock.advance(advance * 1000);
        else if (now !== undefined) clock.set(new Date(now));
        // Due work runs right after a move: it is enqueued now (and NOTIFY wakes the workers).
        return describeClock(await services.due.sweep());
      },
    );

    app.post(
      '/faults',
      {
        schema: {
          operationId: 'adminSetFault',
          tags,
          security,
          summary: 'Make the next `count` driver calls of an operation fail or hang (test mode)',
          body: FaultBody,
          response: { 200: FaultsSchema, ...errorResponses(400, 404, 413, 415) },
        },
        config: { resource: 'fault' },
      },
      async (request) => {
        if (!config.faultsEnabled) {
          throw new AppError(
            'not_found',
            'Fault injection is off; start with HOSTPLANE_FAULTS=on (test mode)',
          );
        }
        const faults = await services.faults.set({
          operation: request.body.operation as DriverOperation,
          count: request.body.count,
          mode: request.body.mode as 'fail' | 'hang',
        });
        return { faults };
      },
    );

    app.get(
      '/faults',
      {
        schema: {
          operationId: 'adminListFaults',
          tags,
          security,
          response: { 200: FaultsSchema, ...errorResponses(404) },
        },
      },
      async () => {
        if (!config.faultsEnabled) {
          throw new AppError(
            'not_found',
            'Fault injection is off; start with HOSTPLANE_FAULTS=on (test mode)',
          );
        }
        return { faults: await services.faults.list() };
      },
    );

    app.get(
      '/mail',
      {
        schema: {
          operationId: 'adminListMail',
          tags,
          security,
          summary: 'Outgoing mail, newest first (kept here when SMTP_URL is unset)',
          querystring: MailQuery,
          response: { 200: MailList, ...errorResponses(400) },
        },
        config: { resource: 'mail' },
      },
      async (request) => {
        const page = pageOf(request.query);
        const { count, rows } = await services.outbox.list(page);
        return envelope(request, config.publicUrl, page, count, rows.map(toMail));
      },
    );
  };
}
