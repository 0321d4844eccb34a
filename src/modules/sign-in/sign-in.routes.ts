import { callerOf } from '../../http/auth.js';
import { errorResponses } from '../../http/schemas.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';
import { SignInParams, WordPressSignInSchema } from './sign-in.schemas.js';

export function signInRoutes({ services }: RouteContext): RoutesPlugin {
  return async (app) => {
    app.post(
      '/installs/:install_id/wordpress_sign_in',
      {
        schema: {
          operationId: 'createWordPressSignIn',
          tags: ['Installs'],
          summary: "A single-use sign-in link to the install's wp-admin (Hostplane extension)",
          description:
            'For every member who sees the install (owners, full users, partial users with the install); never through a scoped credential (403). The link signs in as the WordPress administrator provisioning made, once, within 120 seconds; it is shown in this answer only and recorded nowhere (the audit log keeps the call, not the link). 409 when the host offers no sign-in link; 400 while the install is provisioning.',
          params: SignInParams,
          response: {
            201: WordPressSignInSchema,
            ...errorResponses(400, 403, 404, 409, 502, 503),
          },
        },
        // The answer is a secret: the audit log records the call without it.
        config: { resource: 'install', auditResponse: false },
      },
      async (request, reply) => {
        const link = await services.signIn.create(callerOf(request), request.params.install_id);
        return reply.status(201).header('cache-control', 'private, no-store').send(link);
      },
    );
  };
}
