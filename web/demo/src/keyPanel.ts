/**
 * The panel that says where this tab's key lives and lets the person take it along: the
 * key sits in this browser's localStorage for the page's origin, in one named entry, bound
 * to one endpoint, and is never sent (only signatures leave the page). Export shows a
 * warning first, then offers the key file as a download and on the clipboard; import takes
 * such a file (or a bare secret) and makes it the key for this endpoint, after saying which
 * address it replaces.
 *
 * Owns: `keyPanel` and its `data-testid` hooks: `key-panel`, `key-location`,
 * `key-export`, `key-export-warning`, `key-download`, `key-copy`, `key-import-text`,
 * `key-import`, `key-import-result`.
 *
 * Never: shows the secret before the person asked for the export, or puts it in a URL
 * other than the download's own short-lived blob.
 */

import { element } from "./dom.js";
import { addressText } from "./feed.js";
import { type Identity, exportIdentity, parseImport, replaceIdentity } from "./identity.js";

/** The key panel for `identity`; `imported` runs after an import replaced the key (the page reloads). */
export function keyPanel(identity: Identity, origin: string, storage: Storage, imported: () => void): HTMLElement {
  const address = addressText(identity.key.address);
  const location = element(
    "p",
    { "data-testid": "key-location" },
    "Your key lives in this browser's localStorage for ",
    element("code", {}, origin),
    ", entry ",
    element("code", {}, identity.slot),
    ", bound to ",
    element("code", {}, identity.endpoint),
    " and used nowhere else. It is never sent: only signatures leave this page. Clearing this site's data deletes it.",
  );
  const exportArea = element("div", { class: "export" });
  const exportButton = element("button", { type: "button", "data-testid": "key-export" }, "export the key…");
  exportButton.addEventListener("click", () => {
    exportButton.disabled = true;
    exportArea.replaceChildren(...exportControls(identity, address));
  });
  return element(
    "details",
    { class: "key", "data-testid": "key-panel" },
    element("summary", {}, "your key: where it lives, export, import"),
    location,
    element("p", {}, exportButton),
    exportArea,
    importControls(identity, address, storage, imported),
  );
}

function exportControls(identity: Identity, address: string): Node[] {
  const file = exportIdentity(identity);
  const url = URL.createObjectURL(new Blob([file], { type: "application/json" }));
  const download = element(
    "a",
    { href: url, download: `bps-demo-key-${address}.json`, "data-testid": "key-download" },
    "download the key file",
  );
  const copy = element("button", { type: "button", "data-testid": "key-copy" }, "copy it");
  const copied = element("span", { class: "copied" }, "");
  copy.addEventListener("click", () => {
    // Only secure contexts (https, localhost) have a clipboard; elsewhere the download remains.
    if (navigator.clipboard === undefined) {
      copied.textContent = " no clipboard on a page that is not https; use the download";
      return;
    }
    navigator.clipboard.writeText(file).then(
      () => (copied.textContent = " copied"),
      () => (copied.textContent = " the browser refused the clipboard; use the download"),
    );
  });
  return [
    element(
      "p",
      { class: "warning", "data-testid": "key-export-warning" },
      `Anyone who gets this file can sign as ${address} at ${identity.endpoint}, as you, for good: it cannot be revoked. `,
      "Keep it where only you can read it, and never paste it into a page you do not trust.",
    ),
    element("p", {}, download, " ", copy, copied),
  ];
}

function importControls(identity: Identity, address: string, storage: Storage, imported: () => void): HTMLElement {
  const text = element("textarea", { rows: "3", placeholder: "an exported key file, or 64 hex digits", "data-testid": "key-import-text" });
  const button = element("button", { type: "button", "data-testid": "key-import" }, "import: use this key here");
  const result = element("p", { "data-testid": "key-import-result" }, "");
  button.addEventListener("click", () => {
    const parsed = parseImport(text.value);
    if (typeof parsed === "string") {
      result.textContent = `not imported: ${parsed}`;
      return;
    }
    replaceIdentity(storage, identity.name, identity.endpoint, parsed.key);
    text.value = "";
    const from =
      parsed.endpoint === undefined || parsed.endpoint === identity.endpoint ? "" : ` (the file was made for ${parsed.endpoint})`;
    result.textContent = `imported ${addressText(parsed.key.address)} for ${identity.endpoint}${from}, replacing ${address}; reloading`;
    imported();
  });
  return element(
    "div",
    { class: "import" },
    element("p", {}, `Import replaces ${address} for this endpoint; export it first if you want to keep it.`),
    text,
    element("p", {}, button),
    result,
  );
}
