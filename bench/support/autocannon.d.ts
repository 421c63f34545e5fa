/** The slice of autocannon's API the benches use (the package ships no types). */
declare module 'autocannon' {
  interface AutocannonOptions {
    url: string;
    connections?: number;
    duration?: number;
    /** Stop after this many requests instead of after `duration`. */
    amount?: number;
    /** Requests per second across all connections (each connection still waits for its response). */
    overallRate?: number;
    /** Seconds before a request counts as a timeout error. */
    timeout?: number;
  }
  interface Histogram {
    average: number;
    p50: number;
    p99: number;
    total: number;
  }
  interface AutocannonResult {
    requests: Histogram;
    latency: Histogram;
    non2xx: number;
    errors: number;
    timeouts: number;
    /** Seconds the run lasted. */
    duration: number;
  }
  /** A running load: a promise of its result that also reports every response. */
  interface AutocannonInstance extends PromiseLike<AutocannonResult> {
    /** `responseTime` in ms. */
    on(event: 'response', listener: (client: unknown, statusCode: number, resBytes: number, responseTime: number) => void): this;
  }
  function autocannon(options: AutocannonOptions): AutocannonInstance;
  export = autocannon;
}
