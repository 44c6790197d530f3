// The page: it reads the boxes, calls the Rust (admit, diagnose, scenarios) and draws what comes
// back. No rule is decided here.
import init, { admit, diagnose, scenarios } from "./ome_spread_web.js";

const $ = (id) => document.getElementById(id);
const element = (tag, attributes = {}, ...children) => {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  node.append(...children);
  return node;
};

// The module's answer as JSON; a failure inside it (which would otherwise reach only the
// console) becomes an answer with an error.
function call(f, ...args) {
  try {
    return JSON.parse(f(...args));
  } catch (failure) {
    return { error: `The playground failed on this input (${failure}); please report it with the input.` };
  }
}

function showError(id, message) {
  $(id).hidden = !message;
  $(id).textContent = message || "";
}

function runAdmission() {
  const objects = $("admit-objects").value, pod = $("admit-pod").value;
  $("admit-result").hidden = true;
  if (!pod.trim()) return showError("admit-error", "");
  const answer = call(admit, objects, pod, $("settings").value);
  showError("admit-error", answer.error);
  if (answer.error) return;
  $("verdict").className = "verdict " + (answer.accepted ? "accepted" : "rejected");
  $("verdict").textContent = answer.accepted
    ? answer.mutated ? "Accepted, with the terms below added or completed" : "Accepted unchanged"
    : "Rejected: " + answer.message;
  $("warnings").replaceChildren(...answer.warnings.map((w) => element("li", {}, "Warning: " + w)));
  $("pod").replaceChildren(
    ...answer.lines.map((line) => element("span", { class: line.added ? "line added" : "line" }, line.text + "\n")),
  );
  $("patch").textContent = JSON.stringify(answer.patch, null, 2);
  $("admit-result").hidden = false;
  // The first line the policy added, in view inside the pod's box.
  const added = $("pod").querySelector(".added");
  $("pod").scrollTop = added ? added.offsetTop - $("pod").offsetTop - 48 : 0;
}

function runDiagnosis() {
  const objects = $("diagnose-objects").value;
  $("diagnose-result").replaceChildren();
  if (!objects.trim()) return showError("diagnose-error", "");
  const answer = call(diagnose, objects, $("settings").value);
  showError("diagnose-error", answer.error);
  if (answer.error) return;
  for (const service of answer.services) {
    const title = element("h3", {}, `InferenceService ${service.namespace}/${service.name}`);
    if (service.error) {
      $("diagnose-result").append(title, element("div", { class: "error", role: "alert" }, service.error));
      continue;
    }
    $("diagnose-result").append(title, ...service.components.map(component));
  }
}

function component(c) {
  const holds = c.status === "True";
  return element(
    "article",
    { class: "component", "data-component": c.component },
    element("h4", {}, `${c.component} (${c.replica})`),
    element("p", { class: "reason " + (holds ? "holds" : "fails") },
      `Spread: ${c.status} (`, element("strong", { class: "reason-name" }, c.reason), ")"),
    element("p", {}, "Why: " + c.why + "."),
    element("p", {}, "What to do: " + c.action),
    plan(c),
    picture(c),
    ...c.tables.map((rows) => table(rows)),
    losses(c),
    element("details", {}, element("summary", {}, "As ome-spread explain prints it"), element("pre", {}, c.text)),
  );
}

// One of the Step 2 tables of OME's how-to (or another of explain's), its first row the header.
function table([header, ...rows], kind = "step2") {
  return element("table", { class: kind },
    element("thead", {}, element("tr", {}, ...header.map((cell) => element("th", { scope: "col" }, cell)))),
    element("tbody", {}, ...rows.map((row) => element("tr", {}, ...row.map((cell) => element("td", {}, cell))))));
}

// What losing each domain or rack leaves, worst first, and the worst loss in one sentence.
function losses(c) {
  if (!c.losses) {
    return "";
  }
  return element("section", { class: "losses" },
    table(c.losses.table, "losses"),
    c.losses.sentence ? element("p", { class: "loss-sentence" }, c.losses.sentence) : "");
}

