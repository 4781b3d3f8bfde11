// BENCH_SIGNIN_STEPS=<n>: where a browser sign-in's CPU goes, request by request. After the measured
// rounds, `n` sign-ins of each kind run one after the other (one browser, nothing else running), and each
// request is charged with the CPU that the server's main thread, the server's other threads (argon2id, the
// thread pool) and PostgreSQL's backends used while it was answered (Linux: /proc/<pid>/task/*/schedstat,
// nanoseconds). The load generator's own CPU is left out: it is not the server's.
import { readdirSync, readFileSync } from "node:fs";

interface Totals {
  count: number;
  main: number;
  threads: number;
  postgres: number;
}

/** Nanoseconds on a CPU of one task (thread or process), or 0 once it has ended. */
function onCpu(path: string): number {
  try {
    return Number(readFileSync(path, "utf8").split(" ")[0]);
  } catch {
    return 0;
  }
}

export class StepProbe {
  private readonly steps = new Map<string, Totals>();

  /**
   * `serverPid`: the server's process; `postgresPids`: the backends serving the bench's database, asked
   * before each request.
   */
  constructor(
    private readonly serverPid: number,
    private readonly postgresPids: () => number[],
  ) {}

  private snapshot(): { main: number; threads: number; postgres: Map<number, number> } {
    let threads = 0;
    const tasks = readdirSync(`/proc/${this.serverPid}/task`);
    for (const task of tasks) threads += onCpu(`/proc/${this.serverPid}/task/${task}/schedstat`);
    const main = onCpu(`/proc/${this.serverPid}/task/${this.serverPid}/schedstat`);
    const postgres = new Map<number, number>();
    for (const pid of this.postgresPids()) postgres.set(pid, onCpu(`/proc/${pid}/schedstat`));
    return { main, threads: threads - main, postgres };
  }

  /** Runs one request and charges its CPU to `label` (method and path). */
  async around<T>(label: string, request: () => Promise<T>): Promise<T> {
    const before = this.snapshot();
    const result = await request();
    // what the server finishes after its answer (the cache broadcast) is charged to the next request
    const after = this.snapshot();
    const totals = this.steps.get(label) ?? { count: 0, main: 0, threads: 0, postgres: 0 };
    totals.count++;
    totals.main += after.main - before.main;
    totals.threads += after.threads - before.threads;
    // backends that started or ended meanwhile (the pool's idle timeout) are left out
    for (const [pid, used] of after.postgres) {
      const earlier = before.postgres.get(pid);
      if (earlier && used) totals.postgres += used - earlier;
    }
    this.steps.set(label, totals);
    return result;
  }

  /** Prints µs per request for each step, and the sum per sign-in (`signIns` of them). */
  print(title: string, signIns: number): void {
    const us = (ns: number, count: number) => (ns / count / 1000).toFixed(0).padStart(7);
    console.log(`\n${title}: CPU µs per request (server main thread / server's other threads / PostgreSQL)`);
    const sum = { main: 0, threads: 0, postgres: 0 };
    for (const [label, t] of this.steps) {
      console.log(`  ${us(t.main, t.count)} ${us(t.threads, t.count)} ${us(t.postgres, t.count)}  ${label}`);
      sum.main += t.main;
      sum.threads += t.threads;
      sum.postgres += t.postgres;
    }
    console.log(
      `  ${us(sum.main, signIns)} ${us(sum.threads, signIns)} ${us(sum.postgres, signIns)}  per sign-in`,
    );
    this.steps.clear();
  }
}
