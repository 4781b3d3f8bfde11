/**
 * `npm run screenshots`: screenshots of every login UI page in light and dark mode at phone and desktop
 * widths, written to docs/images/login-<page>-<scheme>-<phone|desktop>.png (shown in docs/login.md).
 * Runs a Platform in this process on a fresh embedded database and Debian's Chromium (CHROMIUM_PATH); the
 * pages of external identity providers (login-idp-*) come from a second Platform whose second instance is
 * the provider (test/idp-federation.ts). The pages of e-mailed codes (reset, verification, invitation)
 * open the links of messages a local SMTP server received (test/login-codes-walk.ts); the second-factor
 * pages (login-mfa-*, login-passkey, login-account-security) come from test/mfa-walk.ts.
 */
import path from "node:path";
import type { Page } from "playwright-core";
import { startFederation } from "../test/idp-federation.ts";
import { addHuman, startLoginPlatform } from "../test/login.ts";
import {
  addIdpWalkSetup,
  addWalkUsers,
  type IdpPageName,
  type LoginPageName,
  launchChromium,
  PASSWORD,
  startClientApp,
  visitIdpPages,
  visitLoginPages,
} from "../test/login-browser.ts";
import { addWalkMail, type CodePageName, visitCodePages } from "../test/login-codes-walk.ts";
import { addMfaWalkOrgs, type MfaPageName, visitMfaPages } from "../test/mfa-walk.ts";

const outDir = path.resolve(import.meta.dirname, "..", "docs", "images");
const sizes = {
  phone: { width: 390, height: 844 },
  desktop: { width: 1200, height: 820 },
} as const;

const platform = await startLoginPlatform();
const client = await startClientApp();
const federation = await startFederation(client);
const browser = await launchChromium();
const mail = await addWalkMail(platform);
// a walk through the codes' pages per picture set: new people each time (at most 3 codes a minute each)
const codePeople = [
  { resetUser: "rosa", newUser: "nina", invitedUser: "olga" },
  { resetUser: "sofia", newUser: "nora", invitedUser: "oskar" },
  { resetUser: "tanja", newUser: "noemi", invitedUser: "otto" },
  { resetUser: "ursula", newUser: "nadia", invitedUser: "olivia" },
];
try {
  await addWalkUsers(platform);
  await addIdpWalkSetup(federation);
  const mfaOrgs = await addMfaWalkOrgs(mail, platform);
  const written: string[] = [];
  let pictureSet = 0;
  for (const colorScheme of ["light", "dark"] as const) {
    for (const [size, viewport] of Object.entries(sizes)) {
      const options = {
        colorScheme,
        viewport,
        deviceScaleFactor: 1,
        locale: "en-US",
        timezoneId: "Europe/Zurich",
      };
      const shoot = async (name: LoginPageName | IdpPageName | CodePageName | MfaPageName, page: Page) => {
        // no text cursor blinking into the picture
        await page.evaluate("document.activeElement && document.activeElement.blur()");
        const file = path.join(outDir, `login-${name}-${colorScheme}-${size}.png`);
        await page.screenshot({ path: file, fullPage: true });
        written.push(path.relative(process.cwd(), file));
      };
      await visitLoginPages(platform, client, browser, options, shoot);
      await visitIdpPages(federation, browser, options, shoot);
      const people = codePeople.shift()!;
      await addHuman(platform, people.resetUser, PASSWORD);
      await visitCodePages(platform, client, browser, mail, people, options, shoot);
      await visitMfaPages(platform, client, browser, mail, mfaOrgs, String(++pictureSet), options, shoot);
    }
  }
  console.log(`wrote ${written.length} screenshots to ${path.relative(process.cwd(), outDir)}`);
} finally {
  await browser.close();
  await mail.close();
  await client.close();
  await federation.platform.stop();
  await platform.stop();
}
