/**
 * Collects the calls made while the event loop handles one round of I/O and runs them as one batch (one
 * SQL statement instead of one per request) once that round is over (`setImmediate`), or earlier when
 * `maxSize` calls are waiting. Under load many requests share a round trip; a lone request waits for
 * nothing but the end of its own I/O round. A batch starts only after its callers arrived, so it never
 * answers with data older than the call (unlike a cache).
 */
export class Batcher<In, Out> {
  private pending: Array<{ input: In; resolve: (out: Out) => void; reject: (error: unknown) => void }> = [];
  private scheduled = false;

  constructor(
    /** Runs one batch; returns one result per input, in order. */
    private readonly run: (inputs: In[]) => Promise<Out[]>,
    private readonly maxSize = 200,
  ) {}

  call(input: In): Promise<Out> {
    return new Promise<Out>((resolve, reject) => {
      this.pending.push({ input, resolve, reject });
      if (this.pending.length >= this.maxSize) this.flush();
      else if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    const batch = this.pending;
    if (batch.length === 0) return;
    this.pending = [];
    this.run(batch.map((b) => b.input)).then(
      (outputs) => {
        for (let i = 0; i < batch.length; i++) batch[i].resolve(outputs[i]);
      },
      (error) => {
        for (const b of batch) b.reject(error);
      },
    );
  }
}