// The rebalance plan: each move with the command that requests it (why a skew has none is
// in What to do).
function plan(c) {
  if (!c.moves.length) {
    return "";
  }
  return element("ol", { class: "moves" }, ...c.moves.map((m) => element("li", {},
    `Move Instance ${m.instance} from ${m.fromNode} (${m.fromDomain}) to ${m.toDomain}: `,
    element("code", {}, m.command))));
}

// One column per eligible domain, one box per Instance (its leader on top of its workers), and
// the plan's moves as arrows from an Instance to where it would go.
function picture(c) {
  const figure = element("figure", { class: "picture" });
  if (!c.key) {
    figure.append(element("figcaption", {}, "No spread key in effect: no domains to draw."));
    return figure;
  }
  const columns = element("div", { class: "domains" });
  for (const d of c.domains) {
    const column = element("div", { class: "domain", "data-domain": d.domain ?? "" },
      element("h5", {}, d.domain === null ? "not in an eligible domain" : `${d.domain} (${d.instances.length})`));
    if (d.domain !== null && c.losses) {
      column.title = `Click to show ${d.domain} lost`;
      column.addEventListener("click", () => showLoss(columns, c, d.domain));
    }
    for (const instance of d.instances) {
      const box = element("div", { class: "instance", "data-instance": String(instance.index),
        "data-anchor": instance.pods[0]?.name ?? "" },
        element("div", { class: "instance-title" }, instance.index === null ? "no Instance index" : `Instance ${instance.index}`));
      for (const pod of instance.pods) {
        const pending = pod.node === null;
        box.append(element("div", { class: "pod " + pod.runner + (pending ? " pending" : ""), title: pod.name },
          `${pod.runner} · ${pending ? "Pending" : pod.node}`));
      }
      column.append(box);
    }
    c.moves.forEach((m, step) => {
      if (m.toDomain === d.domain) {
        column.append(element("div", { class: "instance planned", "data-move": String(step) },
          `Instance ${m.instance}, after move ${step + 1}`));
      }
    });
    columns.append(column);
  }
  if (c.moves.length) {
    requestAnimationFrame(() => arrows(columns, c.moves.map((m, step) => [
      columns.querySelector(`.instance[data-instance="${m.instance}"]`),
      columns.querySelector(`.planned[data-move="${step}"]`),
    ])));
  }
  const key = c.key.split("/").pop();
  figure.append(columns, element("figcaption", {},
    `Instances per ${key}: skew ${c.skew}, maxSkew ${c.maxSkew}`));
  return figure;
}

// A domain shown as lost, or back as it is when clicked again: the Instances with a
// pod there greyed, and an arrow from each one the scheduler could place again to where it
// would go, as the rebalance moves are drawn.
function showLoss(columns, c, domain) {
  const shown = columns.dataset.lost;
  for (const node of columns.querySelectorAll(".lost, .replaced, .arrows.loss")) {
    if (node.classList.contains("replaced") || node.classList.contains("arrows")) node.remove();
    else node.classList.remove("lost");
  }
  delete columns.dataset.lost;
  const loss = c.losses.domains.find((l) => l.domain === domain);
  if (shown === domain || !loss) return;
  columns.dataset.lost = domain;
  columns.querySelector(`.domain[data-domain="${CSS.escape(domain)}"]`)?.classList.add("lost");
  const lost = loss.lost.map((anchor) => columns.querySelector(`.instance[data-anchor="${CSS.escape(anchor)}"]`));
  for (const box of lost) box?.classList.add("lost");
  const pairs = loss.placedAgain.map((zone, i) => {
    const place = element("div", { class: "instance replaced" },
      `${lost[i]?.querySelector(".instance-title")?.textContent ?? "An Instance"}, placed again`);
    columns.querySelector(`.domain[data-domain="${CSS.escape(zone)}"]`)?.append(place);
    return [lost[i], place];
  });
  arrows(columns, pairs, "loss");
}

