/**
 * A machine user's username is its OAuth client ID, and client IDs stand in token audiences beside project
 * IDs and apps' client IDs. Those are generated: a project ID is a decimal snowflake, an app's client ID is
 * `<snowflake>@<project slug>`. A username of either form could be mistaken for a project or an app in an
 * audience (a resource server or introspection would accept the machine user's tokens as meant for it), so
 * a machine user may not have one.
 */
const GENERATED_ID_FORM = /^[0-9]+(@|$)/;

/** Why this username cannot be a machine user's, or undefined when it can. */
export function machineUsernameProblem(username: string): string | undefined {
  return GENERATED_ID_FORM.test(username)
    ? `a machine user's username cannot be digits alone or begin with digits and "@" (the form of generated project IDs and client IDs, which it would stand for in token audiences): "${username.slice(0, 200)}"`
    : undefined;
}
