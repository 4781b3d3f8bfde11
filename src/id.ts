import { randomInt } from "node:crypto";

/**
 * Snowflake-like IDs: milliseconds since 2024-01-01, a random 10-bit node number per process and a
 * 12-bit counter, as a decimal string. They sort by creation time and need no coordination between
 * processes sharing one database (a collision needs the same node number in the same millisecond).
 */
const EPOCH = 1_704_067_200_000n;
const node = BigInt(randomInt(1024));
let lastMs = 0n;
let counter = 0n;

export function newId(): string {
  let now = BigInt(Date.now());
  if (now < lastMs) now = lastMs; // clock went back: stay monotonic
  if (now === lastMs) {
    counter = (counter + 1n) & 0xfffn;
    if (counter === 0n) now = lastMs + 1n; // 4096 IDs in one millisecond: borrow the next one
  } else {
    counter = 0n;
  }
  lastMs = now;
  return (((now - EPOCH) << 22n) | (node << 12n) | counter).toString();
}
