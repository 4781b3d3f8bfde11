-- Whose branding and texts the sign-ins of a project's applications show (docs/branding.md "Projects: whose
-- branding a sign-in shows"): PrivateLabelingSetting of the projects API, 0 UNSPECIFIED (the instance's
-- until the user is known, as before), 1 ENFORCE_PROJECT_RESOURCE_OWNER_POLICY, 2
-- ALLOW_LOGIN_USER_RESOURCE_OWNER_POLICY. Existing projects keep 0, which their events imply.
ALTER TABLE projects ADD COLUMN private_labeling_setting smallint NOT NULL DEFAULT 0;
-- The organization whose branding and texts a message of a sign-in takes instead of its recipient's (a
-- project's ENFORCE setting); null: the recipient's organization's (src/notifications/worker.ts).
ALTER TABLE notification_messages ADD COLUMN branding_org_id text;
