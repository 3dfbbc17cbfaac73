// Harvests the tools/list of the MCP servers pinned in package.json into one JSON
// corpus for the discovery benchmark: {"servers":[{"server":..., "tools":[...]}]}.
// Each server runs over stdio with placeholder credentials (only its tool list is
// read; no tool is called) and HOME in a scratch folder, so nothing leaves this
// machine but what a server does at start. Usage: node harvest.mjs OUT.json
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { mkdtempSync, writeFileSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), "cantus-corpus-"));
const fake = "placeholder-not-a-credential";

function bin(pkg, name) {
  const dir = join(here, "node_modules", pkg);
  const j = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  const rel = typeof j.bin === "string" ? j.bin : j.bin[name ?? Object.keys(j.bin)[0]];
  return join(dir, rel);
}

// Each server: the package, the prefix a gateway would give its tools (imports[].prefix,
// so that names such as create_issue of GitHub and GitLab do not collide), its
// arguments and the environment it needs to start.
const servers = [
  { pkg: "@modelcontextprotocol/server-everything", alias: "everything", args: ["stdio"] },
  { pkg: "@modelcontextprotocol/server-filesystem", alias: "fs", args: [scratch] },
  { pkg: "@modelcontextprotocol/server-memory", alias: "memory", env: { MEMORY_FILE_PATH: join(scratch, "memory.jsonl") } },
  { pkg: "@modelcontextprotocol/server-sequential-thinking", alias: "thinking" },
  { pkg: "@modelcontextprotocol/server-github", alias: "github", env: { GITHUB_PERSONAL_ACCESS_TOKEN: fake } },
  { pkg: "@modelcontextprotocol/server-gitlab", alias: "gitlab", env: { GITLAB_PERSONAL_ACCESS_TOKEN: fake, GITLAB_API_URL: "http://127.0.0.1:9/api/v4" } },
  { pkg: "@modelcontextprotocol/server-slack", alias: "slack", env: { SLACK_BOT_TOKEN: fake, SLACK_TEAM_ID: "T0" } },
  { pkg: "@modelcontextprotocol/server-google-maps", alias: "gmaps", env: { GOOGLE_MAPS_API_KEY: fake } },
  { pkg: "@modelcontextprotocol/server-brave-search", alias: "brave", env: { BRAVE_API_KEY: fake } },
  { pkg: "@modelcontextprotocol/server-puppeteer", alias: "puppeteer" },
  { pkg: "@playwright/mcp", alias: "playwright", args: ["--headless"] },
  { pkg: "chrome-devtools-mcp", alias: "devtools", name: "chrome-devtools-mcp", args: ["--headless", "--no-usage-statistics"] },
  { pkg: "@notionhq/notion-mcp-server", alias: "notion", env: { NOTION_TOKEN: fake } },
  { pkg: "mcp-server-kubernetes", alias: "k8s" },
  { pkg: "firecrawl-mcp", alias: "firecrawl", env: { FIRECRAWL_API_KEY: fake } },
  { pkg: "@cyanheads/git-mcp-server", alias: "git", env: { MCP_TRANSPORT_TYPE: "stdio", GIT_BASE_DIR: scratch, MCP_LOG_LEVEL: "error" } },
  { pkg: "tavily-mcp", alias: "tavily", env: { TAVILY_API_KEY: fake } },
  { pkg: "@circleci/mcp-server-circleci", alias: "circleci", env: { CIRCLECI_TOKEN: fake } },
  { pkg: "@mapbox/mcp-server", alias: "mapbox", env: { MAPBOX_ACCESS_TOKEN: "pk.placeholder" } },
  { pkg: "@pinecone-database/mcp", alias: "pinecone", env: { PINECONE_API_KEY: fake } },
  { pkg: "@kazuph/mcp-taskmanager", alias: "tasks", env: { TASK_MANAGER_FILE_PATH: join(scratch, "tasks.json") } },
];

async function harvest(s) {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [bin(s.pkg, s.name), ...(s.args ?? [])],
    env: { PATH: process.env.PATH, HOME: scratch, DO_NOT_TRACK: "1", NODE_ENV: "production", ...s.env },
    stderr: "ignore",
  });
  const client = new Client({ name: "cantus-discovery-corpus", version: "0.0.0" });
  const timer = new Promise((_, reject) => setTimeout(() => reject(new Error("timed out")), 30000));
  try {
    await Promise.race([client.connect(transport), timer]);
    const tools = [];
    let cursor;
    do {
      const page = await Promise.race([client.listTools(cursor ? { cursor } : {}), timer]);
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor);
    return tools;
  } finally {
    await client.close().catch(() => {});
  }
}

const out = { servers: [] };
for (const s of servers) {
  try {
    const tools = await harvest(s);
    out.servers.push({ server: s.pkg, alias: s.alias, version: JSON.parse(readFileSync(join(here, "node_modules", s.pkg, "package.json"), "utf8")).version, tools });
    console.error(`corpus: ${s.pkg}: ${tools.length} tools`);
  } catch (err) {
    console.error(`corpus: ${s.pkg}: left out: ${err.message}`);
  }
}
writeFileSync(process.argv[2] ?? "/dev/stdout", JSON.stringify(out));
process.exit(0);
