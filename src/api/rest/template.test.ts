import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parsePathTemplate, variableValue } from "./template.ts";

describe("parsePathTemplate", () => {
  test("literal paths and simple variables", () => {
    assert.deepEqual(parsePathTemplate("/settings/v3alpha/languages"), {
      path: "/settings/v3alpha/languages",
      variables: [],
    });
    const t = parsePathTemplate("/resources/v3alpha/targets/{id}");
    assert.equal(t.path, "/resources/v3alpha/targets/:p0");
    assert.deepEqual(t.variables, [{ fieldPath: ["id"], parts: [{ param: "p0" }] }]);
    assert.equal(parsePathTemplate("/a/{x.y_z=*}/b/{w}").path, "/a/:p0/b/:p1");
  });

  test("multi-segment variables, wildcards and verbs", () => {
    const t = parsePathTemplate("/v1/{name=projects/*/things/*}");
    assert.equal(t.path, "/v1/projects/:p0/things/:p1");
    assert.equal(variableValue(t.variables[0], { p0: "a", p1: "b/c" }), "projects/a/things/b/c");
    const w = parsePathTemplate("/v1/files/{path=**}");
    assert.equal(w.path, "/v1/files/*");
    assert.equal(variableValue(w.variables[0], { "*": "x/y" }), "x/y");
    assert.equal(parsePathTemplate("/v1/things:search").path, "/v1/things::search");
    assert.equal(parsePathTemplate("/v1/*/x").path, "/v1/:_a0/x");
  });

  test("invalid templates", () => {
    for (const bad of ["v1/x", "/v1/{id", "/v1/{id}:verb", "/v1/**/x", "/v1//x", "/v1/{a-b}"]) {
      assert.throws(() => parsePathTemplate(bad), Error, bad);
    }
  });
});
