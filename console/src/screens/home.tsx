import { useEffect, useState } from "preact/hooks";
import { PlatformOrganizations } from "../../../src/gen/platform/resources/organization/v3alpha/organization_service_pb.ts";
import { PlatformProjects } from "../../../src/gen/platform/resources/project/v3alpha/project_service_pb.ts";
import { PlatformUsers } from "../../../src/gen/platform/resources/user/v3alpha/user_service_pb.ts";
import type { ScreenProps } from "../router.ts";

interface Counts {
  organizations: bigint;
  users: bigint;
  projects: bigint;
}

/** Home: what the instance holds, from the public search RPCs' total_result (one row asked of each). */
export default function Home({ api }: ScreenProps) {
  const [counts, setCounts] = useState<Counts | undefined>();
  const [failure, setFailure] = useState<string | undefined>();
  useEffect(() => {
    const query = { limit: 1 };
    Promise.all([
      api(PlatformOrganizations).searchOrganizations({ query }),
      api(PlatformUsers).searchUsers({ query }),
      api(PlatformProjects).searchProjects({ query }),
    ]).then(
      ([organizations, users, projects]) =>
        setCounts({
          organizations: organizations.details?.totalResult ?? 0n,
          users: users.details?.totalResult ?? 0n,
          projects: projects.details?.totalResult ?? 0n,
        }),
      (error: Error) => setFailure(error.message),
    );
  }, [api]);

  return (
    <section aria-labelledby="home-title">
      <h1 id="home-title">Home</h1>
      {failure ? (
        <p role="alert">The instance could not be read: {failure}</p>
      ) : !counts ? (
        <p class="loading">Loading…</p>
      ) : (
        <dl class="counts">
          <div data-testid="count-organizations">
            <dt>Organizations</dt>
            <dd>{counts.organizations.toString()}</dd>
          </div>
          <div data-testid="count-users">
            <dt>Users</dt>
            <dd>{counts.users.toString()}</dd>
          </div>
          <div data-testid="count-projects">
            <dt>Projects</dt>
            <dd>{counts.projects.toString()}</dd>
          </div>
        </dl>
      )}
    </section>
  );
}
