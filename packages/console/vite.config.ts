import { defineConfig } from 'vite';

// Served by Hostplane at /console/ (src/modules/console/console.routes.ts). Preact's JSX through
// esbuild: no plugin. One stylesheet and one script, nothing inline (the route's CSP forbids it).
export default defineConfig({
  base: '/console/',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    modulePreload: { polyfill: false },
    reportCompressedSize: true,
  },
});