// An arrow per pair of boxes, drawn once the columns are laid out: from an Instance's box to its
// planned place (a move's, or a repair's when `kind` is "loss").
let drawings = 0;
function arrows(columns, pairs, kind = "") {
  const head = `head-${++drawings}`;
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("class", `arrows ${kind}`.trim());
  svg.setAttribute("width", columns.scrollWidth);
  svg.setAttribute("height", columns.scrollHeight);
  svg.innerHTML = `<defs><marker id="${head}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" ` +
    `markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z"/></marker></defs>`;
  const origin = columns.getBoundingClientRect();
  for (const [from, to] of pairs) {
    if (!from || !to) continue;
    const [a, b] = [from.getBoundingClientRect(), to.getBoundingClientRect()];
    const rightward = b.left > a.left;
    const x1 = (rightward ? a.right : a.left) - origin.left, y1 = a.top + a.height / 2 - origin.top;
    const x2 = (rightward ? b.left : b.right) - origin.left, y2 = b.top + b.height / 2 - origin.top;
    const path = document.createElementNS("http://www.w3.org/2000/svg", "path");
    path.setAttribute("d", `M ${x1} ${y1} C ${(x1 + x2) / 2} ${y1}, ${(x1 + x2) / 2} ${y2}, ${x2} ${y2}`);
    path.setAttribute("marker-end", `url(#${head})`);
    svg.append(path);
  }
  columns.append(svg);
}

function run() {
  runAdmission();
  runDiagnosis();
}

function loadMenu(menu) {
  const groups = new Map();
  menu.forEach((scenario, i) => {
    if (!groups.has(scenario.group)) {
      groups.set(scenario.group, element("optgroup", { label: scenario.group }));
      $("scenario").append(groups.get(scenario.group));
    }
    groups.get(scenario.group).append(element("option", { value: String(i) }, scenario.title));
  });
  $("scenario").addEventListener("change", () => {
    const scenario = menu[Number($("scenario").value)];
    if (!scenario) return;
    $("admit-objects").value = scenario.admit?.objects ?? "";
    $("admit-pod").value = scenario.admit?.pod ?? "";
    $("diagnose-objects").value = scenario.diagnose?.objects ?? "";
    $("settings").value = scenario.admit?.settings ?? scenario.diagnose?.settings ?? "";
    run();
  });
}

// A file dropped on a box replaces its text.
function acceptDrops(box, rerun) {
  box.addEventListener("dragover", (event) => event.preventDefault());
  box.addEventListener("drop", async (event) => {
    event.preventDefault();
    const file = event.dataTransfer.files[0];
    if (file) {
      box.value = await file.text();
      rerun();
    }
  });
}

let pending;
try {
  await init();
} catch (error) {
  document.querySelector("main").replaceChildren(element("div", { class: "error", role: "alert" },
    `The playground's module did not load: ${error}. Serve target/playground as make web built it, .wasm as application/wasm.`));
  throw error;
}
loadMenu(JSON.parse(scenarios()));
// A first visit shows OME's how-to example rather than empty boxes.
$("scenario").value = "0";
$("scenario").dispatchEvent(new Event("change"));
// A box re-runs only its own pane (the settings, both): a whole cluster pasted into the diagnosis
// takes seconds, and editing the pod should not wait for it.
const panes = { "admit-objects": runAdmission, "admit-pod": runAdmission, "diagnose-objects": runDiagnosis };
for (const box of document.querySelectorAll("textarea")) {
  const rerun = panes[box.id] ?? run;
  acceptDrops(box, rerun);
  box.addEventListener("input", () => {
    clearTimeout(pending);
    pending = setTimeout(rerun, 250);
  });
}
document.body.dataset.ready = "true";
