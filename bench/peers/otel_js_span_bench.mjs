// bench/peers/otel_js_span_bench.mjs - the span_bench "attrs5" scenario in OpenTelemetry JS, for
// docs/PERFORMANCE.md: span start + 5 attributes (string, int, double, bool, string) + end,
// through a BatchSpanProcessor (queue 65536, batch 512, delay 10 ms) into an exporter that
// discards. Node runs JavaScript on one thread, so there is only the one-thread figure. The
// processor exports from the event loop, so the loop yields (setImmediate) every 512 spans;
// the yields are inside the timed part, as the export thread's work is in weft's wall time.
//
// `make bench-peers` (scripts/bench-peers.sh) runs it beside weft and Go: it installs the SDK
// pinned by bench/peers/package.json and package-lock.json with `npm ci` into build/peers/js
// (never into the tree) and runs it from there, as by hand:
//   cd build/peers/js && node ../../../bench/peers/otel_js_span_bench.mjs [spans_per_run] [runs]
// The packages are found from the current directory's node_modules. Prints one JSON object per
// line, like bench/span_bench.c.
import { createRequire } from 'node:module';
import { join } from 'node:path';

const require = createRequire(join(process.cwd(), 'package.json'));
const { BasicTracerProvider, BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const sdkVersion = require('@opentelemetry/sdk-trace-base/package.json').version;

const spans = Number(process.argv[2] ?? 1000000);
const runs = Number(process.argv[3] ?? 5);

class DiscardExporter {
  constructor() { this.count = 0; }
  export(batch, done) { this.count += batch.length; done({ code: 0 }); }
  shutdown() { return Promise.resolve(); }
  forceFlush() { return Promise.resolve(); }
}

const yieldLoop = () => new Promise((resolve) => setImmediate(resolve));

async function timedRun() {
  const exporter = new DiscardExporter();
  const provider = new BasicTracerProvider({
    spanProcessors: [new BatchSpanProcessor(exporter, {
      maxQueueSize: 65536, maxExportBatchSize: 512, scheduledDelayMillis: 10,
      exportTimeoutMillis: 30000,
    })],
  });
  const tracer = provider.getTracer('span_bench', '1');
  const record = (i) => {
    const s = tracer.startSpan('invoke_agent planner');
    s.setAttribute('gen_ai.operation.name', 'invoke_agent');
    s.setAttribute('weft.step.id', i);
    s.setAttribute('weft.step.score', 0.75);
    s.setAttribute('weft.step.final', true);
    s.setAttribute('weft.step.status', 'completed');
    s.end();
  };
  for (let i = 0; i < 20000; i++) { // warm-up (JIT)
    record(i);
    if ((i & 511) === 511) await yieldLoop();
  }
  await provider.forceFlush();
  const before = exporter.count;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < spans; i++) {
    record(i);
    if ((i & 511) === 511) await yieldLoop();
  }
  await provider.forceFlush();
  const ns = Number(process.hrtime.bigint() - t0);
  const exported = exporter.count - before;
  await provider.shutdown();
  return { ns, exported };
}

const results = [];
for (let r = 0; r < runs; r++) results.push(await timedRun());
results.sort((a, b) => a.ns - b.ns);
const median = results[Math.floor(runs / 2)];
console.log(JSON.stringify({
  bench: 'otel_js_span_bench', case: 'attrs5', threads: 1, sdk: `sdk-trace-base ${sdkVersion}`,
  sdk_version: sdkVersion, node: process.version, ns_per_span: +(median.ns / spans).toFixed(1),
  ns_per_span_min: +(results[0].ns / spans).toFixed(1),
  ns_per_span_max: +(results[runs - 1].ns / spans).toFixed(1),
  spans_per_sec: Math.round(spans / (median.ns / 1e9)), dropped: spans - median.exported, runs,
  spans_per_run: spans,
}));
