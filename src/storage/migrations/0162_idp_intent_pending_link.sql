-- A link to an external identity provider waits for the sign-in's second factor (src/login/idp/intents.ts,
-- docs/login.md "Link your account"): the link step proved the local password, and the link is stored only
-- once the session passed every factor the login policy requires of that user (the sign-in's completion).
-- Until then the intent names the user and the session the link is for; it expires with the intent.
ALTER TABLE login_idp_intents ADD COLUMN link_user_id text;
ALTER TABLE login_idp_intents ADD COLUMN link_session_id text;
-- every sign-in's completion asks for the links its auth request holds: only held ones are indexed
CREATE INDEX login_idp_intents_pending_link_idx ON login_idp_intents (instance_id, auth_request_id)
  WHERE link_session_id IS NOT NULL;
