// tests/ingest/send.js - the OpenTelemetry JS SDK as a client of `weft serve`'s OTLP ingest
// (tests/ingest/test_otel_sdk.c runs it). Records a small trace with the SDK (a SERVER root, a
// CLIENT child with attributes of several types, an event, a link, ERROR status, and a
// grandchild), then sends it with the SDK's own OTLP/HTTP exporter.
//
// usage: node send.js URL proto|json gzip|none SERVICE
// Prints {"traceId": "...", "rootSpanId": "...", "childSpanId": "..."} on success; exits 1
// with the exporter's error otherwise.
'use strict';

const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } =
    require('@opentelemetry/sdk-trace-base');
const { resourceFromAttributes } = require('@opentelemetry/resources');
const api = require('@opentelemetry/api');

const [url, protocol, compression, service] = process.argv.slice(2);
if (!url || !['proto', 'json'].includes(protocol) || !service) {
    console.error('usage: node send.js URL proto|json gzip|none SERVICE');
    process.exit(2);
}
const { OTLPTraceExporter } = protocol === 'proto'
    ? require('@opentelemetry/exporter-trace-otlp-proto')
    : require('@opentelemetry/exporter-trace-otlp-http');

const memory = new InMemorySpanExporter();
const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': service, 'deployment.environment': 'test' }),
    spanProcessors: [new SimpleSpanProcessor(memory)],
});
const tracer = provider.getTracer('weft-ingest-test', '1.2.3');

const root = tracer.startSpan('GET /orders', { kind: api.SpanKind.SERVER });
const rootCtx = api.trace.setSpan(api.context.active(), root);
const linked = { traceId: 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', spanId: 'bbbbbbbbbbbbbbbb', traceFlags: 1 };
const child = tracer.startSpan('chat gpt-4o', {
    kind: api.SpanKind.CLIENT,
    attributes: {
        'gen_ai.operation.name': 'chat',
        'gen_ai.usage.input_tokens': 321,
        'weft.cost.usd': 0.5,
        'weft.cache.hit': false,
        'tags': ['x', 'y'],
    },
    links: [{ context: linked, attributes: { 'link.reason': 'retry' } }],
}, rootCtx);
child.addEvent('exception', { 'exception.type': 'RateLimited' });
child.setStatus({ code: api.SpanStatusCode.ERROR, message: 'rate limited' });
const grandchild = tracer.startSpan('execute_tool search', {}, api.trace.setSpan(rootCtx, child));
grandchild.end();
child.end();
root.end();

const exporter = new OTLPTraceExporter({ url, compression: compression === 'gzip' ? 'gzip' : 'none' });
exporter.export(memory.getFinishedSpans(), (result) => {
    if (result.code !== 0) {
        console.error('export failed:', result.error && result.error.message);
        process.exit(1);
    }
    console.log(JSON.stringify({
        traceId: root.spanContext().traceId,
        rootSpanId: root.spanContext().spanId,
        childSpanId: child.spanContext().spanId,
    }));
    exporter.shutdown().then(() => provider.shutdown());
});
