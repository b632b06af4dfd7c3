/* dashboards/ui/src/add_dataset.js - "Add to dataset" on a run's page: POST
 * /api/v1/datasets/NAME/items {"run_id", "create"} (docs/serve.md), offered only when the server
 * has its token and the page is logged in with it (GET /api/v1/session: can_add_to_dataset).
 * An existing dataset is picked from the list, or a new name typed; the answer says the version
 * made, or the server's error as it is. */
import { api, el } from "./dom.js";

const NEW = " new"; /* no dataset name holds a space */
let session = null;

export function addToDatasetBox(r) {
  const box = el("div", { class: "block add-dataset", id: "add-dataset-box", hidden: true });
  (async () => {
    session = session || api("/api/v1/session").catch(() => ({}));
    if (!(await session).can_add_to_dataset || r.status === "running") return;
    const doc = await api("/api/v1/datasets");
    const pick = el("select", { id: "add-dataset-pick", "aria-label": "the dataset to add this run to" },
      doc.datasets.map((d) => el("option", { value: d.name }, d.name + " (version " + d.version + ", " + d.items + " items)")),
      el("option", { value: NEW, selected: doc.datasets.length === 0 }, "a new dataset…"));
    const name = el("input", { id: "add-dataset-name", type: "text", placeholder: "name: letters, digits, - _ .",
      "aria-label": "name of the new dataset", hidden: doc.datasets.length !== 0 });
    const result = el("p", { id: "add-dataset-result", role: "status", "aria-live": "polite" });
    const err = el("p", { class: "status-failed", id: "add-dataset-error", role: "alert" });
    const submit = el("button", { id: "add-dataset-submit", type: "submit" }, "Add this run");
    const form = el("form", { id: "add-dataset-form", hidden: true, "aria-label": "add this run to a dataset" },
      el("label", {}, "Dataset ", pick), " ", name, " ", submit, result, err);
    pick.addEventListener("change", () => { name.hidden = pick.value !== NEW; if (!name.hidden) name.focus(); });
    const open = el("button", { id: "add-dataset-open", type: "button", "aria-expanded": "false", "aria-controls": "add-dataset-form",
      onclick: () => {
        form.hidden = !form.hidden;
        open.setAttribute("aria-expanded", String(!form.hidden));
        if (!form.hidden) pick.focus();
      } }, "Add to dataset");
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const isNew = pick.value === NEW;
      const target = isNew ? name.value.trim() : pick.value;
      result.textContent = "";
      err.textContent = "";
      if (!target) { err.textContent = "Give the new dataset a name."; name.focus(); return; }
      submit.disabled = true;
      try {
        const resp = await fetch("/api/v1/datasets/" + encodeURIComponent(target) + "/items", { method: "POST", credentials: "same-origin",
          headers: { "Content-Type": "application/json" }, body: JSON.stringify({ run_id: r.run_id, create: isNew }) });
        const body = await resp.json().catch(() => ({}));
        if (resp.status !== 201) throw new Error((body.error && body.error.message) || resp.status + " " + resp.statusText);
        /* The list says the new version (and holds a dataset just made). */
        const label = body.dataset + " (version " + body.version + ")";
        const opt = [...pick.options].find((o) => o.value === body.dataset);
        if (opt) opt.textContent = label;
        else pick.insertBefore(el("option", { value: body.dataset }, label), pick.lastChild);
        pick.value = body.dataset;
        name.hidden = true;
        result.replaceChildren("Added to " + body.dataset + ", version " + body.version + " ",
          el("a", { href: "#/dataset/" + encodeURIComponent(body.dataset) + "@" + body.version, id: "add-dataset-link" }, "(open it)"));
      } catch (x) {
        err.textContent = "Could not add: " + x.message;
      } finally {
        submit.disabled = false;
      }
    });
    box.replaceChildren(el("h3", {}, "Dataset"), open, form);
    box.hidden = false;
  })().catch(() => {});
  return box;
}
