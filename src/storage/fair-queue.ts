/**
 * The order in which work waits for the embedded database's one connection (pglite.ts).
 *
 * A request does several units of work on the database (single statements and transactions), and between
 * them other things (a password hash on the thread pool, a call to another server). Served one unit at a
 * time in the order the units arrive, a request goes to the back of the line for each of its units, behind
 * every unit of every request that arrived after it: under a burst the first requests waited for seconds
 * while hundreds of later ones were answered, and a request of many units (a sign-in) waited its number of
 * units times the length of the line. So the units wait in the order of the requests they belong to:
 *
 * - Every HTTP request draws an arrival ticket (`inArrivalOrder`, around the listener's request handler);
 *   the units of work done for it carry its ticket (AsyncLocalStorage), also after its body has been read
 *   (its listeners are bound to it). Work of no request (outbox workers, statistics) draws a ticket when it
 *   asks for the connection.
 * - The connection serves the waiting unit with the oldest ticket (of two units of one request, the one that
 *   asked first): first come, first served by request. A request that has started is finished before later
 *   ones, a transaction retried after a conflict keeps its place.
 * - At most `limit` units wait. One more, and the unit with the youngest ticket (the newcomer, or a unit of
 *   a request that came later than the newcomer's) is refused at once with `DatabaseUnavailableError`: 503
 *   with Retry-After to API clients, `temporarily_unavailable` at the OIDC endpoints. A request refused so
 *   has changed nothing, unless an earlier unit of it committed (each unit commits on its own).
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { EventEmitter } from "node:events";
import { DatabaseUnavailableError } from "./availability.ts";

const arrivals = new AsyncLocalStorage<number>();
let lastTicket = 0;

/** The ticket of the request this code runs for, or a new one for work of no request. */
function currentTicket(): number {
  return arrivals.getStore() ?? ++lastTicket;
}

/**
 * A request handler whose requests each draw an arrival ticket: everything the handler does for a request,
 * also in the request's event listeners (its body arriving), carries it.
 */
export function inArrivalOrder<Req extends EventEmitter, Res>(
  handler: (req: Req, res: Res) => void,
): (req: Req, res: Res) => void {
  return (req, res) => {
    const ticket = ++lastTicket;
    // The body's events come from the socket, outside the handler's context: every event of the request
    // is emitted in it.
    const emit = req.emit;
    req.emit = ((...args: Parameters<typeof emit>) =>
      arrivals.run(ticket, () => emit.apply(req, args))) as typeof emit;
    arrivals.run(ticket, () => handler(req, res));
  };
}

/** The queue is full and this unit was the one of the latest request. */
export class QueueFullError extends Error {
  constructor(limit: number) {
    super(
      `the embedded database's queue is full: ${limit} queries and transactions wait (PLATFORM_EMBEDDED_QUEUE_LIMIT)`,
    );
    this.name = "QueueFullError";
  }
}

interface Waiter {
  ticket: number;
  /** Order of asking, among the units of one ticket. */
  seq: number;
  start(): void;
  refuse(error: Error): void;
}

/** One connection served to units of work by arrival ticket, at most `limit` waiting (see above). */
export class FairQueue {
  /** Waiting units, oldest ticket first. */
  private readonly waiting: Waiter[] = [];
  private busy = false;
  private seq = 0;
  /** Units refused because the queue was full, since start. */
  refused = 0;

  constructor(private readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new Error(`queue limit ${limit}: a positive integer`);
  }

  /** Units waiting for the connection. */
  get length(): number {
    return this.waiting.length;
  }

  /** Whether a unit holds the connection. */
  get inUse(): boolean {
    return this.busy;
  }

  /** Runs `work` when the connection is this unit's; it holds it until `work` settles. */
  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.busy) await this.wait();
    else this.busy = true;
    try {
      return await work();
    } finally {
      const next = this.waiting.shift();
      if (next) next.start();
      else this.busy = false;
    }
  }

  /** Resolves once the connection is handed to this unit (still marked busy: no one cuts in). */
  private wait(): Promise<void> {
    return new Promise<void>((start, refuse) => {
      const waiter: Waiter = { ticket: currentTicket(), seq: ++this.seq, start, refuse };
      // after every waiter with an older ticket, or of the same ticket (it asked earlier)
      let lo = 0;
      let hi = this.waiting.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (this.waiting[mid].ticket <= waiter.ticket) lo = mid + 1;
        else hi = mid;
      }
      this.waiting.splice(lo, 0, waiter);
      if (this.waiting.length > this.limit) {
        const youngest = this.waiting.pop() as Waiter;
        this.refused++;
        youngest.refuse(new DatabaseUnavailableError(new QueueFullError(this.limit)));
      }
    });
  }
}
