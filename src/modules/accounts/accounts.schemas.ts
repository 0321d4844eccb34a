import { Type } from 'typebox';
import { Paginated } from '../../http/pagination.js';
import { Uuid } from '../../http/schemas.js';

export const AccountSchema = Type.Object({
  id: Uuid(),
  name: Type.String(),
  nickname: Type.String({ description: 'The account nickname: the same as name (Hostplane keeps one name)' }),
});
export const AccountList = Paginated(AccountSchema, 'A page of accounts');
export const AccountParams = Type.Object({ account_id: Uuid() });
