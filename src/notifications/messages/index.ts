/**
 * The notification messages (issue 20): what each message type says, in which language, with which
 * placeholders, and where its links lead. docs/notifications.md "Messages".
 */
export { type Branding, DEFAULT_BRANDING, normalColor, normalLogoUrl } from "./layout.ts";
export {
  checkedOrigin,
  inviteUrl,
  LINK_PARAMS,
  LOGIN_PATHS,
  passwordResetUrl,
  signInUrl,
  verifyEmailUrl,
} from "./links.ts";
export {
  type MessageInput,
  type Recipient,
  type RenderedEmail,
  type RenderedMessage,
  type RenderedSms,
  renderMessage,
} from "./render.ts";
export {
  catalogues,
  formatExpiry,
  type LanguageChoice,
  MAX_TEXT_LENGTH,
  messageLanguage,
  type TextLookup,
  textProblem,
} from "./texts.ts";
export {
  type Channel,
  type CodeMessageType,
  LINK_HINT_KEY,
  MESSAGE_TYPES,
  MESSAGES,
  type MessageSpec,
  type MessageType,
  PLACEHOLDERS,
  type Placeholder,
  type SmsMessageType,
  textKeys,
} from "./types.ts";
