// Builds the web UI into internal/ui/dist (committed, embedded in the Go
// binary) and, with --tests, the unit tests into build-tests/.
//
//   node build.mjs                 build into ../internal/ui/dist
//   node build.mjs --out DIR       build into DIR (CI compares it with dist)
//   node build.mjs --tests         also bundle test/unit/*.test.ts for node --test
//
// The output is deterministic: the same source and esbuild version give
// the same bytes, and asset names carry a hash of their content.
import * as esbuild from 'esbuild';
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const outIdx = args.indexOf('--out');
const out = outIdx >= 0 ? args[outIdx + 1] : join(here, '..', 'internal', 'ui', 'dist');

// The budget for what the browser downloads (gzipped JS and CSS).
const BUDGET_GZ = 300 * 1024;

rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, 'assets'), { recursive: true });

const common = {
  absWorkingDir: here,
  bundle: true,
  minify: true,
  target: ['es2022', 'chrome110', 'firefox110', 'safari16'],
  outdir: join(out, 'assets'),
  entryNames: '[name]-[hash]',
  assetNames: '[name]-[hash]',
  legalComments: 'eof',
  charset: 'utf8',
  metafile: true,
  write: true,
  logLevel: 'warning',
};

// The chart data worker (src/worker.ts), a classic script; the app learns
// its hashed name through __WORKER_URL__.
const worker = await esbuild.build({ ...common, entryPoints: { worker: 'src/worker.ts' }, format: 'iife' });
const workerFile = Object.keys(worker.metafile.outputs).find((p) => p.endsWith('.js'));
const workerURL = '/assets/' + workerFile.slice(workerFile.lastIndexOf('/') + 1);

const result = await esbuild.build({
  ...common,
  define: { __WORKER_URL__: JSON.stringify(workerURL) },
  entryPoints: { app: 'src/main.ts' },
  format: 'esm',
});

const outputs = Object.keys(result.metafile.outputs).map((p) => relative(join(out), join(here, p)));
const js = outputs.find((p) => p.endsWith('.js'));
const css = outputs.find((p) => p.endsWith('.css'));
if (!js || !css) throw new Error('build produced no JS or CSS: ' + outputs.join(', '));

const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>Sextant</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/${css}">
<script type="module" src="/${js}"></script>
</head>
<body>
<div id="app"><div class="boot">Loading Sextant…</div></div>
</body>
</html>
`;
writeFileSync(join(out, 'index.html'), html);

// Report and enforce the size budget.
let total = 0;
const sizes = {};
for (const f of readdirSync(join(out, 'assets'))) {
  const body = readFileSync(join(out, 'assets', f));
  const gz = gzipSync(body, { level: 9 }).length;
  sizes[f] = { bytes: body.length, gzip: gz };
  if (f.endsWith('.js') || f.endsWith('.css')) total += gz;
}
const digest = createHash('sha256').update(JSON.stringify(sizes)).digest('hex').slice(0, 12);
if (!args.includes('--quiet')) {
  console.log(JSON.stringify({ out, assets: sizes, js_css_gzip_total: total, budget: BUDGET_GZ, digest }));
}
if (total > BUDGET_GZ) {
  console.error(`JS+CSS is ${total} bytes gzipped, over the ${BUDGET_GZ}-byte budget`);
  process.exit(1);
}

if (args.includes('--tests')) {
  const testDir = join(here, 'test', 'unit');
  const entries = readdirSync(testDir).filter((f) => f.endsWith('.test.ts')).map((f) => join(testDir, f));
  rmSync(join(here, 'build-tests'), { recursive: true, force: true });
  await esbuild.build({
    absWorkingDir: here,
    entryPoints: entries,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    outdir: join(here, 'build-tests'),
    outExtension: { '.js': '.mjs' },
    external: ['node:*'],
    define: { __WORKER_URL__: '""' },
    logLevel: 'warning',
  });
}
