import { Type } from 'typebox';
import { ROLES } from '../../auth/access.js';
import { Paginated } from '../../http/pagination.js';
import { Nullable, Uuid } from '../../http/schemas.js';

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
