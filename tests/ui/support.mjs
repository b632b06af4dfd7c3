// tests/ui/support.mjs - what the explorer's browser tests share: starting `weft serve` on a port
// of its choosing, and running named checks that report, count failures and leave a screenshot.
import { spawn } from "node:child_process";
import path from "node:path";

// `weft serve --addr 127.0.0.1:0` with @p env (+ @p extraEnv, e.g. a token) in @p cwd.
// @return [the process, a promise of its base URL, from the first line it prints].
export function startServe(weft, env, cwd, extraEnv) {
  const proc = spawn(weft, ["serve", "--addr", "127.0.0.1:0"], { env: { ...env, ...extraEnv }, cwd, stdio: ["ignore", "ignore", "pipe"] });
  const url = new Promise((resolve, reject) => {
    let err = "";
    const t = setTimeout(() => reject(new Error("weft serve did not start: " + err)), 10000);
    proc.stderr.on("data", (d) => {
      err += d;
      const m = /http:\/\/127\.0\.0\.1:(\d+)\//.exec(err);
      if (m) { clearTimeout(t); resolve(`http://127.0.0.1:${m[1]}`); }
    });
    proc.on("exit", (code) => reject(new Error(`weft serve exited ${code}: ${err}`)));
  });
  return [proc, url];
}

// Checks on @p page: check(name, fn) runs fn, prints "ok" or "FAIL" with the error, and saves a
// full-page screenshot as ARTIFACTS/PREFIX-NAME.png; failures() is how many failed.
export function checker(page, artifacts, prefix = "") {
  let failed = 0;
  async function check(name, fn) {
    try {
      await fn();
      console.log("ok   " + name);
    } catch (e) {
      failed++;
      console.log("FAIL " + name + ": " + (e && e.stack ? e.stack : e));
    }
    await page.screenshot({ path: path.join(artifacts, prefix + name.replace(/[^a-z0-9]+/gi, "-") + ".png"), fullPage: true }).catch(() => {});
  }
  return { check, failures: () => failed };
}
