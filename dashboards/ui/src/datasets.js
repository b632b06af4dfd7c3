/* dashboards/ui/src/datasets.js - the datasets (#/datasets, weft.datasets/v1) and one dataset's
 * items at a version (#/dataset/NAME[@V], weft.dataset/v1) with the experiments run over it:
 * the documents `weft dataset list|show --json` and `weft eval list --json` print. */
import { api, attrText, el, pct, short, show, whenNs } from "./dom.js";

export async function viewDatasets() {
  const doc = await api("/api/v1/datasets");
  const rows = doc.datasets.map((d) => el("tr", { class: "clickable", "data-dataset": d.name,
    onclick: () => { location.hash = "#/dataset/" + encodeURIComponent(d.name); } },
    el("td", {}, el("a", { href: "#/dataset/" + encodeURIComponent(d.name), onclick: (e) => e.stopPropagation() }, d.name)),
    el("td", { class: "ds-version" }, d.version), el("td", { class: "ds-items" }, d.items),
    el("td", {}, d.description || el("span", { class: "muted" }, "–")), el("td", {}, whenNs(d.created_ns))));
  show(el("h1", {}, "Datasets"),
    el("p", { class: "muted" }, "Items kept from runs (or written by hand) to try a fixed workflow on: each change makes a new version. ",
      el("a", { href: "#/experiments" }, "Experiments"), " run a workflow over one version."),
    doc.datasets.length
      ? el("table", { id: "datasets" }, el("thead", {}, el("tr", {}, ["name", "version", "items", "description", "created"].map((h) => el("th", {}, h)))),
        el("tbody", {}, rows))
      : el("p", { class: "empty", id: "datasets-empty" }, "No datasets yet. Make one of the failed runs: ",
        el("code", {}, "weft dataset create NAME --from-runs --status failed"),
        ", or add a run from its page (\"Add to dataset\", with the server's token)."));
}

/* An item's JSON value as text: a string as it is, anything else as JSON. */
function valueText(v) {
  return v === null || v === undefined ? el("span", { class: "muted" }, "–") : el("span", { class: "value" }, attrText(v));
}

function itemRow(it) {
  return el("tr", { "data-item": it.id },
    el("td", { title: it.id }, short(it.id)),
    el("td", { class: "ds-input" }, valueText(it.input)),
    el("td", {}, valueText(it.expected)),
    el("td", {}, it.run_id ? el("a", { href: "#/run/" + encodeURIComponent(it.run_id), class: "item-run", "data-run": it.run_id }, short(it.run_id)) : el("span", { class: "muted" }, "–")),
    el("td", { class: "fail-step" }, it.fail_step || el("span", { class: "muted" }, "–")),
    el("td", {}, it.added_version));
}

/* The experiments a dataset was used by (any version), newest first. */
export function experimentsTable(list, id) {
  return el("table", { id },
    el("thead", {}, el("tr", {}, ["experiment", "dataset", "workflow", "status", "pass rate", "items"].map((h) => el("th", {}, h)))),
    el("tbody", {}, list.map((x) => el("tr", { "data-experiment": x.id },
      el("td", {}, el("a", { href: "#/experiment/" + encodeURIComponent(x.id) }, x.name || short(x.id))),
      el("td", {}, x.dataset + "@" + x.dataset_version), el("td", {}, x.workflow || "–"),
      el("td", { class: "status status-" + x.status }, x.status),
      el("td", {}, pct((x.summary || {}).pass_rate)), el("td", {}, (x.summary || {}).items ?? "–")))));
}

export async function viewDataset(ref) {
  const at = ref.lastIndexOf("@");
  const name = at > 0 ? ref.slice(0, at) : ref;
  const doc = await api("/api/v1/datasets/" + encodeURIComponent(name) + (at > 0 ? "?version=" + encodeURIComponent(ref.slice(at + 1)) : ""));
  const ds = doc.dataset;
  const exps = await api("/api/v1/experiments?dataset=" + encodeURIComponent(ds.name)).catch(() => ({ experiments: [] }));
  /* Another version: each one reads as it was. */
  const pick = el("select", { id: "dataset-version", "aria-label": "version of dataset " + ds.name,
    onchange: (e) => { location.hash = "#/dataset/" + encodeURIComponent(ds.name) + "@" + e.target.value; } },
    Array.from({ length: ds.version }, (_, i) => ds.version - i).map((v) =>
      el("option", { value: v, selected: v === doc.version }, "version " + v + (v === ds.version ? " (latest)" : ""))));
  show(el("h1", {}, "Dataset " + ds.name),
    el("div", { class: "cards", id: "dataset-summary" },
      [["version", doc.version + " of " + ds.version], ["items", doc.items.length], ["created", whenNs(ds.created_ns)]]
        .map(([k, v]) => el("div", { class: "card" }, el("span", { class: "muted" }, k), el("b", {}, v)))),
    ds.description ? el("p", { id: "dataset-description" }, ds.description) : null,
    ds.version > 1 ? el("p", {}, pick) : null,
    el("h2", {}, "Items"),
    doc.items.length
      ? el("table", { id: "dataset-items" },
        el("thead", {}, el("tr", {}, ["item", "input", "expected", "source run", "failing step", "added in"].map((h) => el("th", {}, h)))),
        el("tbody", {}, doc.items.map(itemRow)))
      : el("p", { class: "empty", id: "dataset-items-empty" }, "No items in this version: ", el("code", {}, "weft dataset add " + ds.name + " --run ID"), "."),
    el("h2", {}, "Experiments over it"),
    exps.experiments.length ? experimentsTable(exps.experiments, "dataset-experiments")
      : el("p", { class: "muted", id: "dataset-experiments-empty" }, "None yet: ", el("code", {}, "weft eval WORKFLOW --dataset " + ds.name), "."),
    el("p", {}, el("a", { href: "#/datasets" }, "← all datasets")));
}
