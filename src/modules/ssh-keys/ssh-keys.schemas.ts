import { Type } from 'typebox';
import { Paginated } from '../../http/pagination.js';
import { DateTime, Uuid } from '../../http/schemas.js';

/** K1: the SSH key record. */
export const SshKeySchema = Type.Object({
  comment: Type.String({ description: 'The comment of the key line ("" when it had none)' }),
  created_at: DateTime(),
  fingerprint: Type.String({ description: 'SHA256:<unpadded base64>, as ssh-keygen -l prints it' }),
  uuid: Uuid(),
});

export const SshKeyList = Paginated(SshKeySchema, 'A page of SSH keys');

export const CreateSshKeyBody = Type.Object({
  public_key: Type.String({
    minLength: 1,
    maxLength: 16384,
    description:
      'An OpenSSH public key line: ssh-ed25519, ecdsa-sha2-nistp256/384/521, or ssh-rsa of at least 2048 bits',
  }),
});

export const SshKeyParams = Type.Object({ ssh_key_id: Uuid() });
