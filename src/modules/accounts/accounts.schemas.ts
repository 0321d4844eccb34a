import { Type } from 'typebox';
import { Paginated } from '../../http/pagination.js';
import { Uuid } from '../../http/schemas.js';

export const AccountSchema = Type.Object({ id: Uuid(), name: Type.String() });
export const AccountList = Paginated(AccountSchema, 'A page of accounts');
export const AccountParams = Type.Object({ account_id: Uuid() });
