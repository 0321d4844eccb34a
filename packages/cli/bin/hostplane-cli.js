#!/usr/bin/env node
// hostplane-cli: the customer command line (packages/cli). Built by `npm ci` (the root's prepare) or
// `npm run build:packages`.
import { main } from '../dist/main.js';

await main();
