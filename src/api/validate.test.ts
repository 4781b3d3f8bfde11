import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { create, type DescMessage, type MessageInitShape } from "@bufbuild/protobuf";
import { StructSchema } from "@bufbuild/protobuf/wkt";
import { InvalidArgumentError } from "../errors.ts";
import {
  RequestContextSchema,
  type State,
  StateFilterSchema,
} from "../gen/platform/object/v3alpha/object_pb.ts";
import { SetFeaturesRequestSchema } from "../gen/platform/settings/feature/v3alpha/feature_service_pb.ts";
import { SetLanguagesRequestSchema } from "../gen/platform/settings/language/v3alpha/language_service_pb.ts";
import {
  SetStringLongSchema,
  SetStringShortSchema,
  SetStringsSchema,
} from "../gen/platform/settings/object/v3alpha/object_pb.ts";
import {
  CreateThingRequestSchema,
  EchoRequestSchema,
  SearchThingsRequestSchema,
  type ThingKind,
} from "../gen/platform/testing/v1/testing_pb.ts";
import { isUri, rejectNul, validate } from "./validate.ts";

function errorOf<D extends DescMessage>(schema: D, init: MessageInitShape<D>): string | undefined {
  try {
    validate(schema, create(schema, init));
    return undefined;
  } catch (e) {
    assert.ok(e instanceof InvalidArgumentError);
    assert.equal(e.code, 3);
    return e.message;
  }
}

const webhook = { case: "restWebhook" as const, value: { url: "https://example.com/hook" } };

