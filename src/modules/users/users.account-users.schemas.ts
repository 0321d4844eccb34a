import { Type } from 'typebox';
import { ROLES } from '../../auth/access.js';
import { Paginated } from '../../http/pagination.js';
import { DryRunAnswer, Nullable, Uuid } from '../../http/schemas.js';

const Roles = Type.String({
  enum: [...ROLES],
  description: 'U2: owner, full, full,billing, partial, partial,billing',
});
const InstallIds = Type.Array(Uuid(), {
  maxItems: 1000,
  description: 'U3: for partial roles only, installs of the account',
});
const PersonName = Type.String({ minLength: 1, maxLength: 100, pattern: '\\S' });

/** The AccountUser record: `last_owner` only for owners, `installs` only for partial members. */
export const AccountUserSchema = Type.Object({
  user_id: Uuid(),
  account_id: Uuid(),
  first_name: Type.String(),
  last_name: Type.String(),
  email: Type.String(),
  phone: Nullable(Type.String()),
  invite_accepted: Type.Boolean(),
  mfa_enabled: Type.Boolean({ description: 'False unless an operator sets it (PATCH /admin/v1/users/{id})' }),
  roles: Type.String(),
  last_owner: Type.Optional(Type.Boolean({ description: 'Owners only: whether this is the only owner' })),
  installs: Type.Optional(
    Type.Array(Type.Object({ id: Uuid(), name: Type.String() }), {
      description: 'Partial members only: the installs they may see',
    }),
  ),
});

export const AccountUserList = Paginated(AccountUserSchema, 'A page of account users');

export const AccountUserParams = Type.Object({ account_id: Uuid(), user_id: Uuid() });

/** U1: createAccountUser. */
export const CreateAccountUserBody = Type.Object({
  user: Type.Object({
    account_id: Uuid(),
    first_name: PersonName,
    last_name: PersonName,
    email: Type.String({ format: 'email', maxLength: 254 }),
    roles: Roles,
    install_ids: Type.Optional(InstallIds),
  }),
});

export const UpdateAccountUserBody = Type.Object({
  roles: Roles,
  install_ids: Type.Optional(InstallIds),
});

/** U4: 201/200 with a message and the record. */
export const AccountUserChanged = Type.Object({ message: Type.String(), account_user: AccountUserSchema });

export const InvitationParams = Type.Object({
  token: Type.String({ minLength: 43, maxLength: 43, pattern: '^[A-Za-z0-9_-]+$' }),
});

export const InvitationAccepted = Type.Object({
  message: Type.String(),
  account_id: Uuid(),
  user_id: Uuid(),
  credential: Nullable(
    Type.Object(
      { username: Type.String(), password: Type.String() },
      { description: 'HTTP Basic credential, shown once; null when the user already had one' },
    ),
  ),
});

const EXAMPLE_ACCOUNT = '3c1d5e7f-9a0b-4c2d-8e4f-6a8b0c2d4e6f';
const EXAMPLE_USER = '7e9f1a3b-5c7d-4e9f-8a1b-3c5d7e9f1a3b';

/** Issue 22: what `POST /v1/accounts/{id}/account_users?dry_run=true` answers. */
export const CreateAccountUserDryRun = DryRunAnswer(
  {
    account_id: Uuid(),
    email: Type.String(),
    roles: Roles,
    install_ids: Type.Array(Uuid(), { description: 'The installs a partial member would see' }),
    new_user: Type.Boolean({ description: 'true: a user would be made; false: a known user would join' }),
    invitation_mailed_to: Type.String({ description: 'Who would be mailed the invitation' }),
  },
  {
    description: 'what adding the member would do',
    example: {
      account_id: EXAMPLE_ACCOUNT,
      email: 'ana@example.com',
      roles: 'partial',
      install_ids: ['9b8a7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d'],
      new_user: true,
      invitation_mailed_to: 'ana@example.com',
    },
  },
);

/** Issue 22: what `PATCH /v1/accounts/{id}/account_users/{id}?dry_run=true` answers. */
export const UpdateAccountUserDryRun = DryRunAnswer(
  {
    account_id: Uuid(),
    user_id: Uuid(),
    roles: Type.Object({ before: Roles, after: Roles }),
    install_ids: Type.Object({ before: Type.Array(Uuid()), after: Type.Array(Uuid()) }),
  },
  {
    description: 'what the role change would do',
    example: {
      account_id: EXAMPLE_ACCOUNT,
      user_id: EXAMPLE_USER,
      roles: { before: 'full', after: 'partial' },
      install_ids: { before: [], after: ['9b8a7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d'] },
    },
  },
);

/** Issue 22: what `DELETE /v1/accounts/{id}/account_users/{id}?dry_run=true` answers. */
export const DeleteAccountUserDryRun = DryRunAnswer(
  {
    account_id: Uuid(),
    user_id: Uuid(),
    roles: { ...Roles, description: 'The membership that would end' },
    install_ids: Type.Array(Uuid(), { description: 'The installs the member would no longer see' }),
  },
  {
    description: 'what removing the member would do',
    example: { account_id: EXAMPLE_ACCOUNT, user_id: EXAMPLE_USER, roles: 'full', install_ids: [] },
  },
);
