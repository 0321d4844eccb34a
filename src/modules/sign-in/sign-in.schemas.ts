import { Type } from 'typebox';
import { Uuid } from '../../http/schemas.js';

export const SignInParams = Type.Object({ install_id: Uuid() });

/** Issue 29: a single-use link into the install's wp-admin (its secret is the link itself). */
export const WordPressSignInSchema = Type.Object(
  {
    url: Type.String({
      format: 'uri',
      maxLength: 2048,
      description:
        "Opens the install's wp-admin signed in as its WordPress administrator: once, before `expires_at`. Shown in this answer only; a used or expired link answers 403",
    }),
    expires_at: Type.String({ format: 'date-time', description: 'The link is refused after this instant' }),
    simulated: Type.Boolean({
      description: 'True on a simulated host (HOSTING_DRIVER=simulated): the link leads to no real site',
    }),
  },
  { description: 'A WordPress sign-in link' },
);
