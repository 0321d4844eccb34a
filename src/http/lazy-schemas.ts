import { AjvCompiler } from '@fastify/ajv-compiler';
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import type { FastifyServerOptions } from 'fastify';

type ValidatorFactory = ReturnType<typeof AjvCompiler>;
type SerializerFactory = ReturnType<typeof SerializerSelector>;
type Validate = ((data: unknown, context?: unknown) => unknown) & { errors?: unknown; schemaEnv?: unknown };

/**
 * Issue 14: Fastify compiles every route's validators (Ajv) and response serializers
 * (fast-json-stringify) while the server gets ready: with ~90 routes and a serializer per status, a
 * third of a start's CPU, for routes a process may never serve. These factories are Fastify's own
 * (same Ajv options, same serializer), each compiling a schema on its first use instead: the first
 * request of a route pays a few milliseconds once. A schema that does not compile fails that request
 * (500) instead of the start; every route is exercised by the API tests.
 */
export function lazySchemaCompilers(): NonNullable<FastifyServerOptions['schemaController']> {
  const buildValidator = AjvCompiler();
  const buildSerializer = SerializerSelector();
  const lazyValidators: ValidatorFactory = (externalSchemas, options) => {
    const compile = buildValidator(externalSchemas, options);
    return (route) => {
      let compiled: Validate | undefined;
      const validate: Validate = (data, context) => {
        compiled ??= compile(route) as unknown as Validate;
        const valid = compiled(data, context);
        validate.errors = compiled.errors;
        return valid;
      };
      // Fastify passes the parent object (so Ajv may coerce or default a whole query or body) only to
      // a validator that carries Ajv's schemaEnv; every one compiled here is an Ajv validator.
      validate.schemaEnv = true;
      return validate as unknown as ReturnType<ReturnType<ValidatorFactory>>;
    };
  };
  const lazySerializers: SerializerFactory = (externalSchemas, options) => {
    const compile = buildSerializer(externalSchemas, options);
    return (route) => {
      let serialize: ((doc: unknown) => string) | undefined;
      return (doc) => {
        serialize ??= compile(route);
        return serialize(doc);
      };
    };
  };
  return { compilersFactory: { buildValidator: lazyValidators, buildSerializer: lazySerializers } };
}
