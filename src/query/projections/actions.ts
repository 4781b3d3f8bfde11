import {
  callBehaviour,
  EXECUTION,
  ExecutionEvent,
  type ExecutionFields,
  TARGET,
  TargetEvent,
  type TargetFields,
} from "../../domain/action/events.ts";
import type { Projection } from "../../eventstore/types.ts";

/** Targets and executions of every instance (tables of migration 0004_actions.sql). */
export const actionsProjection: Projection = {
  name: "actions",
  tables: ["action_targets", "action_executions"],
  aggregateTypes: [TARGET, EXECUTION],
  handlers: {
    [TargetEvent.added]: async (tx, e) => {
      const p = e.payload as unknown as TargetFields;
      const { isAsync, interruptOnError } = callBehaviour(p);
      await tx.query(
        `INSERT INTO action_targets (instance_id, id, name, target_type, url, timeout_ns, execution_choice, is_async,
           interrupt_on_error, created_at, changed_at, sequence)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11)`,
        [
          e.instanceId,
          e.aggregateId,
          p.name,
          p.target_type,
          p.url,
          p.timeout_ns,
          p.execution_choice,
          isAsync,
          interruptOnError,
          e.createdAt,
          e.sequence,
        ],
      );
    },
    [TargetEvent.changed]: async (tx, e) => {
      const p = e.payload as Partial<TargetFields>;
      const behaviour =
        p.execution_choice !== undefined && p.execution_value !== undefined
          ? callBehaviour({ execution_choice: p.execution_choice, execution_value: p.execution_value })
          : undefined;
      await tx.query(
        `UPDATE action_targets SET name = coalesce($3, name), target_type = coalesce($4, target_type),
           url = coalesce($5, url), timeout_ns = coalesce($6, timeout_ns),
           execution_choice = coalesce($7, execution_choice), is_async = coalesce($8, is_async),
           interrupt_on_error = coalesce($9, interrupt_on_error), changed_at = $10, sequence = $11
         WHERE instance_id = $1 AND id = $2`,
        [
          e.instanceId,
          e.aggregateId,
          p.name ?? null,
          p.target_type ?? null,
          p.url ?? null,
          p.timeout_ns ?? null,
          p.execution_choice ?? null,
          behaviour?.isAsync ?? null,
          behaviour?.interruptOnError ?? null,
          e.createdAt,
          e.sequence,
        ],
      );
    },
    [TargetEvent.signingKeyRotated]: async (tx, e) => {
      await tx.query(
        "UPDATE action_targets SET changed_at = $3, sequence = $4 WHERE instance_id = $1 AND id = $2",
        [e.instanceId, e.aggregateId, e.createdAt, e.sequence],
      );
    },
    [TargetEvent.removed]: async (tx, e) => {
      await tx.query("DELETE FROM action_targets WHERE instance_id = $1 AND id = $2", [
        e.instanceId,
        e.aggregateId,
      ]);
    },
    [ExecutionEvent.set]: async (tx, e) => {
      const p = e.payload as unknown as ExecutionFields;
      await tx.query(
        `INSERT INTO action_executions (instance_id, id, execution_type, condition_kind, condition_value, targets,
           includes, created_at, changed_at, sequence)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9)
         ON CONFLICT (instance_id, id) DO UPDATE SET targets = EXCLUDED.targets, includes = EXCLUDED.includes,
           changed_at = EXCLUDED.changed_at, sequence = EXCLUDED.sequence`,
        [
          e.instanceId,
          e.aggregateId,
          p.execution_type,
          p.condition_kind,
          p.condition_value,
          p.targets,
          p.includes,
          e.createdAt,
          e.sequence,
        ],
      );
    },
    [ExecutionEvent.removed]: async (tx, e) => {
      await tx.query("DELETE FROM action_executions WHERE instance_id = $1 AND id = $2", [
        e.instanceId,
        e.aggregateId,
      ]);
    },
  },
};
