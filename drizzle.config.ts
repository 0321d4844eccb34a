import { defineConfig } from 'drizzle-kit';

// Generates numbered SQL migrations from src/db/schema.ts: `npx drizzle-kit generate --name <what_changes>`.
export default defineConfig({
  dialect: 'postgresql',
  schema: './src/db/schema.ts',
  out: './drizzle',
});
