import { Type } from 'typebox';
import { Uuid } from '../../http/schemas.js';

export const CACHE_TYPES = ['object', 'page', 'cdn'] as const;

export const PurgeCacheBody = Type.Object({
  type: Type.String({ enum: [...CACHE_TYPES], description: 'Which cache to purge' }),
});
export const PurgeCacheParams = Type.Object({ install_id: Uuid() });
