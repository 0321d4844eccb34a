#!/usr/bin/env node
// Runs the compiled CLI (npm run build); `npm start` builds first.
await import('../dist/cli.js');
