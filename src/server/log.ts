import type { DestinationStream } from "pino";
import pretty from "pino-pretty";
import type { LogFormat } from "../config.ts";

/**
 * The format log lines are written in: `auto` is human-readable when stdout is a terminal (a person
 * watching `platform start`) and JSON lines otherwise (a log collector, a pipe, a file, the test runner).
 */
export function resolveLogFormat(
  format: LogFormat,
  stdout: { isTTY?: boolean } = process.stdout,
  env: NodeJS.ProcessEnv = process.env,
): "json" | "pretty" {
  if (format !== "auto") return format;
  return stdout.isTTY === true && env.NODE_TEST_CONTEXT === undefined ? "pretty" : "json";
}

/**
 * The stream pino writes to: undefined for JSON lines on stdout (pino's default), a synchronous pino-pretty
 * stream on stdout for human-readable lines. Synchronous, in this thread (no worker transport), so a line is
 * out before the process exits and start-up stays simple. Redaction and serializers run in pino before
 * either, so both formats hide the same secrets.
 */
export function logStream(format: LogFormat): DestinationStream | undefined {
  if (resolveLogFormat(format) === "json") return undefined;
  return pretty({
    sync: true,
    destination: 1,
    singleLine: true,
    translateTime: "SYS:HH:MM:ss.l",
    ignore: "pid,hostname",
  });
}
