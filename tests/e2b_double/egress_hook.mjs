// egress_hook.mjs: the double's emulation of E2B's egress proxy for a sandbox with allowOut
// (tests/e2b_double/double.py). fetch() to an allowed host is sent to the double, which adds the
// sandbox's transform headers outside this process and forwards to the mapped upstream; every
// other fetch fails as a blocked connection would. A test device, not a wall.
const EGRESS = process.env.E2B_DOUBLE_EGRESS;
const ALLOW = new Set((process.env.E2B_DOUBLE_ALLOW || "").split(",").filter(Boolean));
delete process.env.E2B_DOUBLE_EGRESS;
delete process.env.E2B_DOUBLE_ALLOW;
const realFetch = globalThis.fetch;
globalThis.fetch = async function (input, init) {
  const url = new URL(typeof input === "string" || input instanceof URL ? String(input) : input.url);
  if (url.protocol !== "https:" || !ALLOW.has(url.hostname) || (url.port && url.port !== "443"))
    throw new TypeError("fetch failed", {cause: new Error("connect ECONNREFUSED (egress denied)")});
  return realFetch(EGRESS + "/" + url.hostname + url.pathname + url.search, init);
};
