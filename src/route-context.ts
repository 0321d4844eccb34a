import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Config } from './config.js';
import type { Services } from './services.js';

/** What every module's routes plugin is built from. */
export interface RouteContext {
  config: Config;
  services: Services;
}

export type RoutesPlugin = FastifyPluginAsyncTypebox;
