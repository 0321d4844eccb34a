import { Type } from 'typebox';
import { callerOf } from '../../http/auth.js';
import { errorResponses, Nullable, Uuid } from '../../http/schemas.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';

export const CurrentUserSchema = Type.Object({
  id: Uuid(),
  first_name: Type.String(),
  last_name: Type.String(),
  email: Type.String(),
  phone_number: Nullable(Type.String()),
});

export function usersRoutes({ services }: RouteContext): RoutesPlugin {
  return async (app) => {
    app.get(
      '/user',
      {
        schema: {
          operationId: 'getCurrentUser',
          tags: ['User'],
          summary: 'The user behind the credential',
          response: { 200: CurrentUserSchema, ...errorResponses() },
        },
        config: { resource: 'user' },
      },
      async (request) => {
        const user = await services.users.current(callerOf(request));
        return {
          id: user.id,
          first_name: user.first_name,
          last_name: user.last_name,
          email: user.email,
          phone_number: user.phone,
        };
      },
    );
  };
}
