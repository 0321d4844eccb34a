import { Type } from 'typebox';
import { DRIVER_OPERATIONS } from '../../drivers/driver.js';
import { PageQuery, Paginated } from '../../http/pagination.js';
import { DateTime, Nullable, Uuid } from '../../http/schemas.js';

export const ClockSchema = Type.Object({
  mode: Type.String({ enum: ['system', 'manual'] }),
  now: DateTime(),
  next_due: Nullable(DateTime()),
  enqueued: Type.Optional(Type.Integer({ description: 'Due jobs enqueued by this move' })),
});

/** One of `advance_seconds` or `now`. */
export const MoveClockBody = Type.Object({
  advance_seconds: Type.Optional(Type.Number({ minimum: 0, maximum: 10 * 366 * 86_400 })),
  now: Type.Optional(DateTime()),
});

export const FaultBody = Type.Object({
  operation: Type.String({ enum: [...DRIVER_OPERATIONS], description: 'The driver operation' }),
  count: Type.Integer({ minimum: 0, maximum: 1000, description: 'How many of the next calls; 0 clears' }),
  mode: Type.String({ enum: ['fail', 'hang'] }),
});

export const FaultsSchema = Type.Object({
  faults: Type.Array(Type.Object({ operation: Type.String(), mode: Type.String(), count: Type.Integer() })),
});

export const MailSchema = Type.Object({
  id: Uuid(),
  operation_id: Nullable(Uuid()),
  event: Type.String(),
  to: Type.String(),
  subject: Type.String(),
  text: Type.String(),
  html: Type.String(),
  status: Type.String({ enum: ['pending', 'sent', 'kept', 'failed'] }),
  attempts: Type.Integer(),
  last_error: Nullable(Type.String()),
  created_at: DateTime(),
  sent_at: Nullable(DateTime()),
});
export const MailList = Paginated(MailSchema, 'Outgoing mail, newest first');
export const MailQuery = PageQuery;
