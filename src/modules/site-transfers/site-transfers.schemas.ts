import { Type } from 'typebox';
import { PageQuery, Paginated } from '../../http/pagination.js';
import { DateTime, DryRunAnswer, Nullable, Uuid } from '../../http/schemas.js';

/** T9: every status a transfer can have. */
export const TRANSFER_STATUSES = [
  'pending',
  'scheduled',
  'in_progress',
  'completed',
  'failed',
  'cancelled',
] as const;

/** The reference's SiteTransfer record: names as they were when the transfer was made (T10). */
export const SiteTransferSchema = Type.Object(
  {
    id: Uuid(),
    site: Type.String({ description: 'Site name as it was at transfer time' }),
    installs: Type.Array(Type.String(), { description: 'Install names at transfer time' }),
    origin_account: Type.String({ description: 'Name of the source account' }),
    destination_account: Type.String({ description: 'Name of the target account' }),
    status: Type.String({ enum: [...TRANSFER_STATUSES] }),
    scheduled_time: Nullable(DateTime()),
    created_at: DateTime(),
    updated_at: DateTime(),
  },
  { description: 'A site transfer' },
);

export const SiteTransferList = Paginated(SiteTransferSchema, 'A page of site transfers, newest first');

export const AccountTransfersParams = Type.Object({ account_id: Uuid() });
export const SiteTransfersParams = Type.Object({ site_id: Uuid() });
export const SiteTransferParams = Type.Object({ site_id: Uuid(), transfer_id: Uuid() });
export const SiteTransfersQuery = PageQuery;

/**
 * createSiteTransfer. `scheduled_time` is a bounded string here, not `format: date-time`: whether it
 * is RFC 3339 with an offset and inside the window is a parameter validation (T6/T8, 422), decided in
 * the service; a body of the wrong shape (missing or non-uuid destination) is a 400 like elsewhere.
 */
export const CreateSiteTransferBody = Type.Object(
  {
    destination_account_id: Uuid({ description: 'UUID of the account to transfer the site to' }),
    scheduled_time: Type.Optional(
      Nullable(
        Type.String({
          maxLength: 64,
          description: 'RFC 3339 date-time with an offset, 1 hour to 7 days ahead; omit for now',
        }),
      ),
    ),
    maintenance_mode: Type.Optional(
      Type.Boolean({ default: false, description: "The site's installs are in maintenance during the move" }),
    ),
  },
  { description: 'A site transfer request' },
);

/** Issue 22: what `POST /v1/sites/{id}/site_transfers?dry_run=true` answers. */
export const SiteTransferDryRun = DryRunAnswer(
  {
    operation: Type.Literal('transfer_site', { description: 'The operation the transfer would start' }),
    site_id: Uuid(),
    origin_account_id: Uuid(),
    destination_account_id: Uuid(),
    status: Type.String({
      enum: ['pending', 'scheduled'],
      description: 'The status the transfer would have: pending runs now, scheduled at scheduled_time',
    }),
    scheduled_time: Nullable(DateTime()),
    maintenance_mode: Type.Boolean(),
    install_names: Type.Array(Type.String(), { description: 'The installs that would move with the site' }),
  },
  {
    description: 'what the transfer would do',
    example: {
      operation: 'transfer_site',
      site_id: '3c1d5e7f-9a0b-4c2d-8e4f-6a8b0c2d4e6f',
      origin_account_id: '7e9f1a3b-5c7d-4e9f-8a1b-3c5d7e9f1a3b',
      destination_account_id: '9b8a7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d',
      status: 'scheduled',
      scheduled_time: '2026-06-01T14:30:00.000Z',
      maintenance_mode: false,
      install_names: ['myinstall', 'myinstallstg'],
    },
  },
);