describe("validate", () => {
  test("language keys", () => {
    assert.equal(
      errorOf(SetLanguagesRequestSchema, { settings: { defaultLanguage: { key: "en" } } }),
      undefined,
    );
    for (const key of ["EN", "eng", "e1"]) {
      assert.equal(
        errorOf(SetLanguagesRequestSchema, { settings: { defaultLanguage: { key } } }),
        "settings.default_language.key: must match ^[a-z]{2}$",
      );
    }
    // An empty default language is a reset to the inherited value, not a pattern violation.
    assert.equal(
      errorOf(SetLanguagesRequestSchema, { settings: { defaultLanguage: { key: "" } } }),
      undefined,
    );
    assert.equal(
      errorOf(SetLanguagesRequestSchema, {
        settings: { restrictedLanguages: { languages: [{ key: "de" }, { key: "de" }] } },
      }),
      "settings.restricted_languages.languages[1]: must be unique",
    );
  });

  test("RequestContext: exactly one member, system must be true, IDs 1..200", () => {
    assert.equal(errorOf(RequestContextSchema, { context: { case: "orgId", value: "1" } }), undefined);
    assert.equal(errorOf(RequestContextSchema, { context: { case: "system", value: true } }), undefined);
    assert.equal(
      errorOf(RequestContextSchema, {}),
      "context: one of system, instance_id, instance_domain, org_id, org_domain must be set",
    );
    assert.equal(
      errorOf(RequestContextSchema, { context: { case: "system", value: false } }),
      "system: must be true",
    );
    assert.equal(
      errorOf(RequestContextSchema, { context: { case: "orgId", value: "" } }),
      "org_id: must not be empty",
    );
    assert.equal(
      errorOf(RequestContextSchema, { context: { case: "instanceId", value: "x".repeat(201) } }),
      "instance_id: must be at most 200 characters",
    );
    // a missing ctx is fine (default context)
    assert.equal(errorOf(SetLanguagesRequestSchema, {}), undefined);
  });

  test("settings value types", () => {
    assert.equal(errorOf(SetStringShortSchema, { value: { case: "set", value: "x".repeat(64) } }), undefined);
    assert.equal(
      errorOf(SetStringShortSchema, { value: { case: "set", value: "x".repeat(65) } }),
      "set: must be at most 64 characters",
    );
    assert.equal(
      errorOf(SetStringLongSchema, { value: { case: "set", value: "é".repeat(2049) } }),
      "set: must be at most 2048 characters",
    );
    assert.equal(
      errorOf(SetStringsSchema, { value: { case: "reset", value: false } }),
      "reset: must be true",
    );
    assert.equal(errorOf(SetStringsSchema, {}), "value: one of set, reset must be set");
    assert.equal(
      errorOf(SetFeaturesRequestSchema, {
        settings: { actions: { value: { case: "reset", value: false } } },
      }),
      "settings.actions.reset: must be true",
    );
    assert.equal(
      errorOf(SetFeaturesRequestSchema, { settings: { actions: { value: { case: "set", value: false } } } }),
      undefined,
    );
  });

  test("required, oneof_required, uri, defined_only, items", () => {
    assert.equal(errorOf(CreateThingRequestSchema, {}), "thing: is required");
    assert.equal(
      errorOf(CreateThingRequestSchema, { thing: { targetType: webhook } }),
      "thing.name: is required",
    );
    assert.equal(
      errorOf(CreateThingRequestSchema, { thing: { name: "n" } }),
      "thing.target_type: one of rest_webhook, rest_call must be set",
    );
    assert.equal(
      errorOf(CreateThingRequestSchema, {
        thing: { name: "n", targetType: { case: "restWebhook", value: { url: "example.com/x" } } },
      }),
      "thing.rest_webhook.url: must be a URI",
    );
    assert.equal(
      errorOf(CreateThingRequestSchema, { thing: { name: "n", targetType: webhook, kind: 5 as ThingKind } }),
      "thing.kind: must be a defined value",
    );
    assert.equal(
      errorOf(CreateThingRequestSchema, {
        thing: { name: "n", targetType: webhook, tags: ["a", "b", "c", "d"] },
      }),
      "thing.tags: must have at most 3 items",
    );
    assert.equal(
      errorOf(CreateThingRequestSchema, {
        thing: { name: "n", targetType: webhook, tags: ["ok", "x".repeat(11)] },
      }),
      "thing.tags[1]: must be at most 10 characters",
    );
    assert.equal(errorOf(StateFilterSchema, { state: 0 }), "state: is required");
    assert.equal(errorOf(StateFilterSchema, { state: 3 as State }), "state: must be a defined value");
    assert.equal(
      errorOf(SearchThingsRequestSchema, {
        filters: [{ filter: { case: "state", value: { state: 1 } } }, {}],
      }),
      "filters[1].filter: one of name, state must be set",
    );
  });

  test("rejectNul: any string at any depth, list elements, map keys and values, oneof members", () => {
    const nulError = <D extends DescMessage>(schema: D, init: MessageInitShape<D>) => {
      try {
        rejectNul(schema, create(schema, init));
        return undefined;
      } catch (e) {
        assert.ok(e instanceof InvalidArgumentError);
        return e.message;
      }
    };
    const nul = "must not contain NUL (U+0000)";
    assert.equal(nulError(EchoRequestSchema, { text: "a", names: ["b"], labels: { c: "d" } }), undefined);
    assert.equal(nulError(EchoRequestSchema, { data: new Uint8Array([0]) }), undefined); // bytes are not text
    assert.equal(nulError(EchoRequestSchema, { text: "\u0000" }), `text: ${nul}`);
    assert.equal(nulError(EchoRequestSchema, { nested: { id: "x\u0000" } }), `nested.id: ${nul}`);
    assert.equal(nulError(EchoRequestSchema, { maybe: "\u0000" }), `maybe: ${nul}`);
    assert.equal(nulError(EchoRequestSchema, { names: ["ok", "n\u0000"] }), `names[1]: ${nul}`);
    assert.equal(nulError(EchoRequestSchema, { labels: { k: "v\u0000" } }), `labels["k"]: ${nul}`);
    assert.equal(nulError(EchoRequestSchema, { labels: { "k\u0000": "v" } }), `labels: ${nul}`);
    assert.equal(
      nulError(SearchThingsRequestSchema, {
        filters: [
          { filter: { case: "name", value: { name: "ok" } } },
          { filter: { case: "name", value: { name: "\u0000" } } },
        ],
      }),
      `filters[1].name.name: ${nul}`,
    );
    assert.equal(
      nulError(CreateThingRequestSchema, {
        ctx: { context: { case: "orgDomain", value: "a\u0000.example" } },
      }),
      `ctx.org_domain: ${nul}`,
    );
    // google.protobuf.Struct / Value: strings inside JSON values too
    assert.equal(
      nulError(StructSchema, { fields: { a: { kind: { case: "stringValue", value: "\u0000" } } } }),
      `fields["a"].string_value: ${nul}`,
    );
  });

  test("isUri", () => {
    for (const ok of [
      "https://example.com",
      "http://localhost:8080/a?b=c",
      "urn:platform:x",
      "mailto:a@b.c",
    ]) {
      assert.ok(isUri(ok), ok);
    }
    for (const bad of [
      "",
      "example.com",
      "/relative",
      "http://",
      "https:// x",
      " https://a.b",
      "ht tp://a",
    ]) {
      assert.ok(!isUri(bad), bad);
    }
  });
});
