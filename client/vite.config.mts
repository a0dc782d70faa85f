// Builds the web page into client/dist; the backend serves index.html at / and dist/assets at /assets.
// Everything is bundled: no CDN, no web fonts, nothing fetched from another origin at run time.
import { defineConfig } from 'vite';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  root: here,
  base: '/',
  publicDir: false,
  logLevel: 'warn',
  build: {
    outDir: 'dist',
    assetsDir: 'assets',
    emptyOutDir: true,
    target: 'es2022',
    // One JS and one CSS file; only tiny assets are inlined as data: URLs.
    assetsInlineLimit: 2048,
    sourcemap: false,
  },
});
