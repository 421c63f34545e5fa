import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { INestApplication } from '@nestjs/common';
import { context, trace, type Attributes, type Tracer } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  AggregationTemporality,
  DataPointType,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type MetricData,
} from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';

/** A span as the tests compare it: name, attributes, and its events' names and attributes. */
export interface SpanRecord {
  name: string;
  attributes: Attributes;
  events: Array<{ name: string; attributes: Attributes }>;
}

/**
 * The real OpenTelemetry SDK wired to in-memory exporters: a `MeterProvider` whose reader exports on
 * demand, and a tracer provider whose finished spans are kept. One per test.
 */
export class TestTelemetry {
  readonly metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  // Exports only when asked (forceFlush): the interval is longer than any test.
  readonly reader = new PeriodicExportingMetricReader({ exporter: this.metricExporter, exportIntervalMillis: 3_600_000 });
  readonly meterProvider = new MeterProvider({ readers: [this.reader] });
  readonly spanExporter = new InMemorySpanExporter();
  readonly tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(this.spanExporter)] });
  readonly tracer: Tracer = this.tracerProvider.getTracer('test-http');

  /** Every metric of the last export, by name. */
  async metrics(): Promise<Map<string, MetricData>> {
    await this.reader.forceFlush();
    const exports = this.metricExporter.getMetrics();
    const last = exports[exports.length - 1];
    const found = new Map<string, MetricData>();
    for (const scope of last?.scopeMetrics ?? []) for (const metric of scope.metrics) found.set(metric.descriptor.name, metric);
    return found;
  }

  /**
   * Data points as `{ 'name{k=v,…}': value }` (attributes sorted), for the metrics whose name starts with
   * `prefix`: a counter's sum, a histogram's count.
   */
  async points(prefix: string): Promise<Record<string, number>> {
    const points: Record<string, number> = {};
    for (const [name, metric] of await this.metrics()) {
      if (!name.startsWith(prefix)) continue;
      for (const point of metric.dataPoints) {
        const labels = Object.entries(point.attributes)
          .sort(([a], [b]) => a.localeCompare(b))
          .map(([k, v]) => `${k}=${String(v)}`)
          .join(',');
        const value = metric.dataPointType === DataPointType.HISTOGRAM ? (point.value as { count: number }).count : (point.value as number);
        points[`${name}{${labels}}`] = value;
      }
    }
    return points;
  }

  /** The `count` spans finished so far (waits for the last ones: a span ends when its response has gone). */
  async spans(count: number): Promise<SpanRecord[]> {
    for (let waited = 0; this.spanExporter.getFinishedSpans().length < count && waited < 5_000; waited += 10) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const finished = this.spanExporter.getFinishedSpans();
    expect(finished).toHaveLength(count);
    return finished.map(toRecord);
  }

  async shutdown(): Promise<void> {
    await this.meterProvider.shutdown();
    await this.tracerProvider.shutdown();
  }
}

function toRecord(span: ReadableSpan): SpanRecord {
  return {
    name: span.name,
    attributes: { ...span.attributes },
    events: span.events.map((e) => ({ name: e.name, attributes: { ...e.attributes } })),
  };
}

/** Makes `context.active()` follow async work, as the Node SDK does; returns the function that undoes it. */
export function enableContext(): () => void {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  return () => context.disable();
}

/**
 * Runs every request of the app's HTTP server inside a span of its own, as an HTTP instrumentation does
 * (it wraps the server's `request` listeners): the rate limiter then finds that span active.
 */
export function traceRequests(app: INestApplication, tracer: Tracer): void {
  const server = app.getHttpServer() as Server;
  const listeners = server.listeners('request') as Array<(req: IncomingMessage, res: ServerResponse) => void>;
  server.removeAllListeners('request');
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const span = tracer.startSpan(`${req.method} ${req.url}`);
    res.once('close', () => span.end());
    context.with(trace.setSpan(context.active(), span), () => {
      for (const listener of listeners) listener.call(server, req, res);
    });
  });
}
